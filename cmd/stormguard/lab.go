package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

const labHelp = `Usage: stormguard lab [FILE] [--out DIR] [--seed N] [--json]

Runs every run of the scenario FILE (YAML, the format of stormguard sim)
with real processes on 127.0.0.1, one after the other, in wall-clock time:
a load generator (the scenario's client), an app tier (the service it
calls, when that service calls another), a TCP fault proxy and a backend
(the last service), all started from this binary. The proxy holds or cuts
the network, or adds latency, during the scenario's triggers. Each run is
also simulated, and the two goodput curves are compared.

Without FILE it runs the built-in lab-hotos scenario: the HotOS '21 toy
example scaled to a small machine (a database of 300 queries/s at 93 %
load, a 5 s network hold, an app that retries once), first with naive
retries, then with stormguard's policy and server defenses. It takes about
a minute.

It prints the table of stormguard sim (verdict, recovery, demand and
goodput after the trigger, retries, wasted work, give-ups), then for each
run how its requests ended (every request sent ends in exactly one
outcome: ok, timed out, shed or an error by kind) and how far the lab's
goodput was from the simulator's.

Flags (before or after FILE; -flag and --flag are the same):
  --out DIR   also write a report into DIR (made if missing): what
              stormguard sim writes (index.html, summary.json, RUN.csv,
              RUN.png, RUN.svg) for the lab's runs, plus lab.png and lab.svg
              (every run side by side: the lab's goodput beside the
              simulator's and their difference), compare.csv and lab.json
  --seed N    use seed N in every run instead of the file's (default 0)
  --json      print one JSON object on stdout instead of the table:
              {"scenario": NAME, "runs": [{"name", "verdict", "recovery_s",
              …}], "sim": [the simulator's runs], "sim_vs_lab": […],
              "outcomes": […]}
  -h, --help  print this help

A progress bar appears on stderr when it is a terminal. Ctrl-C stops the
run and every process it started.

Exit status: 0 success (whatever the verdicts), 1 a role that failed, 2
usage error or bad input (a missing or invalid scenario file, a scenario
the lab cannot run), 130 interrupted (Ctrl-C).
`

// labExecutable is the binary the lab's roles run as; tests replace it.
var labExecutable = ""

// runLab is `stormguard lab`, and the hidden `stormguard lab ROLE
// --config FILE` that runs one role of a lab run.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && lab.IsRole(args[0]) {
		return lab.RoleMain(ctx, args[0], args[1:], os.Stdin, stdout)
	}
	var f simFlags
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.set(fs)
	pos, helped, err := parseCommand(fs, args, labHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("lab", pos, false); err != nil {
		return err
	}
	var file scenario.File
	if len(pos) == 0 {
		file, err = lab.Default()
	} else {
		file, err = scenario.Load(pos[0])
	}
	if err != nil {
		return badInput(err)
	}
	var errs []error
	for i := range file.Runs {
		if f.seed != 0 {
			file.Runs[i].Scenario.Seed = f.seed
		}
		if err := lab.Check(file.Runs[i].Scenario); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", file.Runs[i].Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return badInput(err)
	}
	name := file.Base.Name
	if name == "" {
		name = filepath.Base(file.Path)
	}
	// Under `go run`, the end of the go command ends the lab (go run
	// passes no signal on; see lab.WatchGoRun).
	ctx, stopWatch := lab.WatchGoRun(ctx)
	defer stopWatch()
	start := time.Now()
	out, err := labRuns(ctx, file.Runs, stderr)
	if err != nil {
		return err
	}
	out.Scenario, out.Description = name, file.Base.Description
	changes := map[string][]string{}
	for _, r := range file.Runs {
		changes[r.Name] = r.Changes
	}
	if f.out != "" {
		if err := lab.WriteReport(f.out, out, changes); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if f.json {
		return json.NewEncoder(stdout).Encode(out)
	}
	printLabTable(stdout, out, changes, time.Since(start))
	printLab(stdout, out)
	if f.out != "" {
		fmt.Fprintf(stdout, "Report: %s\n", filepath.Join(f.out, "index.html"))
	}
	return nil
}

// labRuns runs every run in the lab, one after the other (they would
// compete for the machine), and in the simulator, and compares them.
func labRuns(ctx context.Context, runs []scenario.RunSpec, stderr io.Writer) (lab.Output, error) {
	bar := newProgress(stderr, len(runs))
	defer bar.stop()
	var out lab.Output
	for i, r := range runs {
		rr, err := lab.RunScenario(ctx, r.Scenario, r.Name, lab.Options{Executable: labExecutable,
			Progress: func(frac float64) { bar.set(i, frac) }})
		if err != nil {
			if ctx.Err() != nil {
				return out, interrupted(ctx)
			}
			return out, err
		}
		sr, err := sim.Run(ctx, lab.Normalize(r.Scenario), r.Name, nil)
		if err != nil {
			if ctx.Err() != nil {
				return out, interrupted(ctx)
			}
			return out, fmt.Errorf("run %s: simulating: %w", r.Name, err)
		}
		out.Add(rr, sr)
	}
	return out, nil
}

// printLabTable prints the table of stormguard sim for the lab's runs,
// in real time rather than virtual time. Its advice leaves out the
// inconclusive runs (an inconclusive run measured its machine) and names
// them, as the report's page does (report.Advice).
func printLabTable(w io.Writer, out lab.Output, changes map[string][]string, took time.Duration) {
	var table bytes.Buffer
	printTable(&table, result.Output{Scenario: out.Scenario, Description: out.Description, Runs: out.Runs}, changes, took)
	// The lab's runs take wall-clock time, not the simulator's virtual time.
	io.WriteString(w, strings.Replace(table.String(), " of virtual time ", " in real time on 127.0.0.1 ", 1))
}

// interrupted is the error of a lab stopped by ctx: "interrupted" (exit
// status 130), with the reason when it was not a signal.
func interrupted(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("interrupted: %v: %w", cause, ctx.Err())
	}
	return fmt.Errorf("interrupted: %w", ctx.Err())
}

// printLab prints what the lab adds to the table: the outcomes of every
// request and the comparison with the simulator.
func printLab(w io.Writer, out lab.Output) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Requests (every one ends in exactly one outcome):")
	for _, o := range out.Outcomes {
		check := "adds up"
		if err := o.Outcomes.Check(); err != nil {
			check = "DOES NOT ADD UP"
		}
		fmt.Fprintln(w, wrap(fmt.Sprintf("  %s: %s (%s); after the trigger goodput was %.0f%% of demand", o.Run, o.Outcomes, check, 100*o.After), "    "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap(fmt.Sprintf("The machine (a run is inconclusive past timers %v late at p99, service time %.2f× nominal or a stall of %v):",
		lab.StarvedTimerLate, lab.StarvedServiceRatio, lab.StarvedStall), "  "))
	for _, o := range out.Outcomes {
		fmt.Fprintln(w, wrap(fmt.Sprintf("  %s: %s; the load generator fell up to %.0f ms behind its schedule", o.Run, o.Host.Reason, 1000*o.MaxLagS), "    "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Simulation against the lab (goodput in 1 s windows):")
	for _, c := range out.Comparisons {
		fmt.Fprintln(w, wrap("  "+c.String(), "    "))
	}
	fmt.Fprintln(w)
}
