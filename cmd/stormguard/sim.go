package main

import (
	"cmp"
	"context"
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
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

const simHelp = `Usage: stormguard sim [FILE] [--out DIR] [--seed N] [--json] [--max-events N]
                      [--max-memory SIZE]

Simulates, in virtual time, every run of the scenario FILE (YAML; see
examples/ for the format; - reads standard input). Without FILE it runs
the built-in hotos-toy scenario: the HotOS '21 toy example, where a 10 s
outage starts a retry storm that outlives it, next to the same system
with stormguard's policy and server defenses. Runs go in parallel on all
cores.

It prints one line per run: the verdict (stable, recovered, metastable,
degraded: unhealthy before anything happened to it, or not judged), the
recovery time and what it counts from (the end of the last trigger, or
the collapse), demand and goodput (requests/s) after the last trigger,
retries (share of attempts), wasted work (share of the services' work
whose caller had given up) and the requests that gave up with their top
reason; then every client's and service's verdict (a run's is the worst
client's, or a service's that ended down where its callers did not see
it), the reasons, and one sentence on what to change (policies, defenses,
capacity, autoscaling, runbooks: never the scenario's triggers or fault
rates).

Flags (before or after FILE; -flag and --flag are the same):
  --out DIR   also write a report into DIR (made if missing): index.html,
              one self-contained page with a chart per run; summary.json;
              and per run RUN.csv (time series), RUN.png and RUN.svg (a
              chart draws at most 2,000 points a line: a longer series is
              averaged over runs of bins; the limits count the report)
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
processes) and the memory they would hold (time series: 16 bytes per bin
and client, the rest of each bin going to a temporary file as it closes;
requests in flight: rate × timeout; users; bursts; one retrier per
process; queues), and refuses, in one line that names the key driving
the estimate, runs beyond --max-events or --max-memory. A scenario file
is at most 1 MiB and 1000 runs. Ctrl-C or SIGTERM stops any run within a
fraction of a second.

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
	results, spools, err := simulate(ctx, file.Runs, limits, stderr)
	defer closeSpools(spools)
	if err != nil {
		return refused("sim: "+file.Path+": ", err)
	}
	out := result.Output{Scenario: name, Description: file.Base.Description, Runs: results}
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
		// Bin by bin, as encoding/json would write out whole: the runs'
		// series stream from their spools.
		return result.WriteJSON(stdout, out, false)
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

// What --out costs, measured on report.Sim.Write: for each bin of each
// client's and service's series, the CSV's row, summary.json's bin and
// the charts' passes over the spooled series take some tens of
// microseconds of CPU (counted as 100 events); the charts, drawn one run
// at a time with at most 2,000 points a line, hold about 10 MB, and each
// run's PNG, which the page inlines, some 100 kB.
const (
	reportEventsPerBin = 100
	reportBytes        = 16 << 20
	reportBytesPerRun  = 256 << 10
)

// checkRuns refuses runs whose estimated cost, all together, exceeds l
// (see sim.EstimateSpooled: sim spools the runs' series): their events
// add up; their memory is what every run's Result holds, and what the
// workers runs that go at once hold besides. With report (--out), the
// report's work and memory count too. The error is a *sim.LimitError.
func checkRuns(runs []scenario.RunSpec, l sim.Limits, workers int, report bool) error {
	if len(runs) == 0 {
		return nil
	}
	costs := make([]sim.Cost, len(runs))
	var total sim.Cost
	topE, topM := 0, 0
	for i, r := range runs {
		c := sim.EstimateSpooled(r.Scenario)
		if report {
			s := r.Scenario
			d, bin := cmp.Or(s.Duration, scenario.DefaultDuration), cmp.Or(s.Bin, scenario.DefaultBin)
			n := math.Ceil(float64(d)/float64(bin)) * float64(len(s.Clients)+len(s.Services))
			why := fmt.Sprintf("--out: the report's tables and charts of %s bins × %d series", formatCount(math.Ceil(float64(d)/float64(bin))), len(s.Clients)+len(s.Services))
			if e := n * reportEventsPerBin; e > c.Events {
				c.EventsDriver = why
			}
			c.Events += n * reportEventsPerBin
			// The report is written once every run is done: its
			// charts and pages add to what the Results hold.
			c.Memory += reportBytesPerRun
			c.Series += reportBytesPerRun
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
	if report {
		total.Memory += reportBytes
	}
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
	case errors.Is(err, scenario.ErrFileTooLarge):
		return usageError{prefix + err.Error()}
	}
	return err
}

// load reads the scenario file named in pos ("-": standard input), or the
// embedded default.
func load(pos []string) (scenario.File, error) {
	if len(pos) == 0 {
		return scenario.Parse(examples.DefaultName, examples.Default())
	}
	f, err := scenario.Load(pos[0])
	return f, badInput(err)
}

// simulate runs every run, at most GOMAXPROCS at once, and returns the
// results in the order of runs. The first failure cancels the others.
// Each run's series go to a spool as its bins close (sim.RunSpooled), on a
// temporary file that nothing else can open (it is removed at once), and
// its Result reads them back from there: close the spools once the
// results are written.
func simulate(ctx context.Context, runs []scenario.RunSpec, limits sim.Limits, stderr io.Writer) ([]result.Result, []*result.Spool, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]result.Result, len(runs))
	spools := make([]*result.Spool, len(runs))
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
				spools[i] = result.NewSpool()
				r, err := sim.RunSpooled(rctx, runs[i].Scenario, runs[i].Name, func(frac float64) { bar.set(i, frac) }, limits, spools[i])
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
			return nil, spools, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, spools, fmt.Errorf("interrupted: %w", err)
	}
	return results, spools, nil
}

// closeSpools closes the spools simulate made.
func closeSpools(spools []*result.Spool) {
	for _, s := range spools {
		if s != nil {
			s.Close()
		}
	}
}
