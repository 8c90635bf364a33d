package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep"
)

// sweepDefaultName is the example `stormguard sweep` runs without a file.
const sweepDefaultName = "hotos-sweep.yaml"

const sweepHelp = `Usage: stormguard sweep [FILE] [flags]
       stormguard sweep merge PART... [--out DIR] [--json]

Finds, through the simulator, where the system of the scenario FILE (-:
standard input) tips over and where it comes back. Without FILE it sweeps
the built-in hotos-sweep example (the HotOS '21 toy database, naive
retries against stormguard's defenses). Every run of the file is swept
the same way:

  ramp    the load (one client's arrival rate) climbs in steps and comes
          back down, in one long run without triggers, each step held long
          enough to settle; goodput against load on the way up and on the
          way down draws the hysteresis loop. Collapse threshold: the first
          step up whose goodput fell below 50% of demand; recovery
          threshold: the first step down whose goodput was back at 90%.
  phase   at each load of a grid, a bisection over the size of the
          scenario's first trigger (without one, a hold-mode outage of the
          client's target) for the smallest that leaves the system
          metastable and the smallest that disturbs it: the phase diagram
          load x trigger -> stable / recovered / metastable.

  runbook questions, asked with their flags (see below): the capacity
          to add at a time for each run to recover, the latest time it
          may come, and the runs of the file (its runbooks) ranked by
          time to recover over several seeds.

It prints the thresholds, the smallest trigger by load, the answers to
the runbook questions, and what to change.
Simulations run in parallel on all cores; a progress bar appears on stderr
when it is a terminal and the sweep takes more than 2 s. A search's run
stops as soon as the simulator proves its verdict settled (a queue that
cannot drain before the end: docs/simulator.md); the ramp and the
comparison's runs go to the end. The defaults come
from the capacity of the client's target (workers / service time, the
largest over the file's runs); all runs are swept over the same loads.

Flags (before or after FILE; -flag and --flag are the same):
  --client NAME         the client whose arrival rate is the load
                        (default: the first client)
  --ramp FROM:TO[:STEP] the ramp, requests/s (default: 0.25 to 1.25 x
                        capacity, in steps of about (TO - FROM)/30
                        rounded down to 1, 2 or 5 x 10^n)
  --hold D              how long each ramp step lasts; its second half is
                        measured (default: 20 x the client's timeout, at
                        least 20 bins)
  --loads FROM:TO:STEP  the loads of the phase diagram, or a list L1,L2,...
                        (default: 0.25 x capacity up to the capacity, in
                        steps of about capacity/15, rounded down to 1, 2
                        or 5 x 10^n)
  --vary WHAT           what grows in the trigger: duration (the default,
                        any kind but a cache-flush of a keyed cache),
                        factor (a load trigger's multiplier, an errors or
                        hang trigger's probability), add (a latency
                        trigger's added latency) or keys (the most popular
                        keys a cache-flush of a keyed cache removes; its
                        default, since such a flush is instantaneous)
  --max SIZE            the largest trigger tried: a duration such as 40s
                        for duration and add, a number for factor and keys
                        (default: 4 x the trigger's own size; without one,
                        40s for a duration and 10 timeouts for add; a load
                        factor at least 4; a probability 1; all the
                        cache's keys)
  --resolution SIZE     how close the bisection gets (default: about
                        (max - smallest)/256, rounded down to 1, 2 or
                        5 x 10^n, at least 1 key; the smallest size is 0,
                        no trigger, or 1 for a load factor)
  --after D             how long each phase run goes on after the trigger
                        ends, to recover (default: the longest of 120s,
                        60 x the client's timeout and 3 x max)
  --no-ramp, --no-phase skip that part

Runbook questions (with any of them, the ramp runs only if --ramp is
given and the phase search only if --loads is; each answer needs a few
to a few dozen simulations):
  --capacity-at T       for each run, bisect the smallest capacity factor
                        F (a capacity action on the client's target at
                        time T, replacing the run's own capacity steps on
                        it) with which the run is not metastable at its
                        end, over [1, --capacity-max]
  --capacity-max F      the largest factor tried (default 4; at most 1e6)
  --capacity-resolution F
                        its step (default about (max - 1)/50, rounded
                        down to 1, 2 or 5 x 10^n)
  --capacity-latest F   for each run, bisect the latest time, from the end
                        of its first trigger to the end of the run, at
                        which setting the capacity factor F (above 1)
                        still brings it back
  --latest-resolution D its step (default about that span/50, rounded
                        down to 1, 2 or 5 x 10^n seconds, at least a bin)
  --compare-seeds N     run every run of the file with N seeds (1 to
                        1000: its own and the next ones) and rank them by
                        time to recover, from the incident's start (the
                        first trigger) until requests succeed again for
                        good: most seeds recovered, then the median, then
                        the worst, then fewer relapses
  --seed N              use seed N in every run (default 0: keep the file's)
  --workers N           simulations at once (default: the number of cores)
  --shard I/N           compute only part I of N (1 <= I <= N) of the
                        searches (the runbook questions' too) and write
                        it as DIR/shard-I-of-N.json
                        (with --out DIR) or print it (with --json); then
                        put the parts together with stormguard sweep merge
  --out DIR             also write a report into DIR (made if missing):
                        index.html, one self-contained page; sweep.json;
                        hysteresis.png/.svg and phase.png/.svg; ramp.csv,
                        phase.csv and probes.csv; with runbook questions
                        capacity.png/.svg, latest.png/.svg and
                        runbook.csv
  --json                print one JSON object on stdout instead of the
                        table: {"scenario", "runs": [{"name", "ramp":
                        {"collapse", "recovery", "steps"}, "phase":
                        {"columns": [{"load", "disturbs", "tips"}]},
                        "add_capacity": {"factor", "probes"}, "latest":
                        {"latest_s", "probes"}}], "compare": {"rows":
                        [{"run", "median_to_recover_s", ...}]}}
  --max-events N        refuse a sweep (or shard) estimated to simulate
                        more than N events in all (default 2e9; inf: no
                        limit)
  --max-memory SIZE     refuse a sweep estimated to need more than SIZE
                        of memory at once, such as 512MB or 16GB
                        (default 4GB; inf: no limit)
  -h, --help            print this help

Limits: before it starts, sweep estimates the events of all its
simulations (each ramp; each phase search at the most runs a bisection
takes, with the largest trigger; each runbook search likewise, and every
run of a comparison) and the memory of the --workers that
run at once, and refuses, in one line naming the flag or the scenario key
that drives the estimate, a sweep beyond --max-events or --max-memory.
The ramp and the loads have at most 10000 steps, a trigger's grid 2^20
sizes, a shard count 100000, a scenario file 1 MiB, a shard's part
64 MiB. Ctrl-C or SIGTERM stops a sweep within a fraction of a second.

stormguard sweep merge PART... puts the shards' parts together: each PART
is a shard-I-of-N.json file or a directory holding them. It prints, and
with --out writes, exactly what the sweep run whole would have. Every
shard must be run with the same file, seed and flags (merge checks).

The same file, seed and flags give the same result, byte for byte, whatever
--workers and --shard.

Exit status: 0 success, 1 a run that failed, 2 usage error or bad input
(a missing or invalid scenario file, shards that do not fit together, a
sweep beyond a limit), 130 interrupted (Ctrl-C, SIGTERM).
`

