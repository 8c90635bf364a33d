package sweep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Shard is one part of a sweep split over machines: the Index-th (from 1)
// of Count. The zero Shard is the whole sweep (1/1).
type Shard struct {
	Index int `json:"index"` // from 1
	Count int `json:"count"` // the number of shards
}

// ParseShard reads "I/N" (1 ≤ I ≤ N ≤ MaxShards).
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want I/N, such as 2/4", s)
	}
	sh := Shard{Index: i, Count: n}
	return sh, sh.validate()
}

func (s Shard) validate() error {
	if s.Count < 1 || s.Index < 1 || s.Index > s.Count || s.Count > MaxShards {
		return fmt.Errorf("shard %d/%d: want 1 ≤ I ≤ N ≤ %d", s.Index, s.Count, MaxShards)
	}
	return nil
}

func (s Shard) orWhole() Shard {
	if s == (Shard{}) {
		return Shard{1, 1}
	}
	return s
}

// String writes "I/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Exec says how to carry out a plan. The zero Exec runs the whole plan on
// every core, silently.
type Exec struct {
	// Workers running simulations at once [runtime.GOMAXPROCS(0)]. It
	// changes how long a sweep takes, never its result.
	Workers int
	// Shard: the part of the plan to run [the whole].
	Shard Shard
	// Progress, if not nil, is called after each simulation, from one
	// goroutine at a time.
	Progress func(Progress)
	// Limits bound the cost of the shard's jobs, all together (see
	// Estimate), and of each simulation [sim.DefaultLimits].
	Limits sim.Limits
}

// Progress is how far a sweep has got: searches (a ramp, or a phase
// search at one load) done out of all of the shard's, and simulations run.
type Progress struct {
	Done, Total int // searches
	Simulations int // simulator runs so far
}

// job is one unit of work: the ramp of a run, the phase search of a run
// at one load (index: the load's), a runbook search of a run, or one run
// of the comparison (index: its seed's). Jobs are numbered in plan order
// (see jobs); shard I of N takes the jobs whose number is I − 1 modulo N.
type job struct {
	kind       jobKind
	run, index int
}

type jobKind uint8

const (
	jobRamp jobKind = iota
	jobColumn
	jobCapacity
	jobLatest
	jobCompare
)

// jobs lists the plan's jobs: every run's ramp and phase columns, then
// every run's runbook searches, then the comparison's runs (so that a
// plan without runbook questions numbers its jobs as before them).
func (p Plan) jobs() []job {
	var js []job
	for r, rp := range p.Runs {
		if rp.Ramp != nil {
			js = append(js, job{jobRamp, r, 0})
		}
		if rp.Phase != nil {
			for l := range rp.Phase.Loads {
				js = append(js, job{jobColumn, r, l})
			}
		}
	}
	for r, rp := range p.Runs {
		if rp.AddCapacity != nil {
			js = append(js, job{jobCapacity, r, 0})
		}
		if rp.Latest != nil {
			js = append(js, job{jobLatest, r, 0})
		}
	}
	if p.Compare != nil {
		for r := range p.Runs {
			for k := range p.Compare.Seeds {
				js = append(js, job{jobCompare, r, k})
			}
		}
	}
	return js
}

// order is a job's place when jobs start: the longest first (ramps, the
// runbook searches, the phase columns from the highest load), single runs
// last. It changes only the wall time.
func (j job) order() (int, int) {
	switch j.kind {
	case jobRamp:
		return 0, 0
	case jobCapacity, jobLatest:
		return 1, 0
	case jobColumn:
		return 2, -j.index
	}
	return 3, 0
}

// PartialFormat names the format of a Partial.
const PartialFormat = "stormguard-sweep-partial/1"

// Partial is what one shard computed: the plan, and the results of its
// jobs. Merge puts the partials of all shards together.
type Partial struct {
	Format string `json:"format"` // PartialFormat
	Shard  Shard  `json:"shard"`
	// Plan is the whole plan (without the scenarios), for Merge.
	Plan Plan `json:"plan"`
	// Ramps and Columns are the shard's jobs, in plan order; so are the
	// runbook questions' (empty when not asked).
	Ramps      []RampPart     `json:"ramps"`
	Columns    []ColumnPart   `json:"columns"`
	Capacities []CapacityPart `json:"add_capacity,omitempty"`
	Latests    []LatestPart   `json:"latest,omitempty"`
	Compares   []ComparePart  `json:"compare,omitempty"`
}

