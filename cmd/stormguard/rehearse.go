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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/rehearse"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

const rehearseHelp = `Usage: stormguard rehearse FILE [--dry-run] [--out DIR] [--json] [--predict]
                           [--max-rate R] [--max-duration D] [--allow-remote HOST]
                           [--shard I/N --start-at TIME] [--seed N] [--run NAME]
       stormguard rehearse merge PART... [--out DIR] [--json]

Rehearses a retry storm against your own service: every run of the scenario
FILE (the format of stormguard sim, where a service is a real endpoint:
target: http://HOST:PORT/PATH or grpc://HOST:PORT/pkg.Service/Method; see
docs/rehearse.md) sends real requests from the scenario's clients — open-loop
arrivals on its rate schedule, each client with its retry policy (any preset
or a policy file) through stormguard's retry, httpx and grpcx code, people
who tap again — for the scenario's duration in wall-clock time. During its
triggers a fault proxy in front of the service holds, cuts or slows the
network (outage, latency) and an error front fails a share of its responses
(errors); load triggers change the clients' rates. The runbook's steps turn
the real kill switch at their times: the service's admin endpoint, or the
fleet's dials on Redis; the dials are read before the run and set back after
it. What happened is measured in the simulator's vocabulary from the
clients' side and, with metrics: in the scenario, from the service's side
(its stormguard metrics, read every second), judged by the simulator's rule
and printed as stormguard sim prints it.

Safety: it sends only to loopback addresses (127.0.0.0/8, ::1, localhost)
unless --allow-remote names the host; it refuses a scenario whose clients'
peak rates add up to more than --max-rate or that lasts longer than
--max-duration; a hard counter refuses any attempt beyond the plan's worst
case (every arrival × every tap × the policy's most attempts); Ctrl-C stops
all load at once, sets the dials back and still prints (and writes) what
was measured, then exits 130.

Flags (before or after FILE; -flag and --flag are the same):
  --dry-run           print the plan — per client its rates, arrivals and
                      worst case of attempts; the services and what stands in
                      front of them; the triggers and the runbook's steps with
                      their times — and send nothing
  --out DIR           also write a report into DIR: what stormguard sim
                      writes (index.html, summary.json, RUN.csv, RUN.png,
                      RUN.svg) with a section on the rehearsal, rehearse.json,
                      and with --predict compare.csv; with --shard, the
                      shard's part DIR/shard-I-of-N.json
  --json              print one JSON object instead of the table:
                      {"scenario", "runs": [{"name", "verdict", "recovery_s",
                      …}], "rehearsals": [accounts], "fits", "sim",
                      "sim_vs_rehearsal"}
  --predict           before each run, measure each service the clients call
                      in a calm phase (rehearse.calm, default 5s: a
                      closed-loop probe at 1, 2, 4 … requests at a time, at
                      most twice the scenario's peak rate), fit a model
                      (service time, capacity, workers, queue), run the same
                      scenario in the simulator with the model, and set the
                      two side by side
  --max-rate R        the most requests per second, summed over the clients'
                      peaks, this machine sends (default 500, at most 3000)
  --max-duration D    the longest run (default 2m, at most 10m)
  --allow-remote HOST also send to HOST (or HOST:PORT), beyond loopback; may
                      be given more than once. Only for a service you own.
  --shard I/N         send only part I of N of every client's arrivals (the
                      I-th of every N, from the same random streams); needs
                      --out DIR or --json; put the parts together with
                      stormguard rehearse merge
  --start-at TIME     start the run at TIME (RFC 3339, or Unix seconds), at
                      most 10 minutes ahead: the same for every shard
  --seed N            use seed N in every run instead of the file's
  --run NAME          rehearse only the file's run NAME
  -h, --help          print this help

stormguard rehearse merge PART... puts the shards' parts together (each PART
a shard-I-of-N.json file or a directory holding them; every shard of 1..N
once, run with the same file, seed, flags and --start-at): the clients'
series add up, the runs are judged again, and it prints (and writes) them as
a rehearsal does.

Exit status: 0 success (whatever the verdicts), 1 a run that could not
start or measure, 2 usage error or bad input (an invalid scenario, a
scenario beyond the limits, a remote target not allowed), 130 interrupted
(after printing what was measured).
`

// rehearseFlags are stormguard rehearse's flags.
type rehearseFlags struct {
	out, shard, startAt, run string
	json, dryRun, predict    bool
	seed                     uint64
	maxRate                  float64
	maxDuration              time.Duration
	allow                    listFlag
}