// sweepFlags are the flags of sweep.
type sweepFlags struct {
	client, ramp, loads, vary, max, resolution, shard, out string
	hold, after                                            time.Duration
	seed                                                   seedFlag
	workers                                                int
	noRamp, noPhase, json                                  bool
	limits                                                 limitFlags

	// The runbook questions.
	capacityAt, latestResolution                    time.Duration
	capacityMax, capacityResolution, capacityLatest string
	compareSeeds                                    int
}

func (f *sweepFlags) set(fs *flag.FlagSet) {
	fs.StringVar(&f.client, "client", "", "the client whose rate is the load")
	fs.StringVar(&f.ramp, "ramp", "", "the ramp FROM:TO[:STEP], requests/s")
	fs.DurationVar(&f.hold, "hold", 0, "how long each ramp step lasts")
	fs.StringVar(&f.loads, "loads", "", "the loads of the phase diagram")
	fs.StringVar(&f.vary, "vary", "", "what grows in the trigger")
	fs.StringVar(&f.max, "max", "", "the largest trigger tried")
	fs.StringVar(&f.resolution, "resolution", "", "the step of the bisection")
	fs.DurationVar(&f.after, "after", 0, "how long each phase run goes on after the trigger")
	fs.BoolVar(&f.noRamp, "no-ramp", false, "skip the ramp")
	fs.BoolVar(&f.noPhase, "no-phase", false, "skip the phase search")
	fs.Var(&f.seed, "seed", "use seed N in every run")
	fs.IntVar(&f.workers, "workers", 0, "simulations at once")
	fs.StringVar(&f.shard, "shard", "", "compute only part I/N")
	fs.StringVar(&f.out, "out", "", "write a report into DIR")
	fs.BoolVar(&f.json, "json", false, "print one JSON object")
	f.limits.set(fs)
	fs.DurationVar(&f.capacityAt, "capacity-at", 0, "the smallest capacity factor that, added at T, recovers")
	fs.StringVar(&f.capacityMax, "capacity-max", "", "the largest capacity factor tried")
	fs.StringVar(&f.capacityResolution, "capacity-resolution", "", "the step of the capacity search")
	fs.StringVar(&f.capacityLatest, "capacity-latest", "", "the latest time at which capacity factor F recovers")
	fs.DurationVar(&f.latestResolution, "latest-resolution", 0, "the step of the latest-time search")
	fs.IntVar(&f.compareSeeds, "compare-seeds", 0, "rank the runs by time to recover over N seeds")
}

