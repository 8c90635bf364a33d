package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/stormguard/stormguard/analyze"
	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim/scenario"
)

const analyzeHelp = `Usage: stormguard analyze FILE [--run NAME] [--out DIR] [--json]

Computes the retry-storm checklist of a scenario FILE (the YAML of
stormguard sim: clients, services, calls, policies; see examples/) without
simulating it, for the base scenario (when no run leaves it unchanged) and
every run:

  - every dependency path from each client, with its worst-case
    amplification: the product of the max attempts of its layers, and the
    figure the retry budgets allow (a 10 % budget: about 1.1× per layer);
  - every service's capacity (workers ÷ the time a request holds a worker)
    and the rate above which it is vulnerable (capacity ÷ amplification),
    against the clients' configured rates; for a service without calls
    that one client calls, the fluid model's collapse and recovery loads;
  - findings, each with a rule, a severity, where, the numbers and what to
    change: overloaded, vulnerable, layered-retries, timeout-exceeds-caller,
    retries-exceed-caller, timeout-exceeds-deadline, retries-unretryable,
    ignores-pushback, missing-budget, missing-jitter, and for the
    simulator's mechanisms cache-hides-load, thrashing, hang-holds-workers,
    crash-before-shed, costly-failures, and for autoscalers and runbooks
    cpu-blind-autoscaler, no-off-switch.

docs/analyze.md states every rule and formula.

Flags (before or after FILE; -flag and --flag are the same):
  --run NAME  analyse only the run NAME ("(base)" for the base scenario)
  --out DIR   also write a report into DIR (made if missing): index.html
              (one self-contained page: the verdict, what to change, the
              key numbers, the findings and the charts), analysis.json
              (the JSON of --json), and PNG + SVG charts: amplification
              per dependency path, vulnerable load against the configured
              rate, and the fluid model's goodput against load (when a
              service fits it); written before the exit status is decided
  --json      print one JSON object on stdout instead of the text:
              {"file", "scenario", "analyses": [{"run", "paths",
              "services", "findings": [{"rule", "severity", "where",
              "message", "fix", "numbers"}]}], "errors", "warnings", "notes"}
  -h, --help  print this help

Exit status: 0 no finding of severity error, 1 at least one (so it can gate
CI), 2 usage error or bad input (a missing or invalid scenario file).
`

// findingsError is the error that makes analyze exit with status 1 when a
// rule at severity error is broken.
type findingsError struct{ errors, runs int }

// Error says how many error findings, in how many runs.
func (e findingsError) Error() string {
	f, r := "findings", "runs"
	if e.errors == 1 {
		f = "finding"
	}
	if e.runs == 1 {
		r = "run"
	}
	return fmt.Sprintf("analyze: %d error %s in %d %s (exit status 1)", e.errors, f, e.runs, r)
}

// runAnalyze is `stormguard analyze`.
func runAnalyze(_ context.Context, args []string, stdout, _ io.Writer) error {
	var asJSON bool
	var only, out string
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of the text")
	fs.StringVar(&only, "run", "", "analyse only the run `NAME`")
	fs.StringVar(&out, "out", "", "write a report into `DIR`")
	pos, helped, err := parseCommand(fs, args, analyzeHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("analyze", pos, true); err != nil {
		return err
	}
	file, err := scenario.Load(pos[0])
	if err != nil {
		return badInput(err)
	}
	rep, err := analyze.File(file)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", pos[0], err))
	}
	if only != "" {
		if rep, err = selectRun(rep, only); err != nil {
			return err
		}
	}
	if out != "" {
		if err := report.WriteAnalyze(out, rep); err != nil {
			return fmt.Errorf("analyze: report: %w", err)
		}
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		if err := rep.WriteText(stdout); err != nil {
			return err
		}
		if out != "" {
			fmt.Fprintf(stdout, "Report: %s\n", filepath.Join(out, "index.html"))
		}
	}
	if rep.Errors > 0 {
		runs := 0
		for _, a := range rep.Analyses {
			if a.Count(analyze.Error) > 0 {
				runs++
			}
		}
		return findingsError{rep.Errors, runs}
	}
	return nil
}

// selectRun keeps only the analysis of the named run and recounts.
func selectRun(rep analyze.Report, name string) (analyze.Report, error) {
	var names []string
	for _, a := range rep.Analyses {
		if a.Run == name {
			rep.Analyses = []analyze.Analysis{a}
			rep.Errors, rep.Warnings, rep.Notes = a.Count(analyze.Error), a.Count(analyze.Warning), a.Count(analyze.Info)
			return rep, nil
		}
		names = append(names, a.Run)
	}
	return rep, usageError{fmt.Sprintf("analyze: no run %q in %s (runs: %s)", name, rep.File, strings.Join(names, ", "))}
}