// CapacityPart is the capacity question of run Run.
type CapacityPart struct {
	Run    int            `json:"run"`
	Search CapacitySearch `json:"search"`
}

// LatestPart is the latest-time question of run Run.
type LatestPart struct {
	Run    int          `json:"run"`
	Search LatestSearch `json:"search"`
}

// ComparePart is run Run of the comparison with its Seed-th seed (from 0).
type ComparePart struct {
	Run     int     `json:"run"`
	Seed    int     `json:"seed"`
	Outcome SeedRun `json:"outcome"`
}

// RampPart is the ramp of run Run (an index into Plan.Runs).
type RampPart struct {
	Run  int  `json:"run"`  // index into Plan.Runs
	Ramp Ramp `json:"ramp"` // the result
}

// ColumnPart is the phase search of run Run at load Load (indexes into
// Plan.Runs and the run's loads).
type ColumnPart struct {
	Run    int    `json:"run"`    // index into Plan.Runs
	Load   int    `json:"load"`   // index into the run's Phase.Loads
	Column Column `json:"column"` // the result
}

// Run carries out the whole plan and returns its result.
func Run(ctx context.Context, p Plan, e Exec) (Result, error) {
	if e.Shard.orWhole() != (Shard{1, 1}) {
		return Result{}, fmt.Errorf("sweep.Run runs the whole plan, not shard %v: use Execute and Merge", e.Shard)
	}
	part, err := Execute(ctx, p, e)
	if err != nil {
		return Result{}, err
	}
	return Merge(part)
}

// Execute runs the jobs of e.Shard, Workers at a time, and returns them as
// a Partial. The first failure stops the others; if ctx ends first, its
// error is returned.
func Execute(ctx context.Context, p Plan, e Exec) (Partial, error) {
	sh := e.Shard.orWhole()
	if err := sh.validate(); err != nil {
		return Partial{}, err
	}
	part := Partial{Format: PartialFormat, Shard: sh, Plan: p}
	for _, rp := range p.Runs {
		if !slices.ContainsFunc(rp.scenario.Clients, func(c scenario.Client) bool { return c.Name == rp.Client }) {
			return part, fmt.Errorf("run %s has no scenario to simulate: make plans with NewPlan", rp.Name)
		}
	}
	if err := check(p, e); err != nil {
		return part, err
	}
	var mine []job
	for j, jb := range p.jobs() {
		if j%sh.Count == sh.Index-1 {
			mine = append(mine, jb)
		}
	}
	// Longest first (see job.order).
	order := slices.Clone(mine)
	slices.SortStableFunc(order, func(a, b job) int {
		a1, a2 := a.order()
		b1, b2 := b.order()
		return cmp.Or(cmp.Compare(a1, b1), cmp.Compare(a2, b2))
	})
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var mu sync.Mutex // guards prog, the calls of e.Progress, ramps, cols and errs
	prog := Progress{Total: len(mine)}
	report := func(sims, done int) {
		if e.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		prog.Simulations += sims
		prog.Done += done
		e.Progress(prog)
	}
	simulate := func(s scenario.Scenario, name string) (result.Result, error) {
		r, err := sim.RunWithin(ctx, s, name, nil, e.Limits)
		if err == nil {
			report(1, 0)
		}
		return r, err
	}
	// The searches need only verdicts: their runs stop once the verdict
	// is settled (sim.RunJudged).
	judge := func(s scenario.Scenario, name string) (result.Result, error) {
		r, err := sim.RunJudged(ctx, s, name, e.Limits)
		if err == nil {
			report(1, 0)
		}
		return r, err
	}

	var got results
	var errs []error
	next := make(chan job)
	var wg sync.WaitGroup
	for range min(workers, max(len(order), 1)) {
		wg.Go(func() {
			for jb := range next {
				if ctx.Err() != nil {
					continue
				}
				rp := p.Runs[jb.run]
				err := got.run(jb, rp, simulate, judge, &mu)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("run %s: %w", rp.Name, err))
					mu.Unlock()
					cancel()
					continue
				}
				report(0, 1)
			}
		})
	}
	for _, jb := range order {
		next <- jb
	}
	close(next)
	wg.Wait()
	// A failure cancels the other jobs: report it, not their cancellation.
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			return part, err
		}
	}
	if err := parent.Err(); err != nil {
		return part, fmt.Errorf("interrupted: %w", err)
	}
	for _, jb := range mine {
		switch jb.kind {
		case jobRamp:
			part.Ramps = append(part.Ramps, RampPart{Run: jb.run, Ramp: got.ramps[jb]})
		case jobColumn:
			part.Columns = append(part.Columns, ColumnPart{Run: jb.run, Load: jb.index, Column: got.cols[jb]})
		case jobCapacity:
			part.Capacities = append(part.Capacities, CapacityPart{Run: jb.run, Search: got.caps[jb]})
		case jobLatest:
			part.Latests = append(part.Latests, LatestPart{Run: jb.run, Search: got.latest[jb]})
		case jobCompare:
			part.Compares = append(part.Compares, ComparePart{Run: jb.run, Seed: jb.index, Outcome: got.seeds[jb]})
		}
	}
	return part, nil
}