// options turns the flags into sweep.Options. Each error names its flag.
func (f *sweepFlags) options() (sweep.Options, error) {
	o := sweep.Options{Client: f.client, Hold: f.hold, After: f.after, Vary: f.vary, Seed: uint64(f.seed),
		NoRamp: f.noRamp, NoPhase: f.noPhase}
	var err error
	if f.ramp != "" {
		if o.From, o.To, o.Step, err = parseRamp(f.ramp); err != nil {
			return o, err
		}
	}
	if f.loads != "" {
		if o.Loads, err = parseSweepLoads(f.loads); err != nil {
			return o, err
		}
	}
	if f.hold < 0 {
		return o, fmt.Errorf("--hold %v: want a duration above 0, such as 20s", f.hold)
	}
	if f.after < 0 {
		return o, fmt.Errorf("--after %v: want a duration above 0, such as 2m", f.after)
	}
	if f.workers < 0 {
		return o, fmt.Errorf("--workers %d: want a positive number (0: all cores)", f.workers)
	}
	if err := f.runbook(&o); err != nil {
		return o, err
	}
	return o, nil
}

// runbook reads the runbook questions' flags into o. Asking one skips the
// ramp unless --ramp is given, and the phase search unless --loads is.
func (f *sweepFlags) runbook(o *sweep.Options) error {
	var err error
	switch {
	case f.capacityAt < 0:
		return fmt.Errorf("--capacity-at %v: want a time after the start of the run, such as 40s", f.capacityAt)
	case f.latestResolution < 0:
		return fmt.Errorf("--latest-resolution %v: want a duration above 0, such as 5s", f.latestResolution)
	case f.compareSeeds < 0 || f.compareSeeds > sweep.MaxCompareSeeds:
		return fmt.Errorf("--compare-seeds %d: want 1 to %d seeds", f.compareSeeds, sweep.MaxCompareSeeds)
	case (f.capacityMax != "" || f.capacityResolution != "") && f.capacityAt == 0:
		return errors.New("--capacity-max and --capacity-resolution bound the search of --capacity-at: give --capacity-at T")
	case f.latestResolution != 0 && f.capacityLatest == "":
		return errors.New("--latest-resolution is the step of --capacity-latest's search: give --capacity-latest F")
	}
	o.CapacityAt, o.LatestResolution, o.CompareSeeds = f.capacityAt, f.latestResolution, f.compareSeeds
	for _, v := range []struct {
		flag, text string
		to         *float64
	}{{"capacity-max", f.capacityMax, &o.CapacityMax}, {"capacity-resolution", f.capacityResolution, &o.CapacityResolution}, {"capacity-latest", f.capacityLatest, &o.LatestFactor}} {
		if v.text == "" {
			continue
		}
		if *v.to, err = parseCapacityFactor(v.flag, v.text); err != nil {
			return err
		}
	}
	if o.CapacityAt != 0 || o.LatestFactor != 0 || o.CompareSeeds != 0 {
		o.NoRamp = o.NoRamp || f.ramp == ""
		o.NoPhase = o.NoPhase || f.loads == ""
	}
	return nil
}

