package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim"
)

const simHelp = `Usage: stormguard sim [FILE] [--out DIR] [--seed N] [--json]

Simulates, in virtual time, every run of the scenario FILE (YAML; see
examples/ for the format). Without FILE it runs the built-in hotos-toy
scenario: the HotOS '21 toy example, where a 10 s outage starts a retry
storm that outlives it, next to the same system with stormguard's policy
and server defenses. Runs go in parallel on all cores.

It prints one line per run: the verdict (stable, recovered, metastable),
the recovery time after the last trigger, demand and goodput (requests/s)
after the last trigger, retries (share of attempts), wasted work (share of
the services' work whose caller had given up) and the requests that gave
up with their top reason; then one sentence on what to change.

Flags (before or after FILE; -flag and --flag are the same):
  --out DIR   also write a report into DIR (made if missing): index.html,
              one self-contained page with a chart per run; summary.json;
              and per run RUN.csv (time series), RUN.png and RUN.svg
  --seed N    use seed N in every run instead of the file's seeds
              (default 0: keep the file's)
  --json      print one JSON object on stdout instead of the table:
              {"scenario": NAME, "runs": [{"name", "verdict", "recovery_s", …}]}
  -h, --help  print this help

A progress bar appears on stderr when it is a terminal and the runs take
more than 2 s.

Exit status: 0 success, 1 error (a bad scenario file, a failed run),
2 usage error, 130 interrupted (Ctrl-C).
`

// simFlags are the flags of sim.
type simFlags struct {
	out  string
	seed uint64
	json bool
}

func (f *simFlags) set(fs *flag.FlagSet) {
	fs.StringVar(&f.out, "out", "", "write a report into `DIR`")
	fs.Uint64Var(&f.seed, "seed", 0, "use seed `N` in every run (0: keep the file's)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of the table")
}

// runSim is `stormguard sim`.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f simFlags
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.set(fs)
	pos, helped, err := parseCommand(fs, args, simHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("sim", pos, false); err != nil {
		return err
	}

	file, err := load(pos)
	if err != nil {
		return err
	}
	if f.seed != 0 {
		for i := range file.Runs {
			file.Runs[i].Scenario.Seed = f.seed
		}
	}
	name := file.Base.Name
	if name == "" {
		name = filepath.Base(file.Path)
	}
	start := time.Now()
	results, err := simulate(ctx, file.Runs, stderr)
	if err != nil {
		return err
	}
	out := sim.Output{Scenario: name, Description: file.Base.Description, Runs: results}
	changes := map[string][]string{}
	for _, r := range file.Runs {
		changes[r.Name] = r.Changes
	}
	if f.out != "" {
		rep := report.Sim{Output: out, Description: file.Base.Description, Changes: changes}
		if err := rep.Write(f.out); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if f.json {
		return json.NewEncoder(stdout).Encode(out)
	}
	printTable(stdout, out, changes, time.Since(start))
	if f.out != "" {
		fmt.Fprintf(stdout, "Report: %s\n", filepath.Join(f.out, "index.html"))
	}
	return nil
}

// parseCommand parses a subcommand's arguments with fs (named after the
// command): flags before or after the positional arguments, which it
// returns. On -h or --help it prints help to stdout and reports helped; a bad
// flag is a usage error that points at the command's help.
func parseCommand(fs *flag.FlagSet, args []string, help string, stdout io.Writer) (pos []string, helped bool, err error) {
	pos, err = parseInterleaved(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, help)
		return nil, true, nil
	case err != nil:
		cmd := strings.Fields(fs.Name())[0]
		return nil, false, usageError{fmt.Sprintf("%s: %v (see stormguard %s --help)", fs.Name(), err, cmd)}
	}
	return pos, false, nil
}

// atMostOneFile is the usage error of a command given more than one FILE
// (or, with required, none).
func atMostOneFile(cmd string, pos []string, required bool) error {
	if len(pos) > 1 || required && len(pos) == 0 {
		return usageError{fmt.Sprintf("%s takes one FILE, got %d: %q (see stormguard %s --help)", cmd, len(pos), pos, cmd)}
	}
	return nil
}

// parseInterleaved parses flags that may come before or after the
// positional arguments, and returns those. After "--" all are positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// load reads the scenario file named in pos, or the embedded default.
func load(pos []string) (sim.File, error) {
	if len(pos) == 0 {
		return sim.Parse(examples.DefaultName, examples.Default())
	}
	return sim.Load(pos[0])
}

// simulate runs every run, at most GOMAXPROCS at once, and returns the
// results in the order of runs. The first failure cancels the others.
func simulate(ctx context.Context, runs []sim.RunSpec, stderr io.Writer) ([]sim.Result, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]sim.Result, len(runs))
	errs := make([]error, len(runs))
	bar := newProgress(stderr, len(runs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for i := range next {
				if rctx.Err() != nil {
					continue
				}
				r, err := sim.Run(rctx, runs[i].Scenario, runs[i].Name, func(frac float64) { bar.set(i, frac) })
				if err != nil {
					errs[i] = fmt.Errorf("run %s: %w", runs[i].Name, err)
					cancel()
				}
				results[i] = r
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	bar.stop()
	// A failure cancels the other runs: report it, not their cancellation.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	return results, nil
}
