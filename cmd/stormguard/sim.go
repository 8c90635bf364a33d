package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim"
)

const simHelp = `Usage: stormguard sim [FILE] [--out DIR] [--seed N] [--json] [--max-events N]
                      [--max-memory SIZE]

Simulates, in virtual time, every run of the scenario FILE (YAML; see
examples/ for the format; - reads standard input). Without FILE it runs
the built-in hotos-toy scenario: the HotOS '21 toy example, where a 10 s
outage starts a retry storm that outlives it, next to the same system
with stormguard's policy and server defenses. Runs go in parallel on all
cores.

It prints one line per run: the verdict (stable, recovered, metastable),
the recovery time after the last trigger, demand and goodput (requests/s)
after the last trigger, retries (share of attempts), wasted work (share of
the services' work whose caller had given up) and the requests that gave
up with their top reason; then one sentence on what to change.

Flags (before or after FILE; -flag and --flag are the same):
  --out DIR   also write a report into DIR (made if missing): index.html,
              one self-contained page with a chart per run; summary.json;
              and per run RUN.csv (time series), RUN.png and RUN.svg
              (about 3 kB and 0.3 ms per bin of each series: the limits
              count it)
  --seed N    use seed N in every run instead of the file's seeds
              (default 0: keep the file's)
  --json      print one JSON object on stdout instead of the table:
              {"scenario": NAME, "runs": [{"name", "verdict", "recovery_s", …}]}
  --max-events N
              refuse runs estimated to simulate more than N events in all
              (default 2e9, some minutes on one core; inf: no limit)
  --max-memory SIZE
              refuse runs estimated to need more than SIZE of memory at
              once, such as 512MB or 16GB (default 4GB; inf: no limit)
  -h, --help  print this help

Limits: before it starts, sim estimates from the scenario the events the
runs would simulate (first tries: rates × duration, users, bursts, bins,
processes) and the memory they would hold (time series: duration / bin ×
clients and services; requests in flight: rate × timeout; users; bursts;
one retrier per process; queues), and refuses, in one line that names the
key driving the estimate, runs beyond --max-events or --max-memory. A
scenario file is at most 1 MiB and 1000 runs. Ctrl-C or SIGTERM stops
any run within a fraction of a second.

A progress bar appears on stderr when it is a terminal and the runs take
more than 2 s.

Exit status: 0 success (whatever the verdicts: a metastable run is a
result, not an error), 1 a run that failed, 2 usage error or bad input (a
missing or invalid scenario file, a run beyond a limit), 130 interrupted
(Ctrl-C, SIGTERM).
`

// simFlags are the flags of sim (and lab), but for the limits.
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

// seedFlag is sweep's --seed: a seed for every run, 0 to keep the file's.
type seedFlag uint64

func (s *seedFlag) String() string { return strconv.FormatUint(uint64(*s), 10) }

func (s *seedFlag) Set(text string) error {
	v, err := parseSeed(text)
	*s = seedFlag(v)
	return err
}

// parseSeed reads --seed: a whole number from 0 to 2⁶⁴ − 1.
func parseSeed(text string) (uint64, error) {
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a whole number from 0 (keep the file's seeds) to %d", uint64(math.MaxUint64))
	}
	return v, nil
}

// limitFlags are --max-events and --max-memory (see sim.Limits).
type limitFlags struct {
	events eventsFlag
	memory sizeFlag
}

func (l *limitFlags) set(fs *flag.FlagSet) {
	l.events, l.memory = sim.DefaultMaxEvents, sim.DefaultMaxMemory
	fs.Var(&l.events, "max-events", "refuse runs estimated to simulate more than `N` events")
	fs.Var(&l.memory, "max-memory", "refuse runs estimated to need more than `SIZE` of memory")
}

func (l limitFlags) limits() sim.Limits {
	return sim.Limits{Events: float64(l.events), Memory: float64(l.memory)}
}

// eventsFlag is --max-events.
type eventsFlag float64

func (e *eventsFlag) String() string { return formatCount(float64(*e)) }

func (e *eventsFlag) Set(text string) error {
	v, err := parseEvents(text)
	*e = eventsFlag(v)
	return err
}

// parseEvents reads --max-events: a number above 0 (2e9, 5000000000), or
// inf for no limit.
func parseEvents(text string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || !(v >= 1) {
		return 0, errors.New("want a number of events of at least 1, such as 2e9 (inf: no limit)")
	}
	return v, nil
}

// formatCount writes a count as the flags take it: 2e9, 1500, inf.
func formatCount(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	return strings.NewReplacer("e+0", "e", "e+", "e").Replace(s)
}

// sizeFlag is --max-memory.
type sizeFlag float64

func (s *sizeFlag) String() string {
	v := float64(*s)
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case v >= 1e9 && math.Mod(v, 1e9) == 0:
		return formatCount(v/1e9) + "GB"
	case v >= 1e6 && math.Mod(v, 1e6) == 0:
		return formatCount(v/1e6) + "MB"
	}
	return formatCount(v) + "B"
}

func (s *sizeFlag) Set(text string) error {
	v, err := parseSize(text)
	*s = sizeFlag(v)
	return err
}

// sizeUnits are the units of parseSize, longest first.
var sizeUnits = []struct {
	name string
	v    float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12}, {"b", 1},
}

// parseSize reads --max-memory: a number of bytes with an optional unit
// (B, kB, MB, GB, TB, in powers of 1000; KiB, MiB, GiB, TiB, of 1024;
// the case does not matter), 4GB or 512MiB, or inf for no limit.
func parseSize(text string) (float64, error) {
	bad := errors.New("want a size such as 512MB, 4GB or 2GiB (inf: no limit)")
	t := strings.ToLower(strings.TrimSpace(text))
	if t == "inf" {
		return math.Inf(1), nil
	}
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.name) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.name)), u.v
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) || !(v*mult >= 1) || math.IsInf(v*mult, 0) {
		return 0, bad
	}
	return v * mult, nil
}