// parseCapacityFactor reads a capacity factor or its step (flag names
// it): a finite number above 0. The plan checks its range.
func parseCapacityFactor(flag, text string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("--%s %q: a capacity factor is a number above 0, such as 2 (twice the capacity)", flag, text)
	}
	return v, nil
}

// sizes reads --max and --resolution into o: durations when the phase
// search grows a duration or an added latency, numbers when it grows a
// factor or keys. varies says what each run grows (see
// sweep.PhaseVaries): one --max cannot be both.
func (f *sweepFlags) sizes(o *sweep.Options, runs []string, varies []string) error {
	if f.max == "" && f.resolution == "" || len(varies) == 0 {
		return nil
	}
	isDuration := func(v string) bool { return v == sweep.VaryDuration || v == sweep.VaryAdd }
	duration := isDuration(varies[0])
	for i, v := range varies {
		if isDuration(v) != duration {
			return fmt.Errorf("--max and --resolution: run %s grows its trigger's %s and run %s its %s, one a duration and the other a number: give --vary, or sweep the runs apart", runs[0], varies[0], runs[i], v)
		}
	}
	var err error
	if f.max != "" {
		if o.Max, err = parseTriggerSize("max", f.max, duration); err != nil {
			return err
		}
	}
	if f.resolution != "" {
		if o.Resolution, err = parseTriggerSize("resolution", f.resolution, duration); err != nil {
			return err
		}
	}
	return nil
}

// parseRamp reads --ramp FROM:TO[:STEP], requests/s: 0 < FROM < TO,
// STEP > 0 (0 or none: the default), at most sweep.MaxSteps steps.
func parseRamp(s string) (from, to, step float64, err error) {
	v, err := sweepNumbers(s, ":")
	if err != nil || len(v) < 2 || len(v) > 3 || !(v[0] > 0) || !(v[1] > v[0]) || len(v) == 3 && !(v[2] >= 0) {
		return 0, 0, 0, fmt.Errorf("--ramp %q: want FROM:TO or FROM:TO:STEP, requests/s, with 0 < FROM < TO and STEP > 0", s)
	}
	from, to = v[0], v[1]
	if len(v) == 3 {
		step = v[2]
	}
	if step > 0 && (to-from)/step > sweep.MaxSteps {
		return 0, 0, 0, fmt.Errorf("--ramp %q: %.3g steps, more than %d", s, (to-from)/step, sweep.MaxSteps)
	}
	return from, to, step, nil
}