// results gathers the jobs' results, by job.
type results struct {
	ramps  map[job]Ramp
	cols   map[job]Column
	caps   map[job]CapacitySearch
	latest map[job]LatestSearch
	seeds  map[job]SeedRun
}

// run carries out the job jb of run rp and keeps its result, under mu:
// the ramp and the comparison's runs with simulate, which runs to the end
// (their series and times matter), the searches with judge, which may stop
// a run once its verdict is settled.
func (g *results) run(jb job, rp RunPlan, simulate, judge simulateFunc, mu *sync.Mutex) error {
	var keep func()
	var err error
	switch jb.kind {
	case jobRamp:
		var r Ramp
		r, err = runRamp(rp, simulate)
		keep = func() { g.ramps = put(g.ramps, jb, r) }
	case jobColumn:
		var c Column
		c, err = runColumn(rp, rp.Phase.Loads[jb.index], judge)
		keep = func() { g.cols = put(g.cols, jb, c) }
	case jobCapacity:
		var c CapacitySearch
		c, err = runCapacity(rp, judge)
		keep = func() { g.caps = put(g.caps, jb, c) }
	case jobLatest:
		var l LatestSearch
		l, err = runLatest(rp, judge)
		keep = func() { g.latest = put(g.latest, jb, l) }
	case jobCompare:
		var o SeedRun
		o, err = runCompareSeed(rp, jb.index, simulate)
		keep = func() { g.seeds = put(g.seeds, jb, o) }
	}
	mu.Lock()
	keep()
	mu.Unlock()
	return err
}

// put sets m[k] = v, making m if needed.
func put[V any](m map[job]V, k job, v V) map[job]V {
	if m == nil {
		m = map[job]V{}
	}
	m[k] = v
	return m
}