// listFlag is a flag that may be given more than once, or with commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// runRehearse is `stormguard rehearse`.
func runRehearse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "merge" {
		return runRehearseMerge(args[1:], stdout)
	}
	var f rehearseFlags
	fs := flag.NewFlagSet("rehearse", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.out, "out", "", "write a report into `DIR`")
	fs.BoolVar(&f.json, "json", false, "print one JSON object")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plan and send nothing")
	fs.BoolVar(&f.predict, "predict", false, "fit a model and simulate it beside the run")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of every run")
	fs.Float64Var(&f.maxRate, "max-rate", rehearse.DefaultMaxRate, "the most requests per second")
	fs.DurationVar(&f.maxDuration, "max-duration", rehearse.DefaultMaxDuration, "the longest run")
	fs.Var(&f.allow, "allow-remote", "a host beyond loopback")
	fs.StringVar(&f.shard, "shard", "", "part I/N")
	fs.StringVar(&f.startAt, "start-at", "", "when to start")
	fs.StringVar(&f.run, "run", "", "only this run")
	pos, helped, err := parseCommand(fs, args, rehearseHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("rehearse", pos, true); err != nil {
		return err
	}
	if f.maxRate <= 0 || f.maxRate > rehearse.HardMaxRate {
		return usageError{fmt.Sprintf("rehearse: --max-rate %v is not within (0, %d]", f.maxRate, rehearse.HardMaxRate)}
	}
	if f.maxDuration <= 0 || f.maxDuration > rehearse.HardMaxDuration {
		return usageError{fmt.Sprintf("rehearse: --max-duration %v is not within (0, %v]", f.maxDuration, rehearse.HardMaxDuration)}
	}
	var shard rehearse.Shard
	if f.shard != "" {
		if shard, err = rehearse.ParseShard(f.shard); err != nil {
			return usageError{"rehearse: --" + err.Error()}
		}
		if f.out == "" && !f.json && !f.dryRun {
			return usageError{"rehearse: --shard writes its part with --out DIR (or prints it with --json)"}
		}
		if f.predict {
			return usageError{"rehearse: --predict is for a whole run, not a shard"}
		}
	}
	var start time.Time
	if f.startAt != "" {
		if start, err = parseStartAt(f.startAt); err != nil {
			return usageError{"rehearse: --start-at: " + err.Error()}
		}
	}
	file, err := scenario.LoadRehearsal(pos[0])
	if err != nil {
		return badInput(err)
	}
	lim := rehearse.Limits{MaxRate: f.maxRate, MaxDuration: f.maxDuration, AllowRemote: f.allow}
	dir := filepath.Dir(pos[0])
	var plans []rehearse.Plan
	var errs []error
	for _, r := range file.Runs {
		if f.run != "" && r.Name != f.run {
			continue
		}
		sc := r.Scenario
		if f.seed != 0 {
			sc.Seed = f.seed
		}
		p, err := rehearse.NewPlan(sc, r.Name, dir, shard, lim)
		if err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", r.Name, err))
			continue
		}
		plans = append(plans, p)
	}
	if f.run != "" && len(plans) == 0 && len(errs) == 0 {
		return usageError{fmt.Sprintf("rehearse: --run %q: no such run in %s", f.run, pos[0])}
	}
	if err := errors.Join(errs...); err != nil {
		return badInput(err)
	}
	name := file.Base.Name
	if name == "" {
		name = filepath.Base(file.Path)
	}
	if f.dryRun {
		printPlans(stdout, name, plans, f.predict)
		return nil
	}
	ctx, stopWatch := lab.WatchGoRun(ctx)
	defer stopWatch()
	began := time.Now()
	out := rehearse.Output{Scenario: name, Description: file.Base.Description}
	bar := newProgress(stderr, len(plans))
	var runErr error
	for i, p := range plans {
		var fits []rehearse.Fit
		if f.predict {
			if fits, runErr = rehearse.Calibrate(ctx, p); runErr != nil {
				break
			}
		}
		r, err := rehearse.Run(ctx, p, rehearse.Options{Start: start, Progress: func(frac float64) { bar.set(i, frac) }})
		if err != nil {
			runErr = fmt.Errorf("run %s: %w", p.Name, err)
			break
		}
		out.Add(p, r)
		if f.predict && !r.Interrupted {
			model, notes := rehearse.Model(p, fits)
			sr, err := sim.Run(ctx, model, p.Name, nil)
			if err != nil {
				runErr = fmt.Errorf("run %s: simulating the fitted model: %w", p.Name, err)
				break
			}
			out.AddPrediction(fits, sr, notes)
		}
		if r.Interrupted || ctx.Err() != nil {
			break
		}
	}
	bar.stop()
	if len(out.Runs) == 0 {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return runErr
	}
	changes := map[string][]string{}
	for _, r := range file.Runs {
		changes[r.Name] = r.Changes
	}
	if err := rehearseOutput(out, f.out, f.json, shard, changes, time.Since(began), stdout); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	return runErr
}