// parseSweepLoads reads --loads FROM:TO:STEP or L1,L2,…: loads above 0,
// at most sweep.MaxSteps of them.
func parseSweepLoads(s string) ([]float64, error) {
	if strings.Contains(s, ":") {
		v, err := sweepNumbers(s, ":")
		if err != nil || len(v) != 3 || !(v[0] > 0) || !(v[2] > 0) || !(v[1] >= v[0]) {
			return nil, fmt.Errorf("--loads %q: want FROM:TO:STEP with 0 < FROM ≤ TO and STEP > 0, or a list L1,L2,…", s)
		}
		if n := (v[1] - v[0]) / v[2]; n >= sweep.MaxSteps {
			return nil, fmt.Errorf("--loads %q: %.3g loads, more than %d", s, n+1, sweep.MaxSteps)
		}
		var out []float64
		for k := 0; ; k++ {
			l := v[0] + float64(k)*v[2]
			if l > v[1]*(1+1e-9) {
				break
			}
			out = append(out, l)
		}
		return out, nil
	}
	v, err := sweepNumbers(s, ",")
	if err != nil {
		return nil, fmt.Errorf("--loads %q: want FROM:TO:STEP or a list L1,L2,… of requests/s", s)
	}
	if len(v) > sweep.MaxSteps {
		return nil, fmt.Errorf("--loads: %d loads, more than %d", len(v), sweep.MaxSteps)
	}
	for _, l := range v {
		if !(l > 0) {
			return nil, fmt.Errorf("--loads %q: load %v: want loads above 0, requests/s", s, l)
		}
	}
	return v, nil
}

// parseTriggerSize reads --max or --resolution (flag names it): a
// duration above 0 when the sweep varies a duration (or an added latency),
// else a number above 0 (a factor, a probability or a number of keys).
// The result is in seconds, or the number.
func parseTriggerSize(flag, text string, duration bool) (float64, error) {
	if duration {
		d, err := time.ParseDuration(text)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("--%s %q: a trigger's duration or added latency is a duration such as 40s or 500ms (above 0)", flag, text)
		}
		return d.Seconds(), nil
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("--%s %q: a trigger's factor, probability or number of keys is a number such as 3 (above 0)", flag, text)
	}
	return v, nil
}

// sweepNumbers reads finite numbers separated by sep.
func sweepNumbers(s, sep string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, sep) {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, err
		}
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("%v is not a finite number", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// runSweep is `stormguard sweep`.
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "merge" {
		return runSweepMerge(args[1:], stdout)
	}
	var f sweepFlags
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.set(fs)
	pos, helped, err := parseCommand(fs, args, sweepHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("sweep", pos, false); err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return usageError{"sweep: " + err.Error()}
	}
	var shard sweep.Shard
	if f.shard != "" {
		if shard, err = sweep.ParseShard(f.shard); err != nil {
			return usageError{"sweep: --" + err.Error()}
		}
		if f.out == "" && !f.json {
			return usageError{"sweep: --shard writes its part with --out DIR (or prints it with --json)"}
		}
	}

	file, err := loadSweep(pos)
	if err != nil {
		return refused("sweep: ", err)
	}
	names := make([]string, len(file.Runs))
	for i, r := range file.Runs {
		names[i] = r.Name
	}
	if err := f.sizes(&opts, names, sweep.PhaseVaries(file, opts)); err != nil {
		return usageError{"sweep: " + err.Error()}
	}
	plan, err := sweep.NewPlan(file, opts)
	var oe *sweep.OptionError
	switch {
	case errors.As(err, &oe):
		// A flag's value (or what the defaults make of it): the flag's fault.
		return usageError{fmt.Sprintf("sweep: --%s %s: %s", oe.Option, oe.Value, oe.Msg)}
	case err != nil:
		return badInput(sweepPrefixErr(file.Path+": ", err))
	}
	start := time.Now()
	bar := newSweepProgress(stderr)
	part, err := sweep.Execute(ctx, plan, sweep.Exec{Workers: f.workers, Shard: shard, Progress: bar.set, Limits: f.limits.limits()})
	bar.stop()
	if err != nil {
		return refused("sweep: "+file.Path+": ", err)
	}
	if f.shard != "" {
		return writeSweepPart(part, f.out, f.json, stdout)
	}
	res, err := sweep.Merge(part)
	if err != nil {
		return err
	}
	return sweepOutput(res, f.out, f.json, time.Since(start), stdout)
}