// Merge puts together the partials of every shard of one plan (in any
// order) into the Result an unsplit sweep gives. It fails when a shard is
// missing or given twice, or when the partials come from different plans.
func Merge(parts ...Partial) (Result, error) {
	if len(parts) == 0 {
		return Result{}, errors.New("no partial results to merge")
	}
	first := parts[0]
	if err := first.Shard.validate(); err != nil {
		return Result{}, fmt.Errorf("partial 1: %w", err)
	}
	n := first.Shard.Count
	seen := make([]bool, n+1)
	for i, pt := range parts {
		switch {
		case pt.Format != PartialFormat:
			return Result{}, fmt.Errorf("partial %d: format %q, want %q", i+1, pt.Format, PartialFormat)
		case pt.Plan.Key != first.Plan.Key:
			return Result{}, fmt.Errorf("shard %v comes from another sweep than shard %v (key %s, not %s): the same file, seed and settings must be given to every shard", pt.Shard, first.Shard, pt.Plan.Key, first.Plan.Key)
		case pt.Shard.Count != n:
			return Result{}, fmt.Errorf("shard %v and shard %v split the sweep differently", pt.Shard, first.Shard)
		case pt.Shard.validate() != nil:
			return Result{}, pt.Shard.validate()
		case seen[pt.Shard.Index]:
			return Result{}, fmt.Errorf("shard %v is given twice", pt.Shard)
		}
		seen[pt.Shard.Index] = true
	}
	var missing []string
	for i := 1; i <= n; i++ {
		if !seen[i] {
			missing = append(missing, Shard{i, n}.String())
		}
	}
	if len(missing) > 0 {
		return Result{}, fmt.Errorf("shard %s missing", strings.Join(missing, ", "))
	}

	p := first.Plan
	var got results
	for _, pt := range parts {
		for _, r := range pt.Ramps {
			got.ramps = put(got.ramps, job{jobRamp, r.Run, 0}, r.Ramp)
		}
		for _, c := range pt.Columns {
			got.cols = put(got.cols, job{jobColumn, c.Run, c.Load}, c.Column)
		}
		for _, c := range pt.Capacities {
			got.caps = put(got.caps, job{jobCapacity, c.Run, 0}, c.Search)
		}
		for _, l := range pt.Latests {
			got.latest = put(got.latest, job{jobLatest, l.Run, 0}, l.Search)
		}
		for _, c := range pt.Compares {
			got.seeds = put(got.seeds, job{jobCompare, c.Run, c.Seed}, c.Outcome)
		}
	}
	res := Result{Scenario: p.Scenario, Description: p.Description, Key: p.Key}
	for _, rp := range p.Runs {
		res.Runs = append(res.Runs, RunResult{Name: rp.Name, Changes: rp.Changes, Client: rp.Client, TimeoutS: rp.TimeoutS,
			Target: rp.Target, Capacity: rp.Capacity, Seed: rp.Seed})
	}
	outcomes := make([][]SeedRun, len(p.Runs))
	for _, jb := range p.jobs() {
		rr := &res.Runs[jb.run]
		rp := p.Runs[jb.run]
		switch jb.kind {
		case jobRamp:
			r, ok := got.ramps[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the ramp of run %s", rp.Name)
			}
			rr.Ramp = &r
			res.Simulations += r.Simulations
			res.VirtualS += r.VirtualS
		case jobColumn:
			c, ok := got.cols[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack run %s at load %v", rp.Name, rp.Phase.Loads[jb.index])
			}
			if rr.Phase == nil {
				rr.Phase = &Phase{PhasePlan: *rp.Phase}
			}
			rr.Phase.Columns = append(rr.Phase.Columns, c)
			res.Simulations += c.Simulations
			res.VirtualS += c.VirtualS
		case jobCapacity:
			c, ok := got.caps[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the capacity search of run %s", rp.Name)
			}
			rr.AddCapacity = &c
			res.Simulations += c.Simulations
			res.VirtualS += c.VirtualS
		case jobLatest:
			l, ok := got.latest[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the latest-time search of run %s", rp.Name)
			}
			rr.Latest = &l
			res.Simulations += l.Simulations
			res.VirtualS += l.VirtualS
		case jobCompare:
			o, ok := got.seeds[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack run %s of the comparison with seed %d", rp.Name, rp.Seed+uint64(jb.index))
			}
			outcomes[jb.run] = append(outcomes[jb.run], o)
			res.Simulations++
			res.VirtualS += o.VirtualS
		}
	}
	if p.Compare != nil {
		names := make([]string, len(p.Runs))
		for i, rp := range p.Runs {
			names[i] = rp.Name
		}
		res.Compare = compare(names, outcomes, p.Compare.Seeds)
	}
	return res, nil
}

// simulateFunc runs one scenario.
type simulateFunc func(s scenario.Scenario, name string) (result.Result, error)

// withClient returns a copy of the run's scenario whose swept client
// shares nothing with the original, and the client's index.
func (rp RunPlan) withClient() (scenario.Scenario, int) {
	s := rp.scenario
	s.Clients = slices.Clone(s.Clients)
	i := slices.IndexFunc(s.Clients, func(c scenario.Client) bool { return c.Name == rp.Client })
	s.Clients[i].Arrivals.Schedule = nil
	return s, i
}

// rampLoads returns the loads of the ramp's steps, up then down.
func (r RampPlan) loads() []float64 {
	var up []float64
	for k := 0; ; k++ {
		l := roundTo(r.From+float64(k)*r.Step, r.Step)
		if l > r.To*(1+1e-9) {
			break
		}
		up = append(up, l)
	}
	if up[len(up)-1] < r.To*(1-1e-9) {
		up = append(up, r.To)
	}
	out := slices.Clone(up)
	for i := len(up) - 2; i >= 0; i-- {
		out = append(out, up[i])
	}
	return out
}

// rampScenario is the simulation of a run's ramp: its arrival rate steps
// through the loads, no triggers and no runbook actions (timed for the
// file's trigger, they would land anywhere on the ramp; autoscalers stay:
// they are part of the system).
func (rp RunPlan) rampScenario() scenario.Scenario {
	loads := rp.Ramp.loads()
	hold := seconds(rp.Ramp.HoldS)
	s, ci := rp.withClient()
	sched := make([]scenario.RatePoint, len(loads))
	for i, l := range loads {
		sched[i] = scenario.RatePoint{At: time.Duration(i) * hold, Rate: l}
	}
	s.Clients[ci].Arrivals.Schedule = sched
	s.Clients[ci].Arrivals.Rate = 0
	s.Triggers, s.Actions = nil, nil
	s.Duration = time.Duration(len(loads)) * hold
	return s
}