// parseStartAt reads --start-at: RFC 3339 or Unix seconds.
func parseStartAt(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil || secs <= 0 {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2026-12-07T10:00:00Z) nor Unix seconds", s)
	}
	return time.Unix(0, int64(secs*1e9)), nil
}

// printPlans prints --dry-run's plans.
func printPlans(w io.Writer, name string, plans []rehearse.Plan, predict bool) {
	runs := "runs"
	if len(plans) == 1 {
		runs = "run"
	}
	fmt.Fprintf(w, "%s: %d %s, nothing sent (--dry-run)\n\n", name, len(plans), runs)
	for _, p := range plans {
		io.WriteString(w, p.String())
		if predict {
			fmt.Fprintf(w, "  --predict: a calm phase before the run sends at most %d more attempts\n", rehearse.CalmWorstCase(p))
		}
		fmt.Fprintln(w)
	}
}

// rehearseOutput writes the shard's part or the report, then prints.
func rehearseOutput(out rehearse.Output, dir string, asJSON bool, shard rehearse.Shard, changes map[string][]string, took time.Duration, stdout io.Writer) error {
	if shard.Count > 1 {
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			data, err := json.Marshal(out)
			if err != nil {
				return err
			}
			path := filepath.Join(dir, fmt.Sprintf("shard-%d-of-%d.json", shard.Index+1, shard.Count))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintf(stdout, "shard %s: %d runs written to %s\nWhen every shard is done: stormguard rehearse merge DIR... [--out DIR] [--json]\n", shard, len(out.Runs), path)
				return nil
			}
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	if dir != "" {
		if err := rehearse.WriteReport(dir, out, changes); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(out)
	}
	printRehearsal(stdout, out, changes, took)
	if dir != "" {
		fmt.Fprintf(stdout, "Report: %s\n", filepath.Join(dir, "index.html"))
	}
	return nil
}

// printRehearsal prints the table of stormguard sim for the rehearsal's
// runs, then what only a rehearsal knows, then the prediction.
func printRehearsal(w io.Writer, out rehearse.Output, changes map[string][]string, took time.Duration) {
	var table bytes.Buffer
	printTable(&table, result.Output{Scenario: out.Scenario, Description: out.Description, Runs: out.Runs}, changes, took)
	io.WriteString(w, strings.Replace(table.String(), " of virtual time ", " against the real service ", 1))
	fmt.Fprintln(w)
	for i, n := range out.Rehearsals {
		fmt.Fprintf(w, "%s:\n", n.Name)
		for _, l := range rehearse.Lines(out, i) {
			fmt.Fprintln(w, wrap("  "+l, "    "))
		}
	}
	if len(out.Comparisons) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Prediction against the rehearsal (the fitted model in the simulator; goodput in 1 s windows):")
		for _, c := range out.Comparisons {
			s := rehearse.CompareLine(c)
			fmt.Fprintln(w, wrap("  "+s, "    "))
		}
	}
	fmt.Fprintln(w)
}

// mergeFlags parses the flags and parts of a merge (sweep's or
// rehearse's): --out, --json, and PART... (shard-I-of-N.json files or
// directories holding them), returned sorted and without repeats.
func mergeFlags(name, help string, args []string, stdout io.Writer) (out string, asJSON, helped bool, paths []string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&out, "out", "", "write a report into DIR")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	pos, helped, err := parseCommand(fs, args, help, stdout)
	if helped || err != nil {
		return "", false, helped, nil, err
	}
	if len(pos) == 0 {
		return "", false, false, nil, usageError{name + " needs the parts: shard-I-of-N.json files or directories holding them"}
	}
	for _, p := range pos {
		fi, err := os.Stat(p)
		if err != nil {
			return "", false, false, nil, badInput(err)
		}
		if !fi.IsDir() {
			paths = append(paths, p)
			continue
		}
		found, _ := filepath.Glob(filepath.Join(p, "shard-*-of-*.json"))
		if len(found) == 0 {
			return "", false, false, nil, badInput(fmt.Errorf("%s holds no shard-I-of-N.json", p))
		}
		paths = append(paths, found...)
	}
	sort.Strings(paths)
	return out, asJSON, false, sweepCompact(paths), nil
}

// runRehearseMerge is `stormguard rehearse merge`.
func runRehearseMerge(args []string, stdout io.Writer) error {
	out, asJSON, helped, paths, err := mergeFlags("rehearse merge", rehearseHelp, args, stdout)
	if helped || err != nil {
		return err
	}
	parts := make([]rehearse.Output, len(paths))
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return badInput(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&parts[i]); err != nil {
			return badInput(fmt.Errorf("%s: %w", p, err))
		}
	}
	merged, err := rehearse.Merge(parts...)
	if err != nil {
		return badInput(err)
	}
	return rehearseOutput(merged, out, asJSON, rehearse.Shard{}, nil, 0, stdout)
}