// loadSweep reads the scenario file named in pos, or the embedded example.
func loadSweep(pos []string) (scenario.File, error) {
	if len(pos) == 0 {
		data, err := examples.Scenarios.ReadFile(sweepDefaultName)
		if err != nil {
			return scenario.File{}, fmt.Errorf("the built-in %s is missing: %w", sweepDefaultName, err)
		}
		return scenario.Parse(sweepDefaultName, data)
	}
	f, err := scenario.Load(pos[0])
	return f, badInput(err)
}

// sweepPrefixErr puts prefix before every line of err.
func sweepPrefixErr(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return errors.New(strings.Join(lines, "\n"))
}

// sweepPartName is the file a shard's part is written to.
func sweepPartName(s sweep.Shard) string { return fmt.Sprintf("shard-%d-of-%d.json", s.Index, s.Count) }

func writeSweepPart(part sweep.Partial, out string, asJSON bool, stdout io.Writer) error {
	data, err := json.MarshalIndent(part, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		path := filepath.Join(out, sweepPartName(part.Shard))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		if !asJSON {
			fmt.Fprintf(stdout, "shard %v: %d ramps and %d phase searches written to %s\n", part.Shard, len(part.Ramps), len(part.Columns), path)
			fmt.Fprintf(stdout, "When every shard is done: stormguard sweep merge DIR... [--out DIR] [--json]\n")
		}
	}
	if asJSON {
		_, err = stdout.Write(data)
	}
	return err
}

// runSweepMerge is `stormguard sweep merge`.
func runSweepMerge(args []string, stdout io.Writer) error {
	out, asJSON, helped, paths, err := mergeFlags("sweep merge", sweepHelp, args, stdout)
	if helped || err != nil {
		return err
	}
	parts := make([]sweep.Partial, len(paths))
	for i, p := range paths {
		if parts[i], err = readSweepPart(p); err != nil {
			return badInput(err)
		}
	}
	res, err := sweep.Merge(parts...)
	if err != nil {
		return badInput(err)
	}
	return sweepOutput(res, out, asJSON, -1, stdout)
}