// runRamp runs the quasi-static ramp of a run: one simulation (see
// rampScenario).
func runRamp(rp RunPlan, simulate simulateFunc) (Ramp, error) {
	r := Ramp{RampPlan: *rp.Ramp}
	loads := r.loads()
	res, err := simulate(rp.rampScenario(), rp.Name+"/ramp")
	if err != nil {
		return r, err
	}
	r.Simulations, r.VirtualS = 1, res.DurationS
	cbins := clientBins(res, rp.Client)
	sbins := serviceBins(res, rp.Target)
	peak := len(loads) / 2
	for i, l := range loads {
		t0 := float64(i) * r.HoldS
		from, to := t0+r.HoldS/2, t0+r.HoldS
		st := Step{Branch: "up", Load: l, T: t0}
		if i > peak {
			st.Branch = "down"
		}
		n := 0
		for _, b := range cbins {
			if b.T >= from-1e-9 && b.T < to-1e-9 {
				st.Demand += b.Demand
				st.Goodput += b.Goodput
				n++
			}
		}
		m := 0
		for _, b := range sbins {
			if b.T >= from-1e-9 && b.T < to-1e-9 {
				st.Offered += b.OfferedFirst + b.OfferedRetries
				m++
			}
		}
		st.Demand /= float64(max(n, 1))
		st.Goodput /= float64(max(n, 1))
		st.Offered /= float64(max(m, 1))
		r.Steps = append(r.Steps, st)
	}
	r.Collapse, r.Recovery = thresholds(r.Steps)
	return r, nil
}

// thresholds reads the collapse and recovery loads off the steps.
func thresholds(steps []Step) (collapse, recovery *float64) {
	at := -1
	for i, st := range steps {
		if st.Branch == "up" && st.Demand > 0 && st.Goodput < CollapseBelow*st.Demand {
			c := st.Load
			collapse, at = &c, i
			break
		}
	}
	if collapse == nil {
		return nil, nil
	}
	for _, st := range steps[at:] {
		if st.Branch == "down" && st.Demand > 0 && st.Goodput >= RecoveredAbove*st.Demand {
			r := st.Load
			return collapse, &r
		}
	}
	return collapse, nil
}

// runColumn runs the phase search of a run at one load.
func runColumn(rp RunPlan, load float64, simulate simulateFunc) (Column, error) {
	ph := *rp.Phase
	sims, virtual := 0, 0.0
	probe := func(k int) (Probe, error) {
		size := ph.Size(k)
		name := fmt.Sprintf("%s/load=%s/%s=%s", rp.Name, trimFloat(load), ph.Vary, trimFloat(size))
		res, err := simulate(rp.probeScenario(load, size), name)
		if err != nil {
			return Probe{}, err
		}
		sims++
		virtual += res.DurationS
		return Probe{Size: size, Verdict: res.Verdict, RecoveryS: res.RecoveryS}, nil
	}
	c, err := searchColumn(ph.Sizes(), ph.Size, probe)
	c.Load, c.Simulations, c.VirtualS = load, sims, virtual
	return c, err
}

// probeScenario is one simulation of a phase search: the run at load
// with the trigger of the given size.
func (rp RunPlan) probeScenario(load, size float64) scenario.Scenario {
	ph := rp.Phase
	s, ci := rp.withClient()
	s.Clients[ci].Arrivals.Rate = load
	t := ph.Trigger
	switch ph.Vary {
	case VaryFactor:
		t.Factor = size
	case VaryAdd:
		t.Add = seconds(size)
	case VaryKeys:
		t.Keys = int(math.Round(size))
	default:
		t.Duration = seconds(size)
	}
	if size == 0 && (ph.Vary == VaryKeys || ph.Vary == VaryFactor && t.Kind == "hang") {
		// Size 0 is no trigger, in the same window (a hang probability
		// of 0 is not one; a flush of 0 keys would flush them all): a
		// load spike of 1×, which changes nothing.
		t = scenario.Trigger{Kind: "load", Factor: 1, At: t.At, Duration: t.Duration}
	}
	s.Triggers = []scenario.Trigger{t}
	s.Duration = t.At + t.Duration + seconds(ph.AfterS)
	return s
}

func clientBins(r result.Result, name string) []result.ClientBin {
	for _, c := range r.Clients {
		if c.Name == name {
			return c.Bins
		}
	}
	return nil
}

func serviceBins(r result.Result, name string) []result.ServiceBin {
	for _, v := range r.Services {
		if v.Name == name {
			return v.Bins
		}
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