// runSim is `stormguard sim`.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f simFlags
	var lf limitFlags
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.set(fs)
	lf.set(fs)
	pos, helped, err := parseCommand(fs, args, simHelp, stdout)
	if helped || err != nil {
		return err
	}
	if err := atMostOneFile("sim", pos, false); err != nil {
		return err
	}

	file, err := load(pos)
	if err != nil {
		return refused("sim: ", err)
	}
	if f.seed != 0 {
		for i := range file.Runs {
			file.Runs[i].Scenario.Seed = f.seed
		}
	}
	limits := lf.limits()
	if err := checkRuns(file.Runs, limits, runtime.GOMAXPROCS(0), f.out != ""); err != nil {
		return refused("sim: "+file.Path+": ", err)
	}
	name := file.Base.Name
	if name == "" {
		name = filepath.Base(file.Path)
	}
	start := time.Now()
	results, err := simulate(ctx, file.Runs, limits, stderr)
	if err != nil {
		return refused("sim: "+file.Path+": ", err)
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

// What --out costs for each bin of each client's and service's series,
// measured on report.Sim.Write: its tables, charts and page hold about
// 2.9 kB and take about 0.3 ms of CPU (the time of some 1000 events).
const (
	reportBytesPerBin  = 3000
	reportEventsPerBin = 1000
)

// checkRuns refuses runs whose estimated cost, all together, exceeds l
// (see sim.Estimate): their events add up; their memory is what every
// run's Result holds, and what the workers runs that go at once hold
// besides. With report (--out), the report's work and memory count too.
// The error is a *sim.LimitError.
func checkRuns(runs []sim.RunSpec, l sim.Limits, workers int, report bool) error {
	if len(runs) == 0 {
		return nil
	}
	costs := make([]sim.Cost, len(runs))
	var total sim.Cost
	topE, topM := 0, 0
	for i, r := range runs {
		c := sim.Estimate(r.Scenario)
		if report {
			s := r.Scenario
			d, bin := cmp.Or(s.Duration, sim.DefaultDuration), cmp.Or(s.Bin, sim.DefaultBin)
			n := math.Ceil(float64(d)/float64(bin)) * float64(len(s.Clients)+len(s.Services))
			why := fmt.Sprintf("--out: the report's tables and charts of %s bins × %d series", formatCount(math.Ceil(float64(d)/float64(bin))), len(s.Clients)+len(s.Services))
			if e := n * reportEventsPerBin; e > c.Events {
				c.EventsDriver = why
			}
			c.Events += n * reportEventsPerBin
			if m := n * reportBytesPerBin; m > c.Memory {
				c.MemoryDriver = why
			}
			// The report is written once every run is done: it adds
			// to what the Results hold.
			c.Memory += n * reportBytesPerBin
			c.Series += n * reportBytesPerBin
		}
		costs[i] = c
		total.Events += c.Events
		total.Series += c.Series
		if c.Events > costs[topE].Events || math.IsNaN(c.Events) {
			topE = i
		}
		if c.Memory > costs[topM].Memory || math.IsNaN(c.Memory) {
			topM = i
		}
	}
	// The workers with the most memory besides their Result.
	work := make([]float64, len(runs))
	for i, c := range costs {
		work[i] = c.Memory - c.Series
	}
	slices.SortFunc(work, func(a, b float64) int { return cmp.Compare(b, a) })
	total.Memory = total.Series
	for _, w := range work[:min(max(workers, 1), len(work))] {
		total.Memory += w
	}
	total.EventsDriver, total.MemoryDriver = costs[topE].EventsDriver, costs[topM].MemoryDriver
	if len(runs) > 1 {
		total.EventsDriver = fmt.Sprintf("%d runs; run %s: %s", len(runs), runs[topE].Name, total.EventsDriver)
		total.MemoryDriver = fmt.Sprintf("%d runs; run %s: %s", len(runs), runs[topM].Name, total.MemoryDriver)
	}
	err := l.Check(total)
	if le, ok := err.(*sim.LimitError); ok && len(runs) > 1 {
		le.Subject = "the runs"
	}
	return err
}

// refused words an error for the command line: a *sim.LimitError or a
// file over its size limit becomes a usage error (exit status 2) that
// begins with prefix and, for a limit, ends with the flag that raises it.
// Other errors are returned as they are.
func refused(prefix string, err error) error {
	var le *sim.LimitError
	switch {
	case errors.As(err, &le):
		flag := "--max-events"
		if le.Quantity == "memory" {
			flag = "--max-memory"
		}
		return usageError{fmt.Sprintf("%s%v; raise it with %s", prefix, err, flag)}
	case errors.Is(err, sim.ErrFileTooLarge):
		return usageError{prefix + err.Error()}
	}
	return err
}

// load reads the scenario file named in pos ("-": standard input), or the
// embedded default.
func load(pos []string) (sim.File, error) {
	if len(pos) == 0 {
		return sim.Parse(examples.DefaultName, examples.Default())
	}
	f, err := sim.Load(pos[0])
	return f, badInput(err)
}

// simulate runs every run, at most GOMAXPROCS at once, and returns the
// results in the order of runs. The first failure cancels the others.
func simulate(ctx context.Context, runs []sim.RunSpec, limits sim.Limits, stderr io.Writer) ([]sim.Result, error) {
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
				r, err := sim.RunWithin(rctx, runs[i].Scenario, runs[i].Name, func(frac float64) { bar.set(i, frac) }, limits)
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