// readSweepPart reads the shard's part at path (see sweep.ReadPartial);
// its errors name the file.
func readSweepPart(path string) (sweep.Partial, error) {
	f, err := os.Open(path)
	if err != nil {
		return sweep.Partial{}, err
	}
	defer f.Close()
	p, err := sweep.ReadPartial(f)
	if err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func sweepCompact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// sweepOutput writes the report (with out), then prints the JSON or the
// table. took < 0 means unknown (a merge).
func sweepOutput(res sweep.Result, out string, asJSON bool, took time.Duration, stdout io.Writer) error {
	if out != "" {
		if err := report.WriteSweep(out, res); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	printSweep(stdout, res, took)
	if out != "" {
		fmt.Fprintf(stdout, "Report: %s\n", filepath.Join(out, "index.html"))
	}
	return nil
}

// printSweep prints the thresholds of every run, the phase table and the
// advice.
func printSweep(w io.Writer, res sweep.Result, took time.Duration) {
	sums := make([]report.SweepSummary, len(res.Runs))
	for i, r := range res.Runs {
		sums[i] = report.SummarizeSweep(r)
	}
	sims := "simulations"
	if res.Simulations == 1 {
		sims = "simulation"
	}
	head := fmt.Sprintf("%s: %d %s swept, %d %s, %.1f h of virtual time", res.Scenario, len(res.Runs), sweepRunsWord(len(res.Runs)), res.Simulations, sims, res.VirtualS/3600)
	if took >= 0 {
		head += fmt.Sprintf(" (took %.1f s)", took.Seconds())
	}
	fmt.Fprintln(w, head)
	swept := false
	for _, r := range res.Runs {
		swept = swept || r.Ramp != nil || r.Phase != nil
	}
	if swept && len(res.Runs) > 0 {
		r := res.Runs[0]
		line := fmt.Sprintf("Load: the arrival rate of client %s, which calls %s", r.Client, r.Target)
		if r.Capacity > 0 {
			line += fmt.Sprintf(" (capacity about %.6g requests/s)", r.Capacity)
		}
		fmt.Fprintln(w, wrap(line+".", ""))
	}
	fmt.Fprintln(w)
	if swept {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RUN\tCOLLAPSES AT\tRECOVERS AT\tMETASTABLE FROM\tSMALLEST TRIGGER THAT TIPS IT")
		for _, s := range sums {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.CollapseText(), s.RecoveryText(), s.MetastableText(), s.TipsText())
		}
		tw.Flush()
		fmt.Fprintln(w)
		if len(res.Runs) > 0 {
			r := res.Runs[0]
			if rp := r.Ramp; rp != nil {
				fmt.Fprintln(w, wrap(fmt.Sprintf("Ramp: %.6g → %.6g → %.6g requests/s in steps of %.6g, %.6g s each. Collapse: the first step up with goodput below %.0f%% of demand; recovery: the first step down back at %.0f%% or more.",
					rp.From, rp.To, rp.From, rp.Step, rp.HoldS, 100*sweep.CollapseBelow, 100*sweep.RecoveredAbove), "  "))
			}
			if ph := r.Phase; ph != nil {
				fmt.Fprintln(w, wrap(fmt.Sprintf("Phase: at each load, %s starting at %.6g s, its %s bisected from %s to %s to within %s; each run judged %.6g s after the trigger ends.",
					sweepArticle(sweepTriggerText(ph.Trigger)), ph.Trigger.At.Seconds(), ph.Vary, ph.SizeText(ph.Min), ph.SizeText(ph.Max), ph.SizeText(ph.Resolution), ph.AfterS), "  "))
			}
		}
		printPhaseTable(w, res)
		fmt.Fprintln(w)
	}
	printRunbook(w, res)
	fmt.Fprintln(w, wrap("What to change: "+report.SweepAdvice(res), "  "))
}

// printRunbook prints the answers to the runbook questions, a table each,
// each followed by a blank line.
func printRunbook(w io.Writer, res sweep.Result) {
	table := func(question string, head string, rows [][]string) {
		if question == "" {
			return
		}
		fmt.Fprintln(w, wrap(question, ""))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, head)
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	var rows [][]string
	for _, r := range report.CapacityRows(res) {
		rows = append(rows, []string{r.Run, r.Factor, r.Stuck, r.Recovery})
	}
	table(report.CapacityQuestion(res), "RUN\tRECOVERS WITH\tLARGEST STUCK\tRECOVERY_S THEN", rows)
	rows = nil
	for _, r := range report.LatestRows(res) {
		rows = append(rows, []string{r.Run, r.Latest, r.StuckFrom, r.Recovery})
	}
	table(report.LatestQuestion(res), "RUN\tLATEST\tSTUCK FROM\tRECOVERY_S THEN", rows)
	rows = nil
	for _, r := range report.CompareRows(res) {
		rows = append(rows, []string{strconv.Itoa(r.Rank), r.Run, r.Verdicts, r.Median, r.Worst, r.Relapsed, r.Recovery})
	}
	table(report.CompareQuestion(res), "RANK\tRUN\tVERDICTS\tTO RECOVER (MEDIAN)\tWORST\tRELAPSED\tRECOVERY_S (MEDIAN)", rows)
}

// printPhaseTable prints, by load, each run's smallest trigger that tips
// it over and, in brackets, the smallest that disturbs it.
func printPhaseTable(w io.Writer, res sweep.Result) {
	var runs []sweep.RunResult
	loads := map[float64]bool{}
	for _, r := range res.Runs {
		if r.Phase != nil && len(r.Phase.Columns) > 0 {
			runs = append(runs, r)
			for _, c := range r.Phase.Columns {
				loads[c.Load] = true
			}
		}
	}
	if len(runs) == 0 {
		return
	}
	sorted := make([]float64, 0, len(loads))
	for l := range loads {
		sorted = append(sorted, l)
	}
	sort.Float64s(sorted)
	fmt.Fprintln(w)
	ph := runs[0].Phase
	what := ph.Trigger.Kind
	if ph.Trigger.Target != "" {
		what += " of " + ph.Trigger.Target
	}
	fmt.Fprintln(w, wrap(fmt.Sprintf("Smallest %s (its %s) that leaves it metastable, by load; in brackets, the smallest that disturbs it at all:", what, ph.Vary), ""))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "LOAD/S"
	for _, r := range runs {
		head += "\t" + strings.ToUpper(r.Name)
	}
	fmt.Fprintln(tw, head)
	for _, l := range sorted {
		row := fmt.Sprintf("%.6g", l)
		for _, r := range runs {
			cell := "·"
			for _, c := range r.Phase.Columns {
				if c.Load == l {
					cell = sweepCell(r.Phase, c)
				}
			}
			row += "\t" + cell
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
}

// sweepTriggerText names a trigger: "outage of db (hold)".
func sweepTriggerText(t scenario.Trigger) string {
	s := t.Kind
	if t.Target != "" {
		s += " of " + t.Target
	}
	if t.Mode != "" {
		s += " (" + t.Mode + ")"
	}
	return s
}

// sweepArticle puts "a" or "an" before a noun.
func sweepArticle(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

func sweepCell(ph *sweep.Phase, c sweep.Column) string {
	size := func(v *float64) string {
		if v == nil {
			return "none ≤ " + ph.SizeText(ph.Max)
		}
		return ph.SizeText(*v)
	}
	if c.Overloaded() {
		return "no trigger needed"
	}
	return size(c.Tips) + " (" + size(c.Disturbs) + ")"
}

// sweepProgress draws "[####....] 40%  12/30 searches  140 simulations"
// on a terminal, from progressDelay after it starts.
type sweepProgress struct {
	w     io.Writer // nil when inactive
	mu    sync.Mutex
	start time.Time
	drawn time.Time // when the bar was last drawn; zero: never
}

func newSweepProgress(w io.Writer) *sweepProgress {
	p := &sweepProgress{start: time.Now()}
	if isTerminal(w) {
		p.w = w
	}
	return p
}

// set records progress and redraws at most every 200 ms.
func (p *sweepProgress) set(pr sweep.Progress) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := time.Since(p.start)
	if elapsed < progressDelay || time.Since(p.drawn) < 200*time.Millisecond {
		return
	}
	const width = 30
	frac := float64(pr.Done) / float64(max(pr.Total, 1))
	fill := int(frac * width)
	s := fmt.Sprintf("\r[%s%s] %3.0f%%  %d/%d searches  %d simulations", strings.Repeat("#", fill), strings.Repeat(".", width-fill), 100*frac, pr.Done, pr.Total, pr.Simulations)
	if frac > 0.05 {
		s += fmt.Sprintf("  about %v left", time.Duration(float64(elapsed)*(1-frac)/frac).Round(time.Second))
	}
	fmt.Fprint(p.w, s+"\033[K")
	p.drawn = time.Now()
}

// stop erases the bar.
func (p *sweepProgress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.drawn.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = time.Time{}
	}
}

// sweepRunsWord is "run" or "runs".
func sweepRunsWord(n int) string {
	if n == 1 {
		return "run"
	}
	return "runs"
}
