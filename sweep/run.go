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

// job is one unit of work: the ramp of a run (load < 0) or the phase
// search of a run at one load. Jobs are numbered in plan order; shard I
// of N takes the jobs whose number is I − 1 modulo N.
type job struct{ run, load int }

func (p Plan) jobs() []job {
	var js []job
	for r, rp := range p.Runs {
		if rp.Ramp != nil {
			js = append(js, job{r, -1})
		}
		if rp.Phase != nil {
			for l := range rp.Phase.Loads {
				js = append(js, job{r, l})
			}
		}
	}
	return js
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
	// Ramps and Columns are the shard's jobs, in plan order.
	Ramps   []RampPart   `json:"ramps"`
	Columns []ColumnPart `json:"columns"`
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
		if !slices.ContainsFunc(rp.scenario.Clients, func(c sim.Client) bool { return c.Name == rp.Client }) {
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
	// Longest first: the ramps, then the highest loads. The order changes
	// only the wall time.
	order := slices.Clone(mine)
	slices.SortStableFunc(order, func(a, b job) int {
		// load −1 (a ramp) sorts first, then the loads high to low.
		ka, kb := a.load, b.load
		if ka < 0 {
			ka = math.MaxInt
		}
		if kb < 0 {
			kb = math.MaxInt
		}
		return cmp.Compare(kb, ka)
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
	simulate := func(s sim.Scenario, name string) (sim.Result, error) {
		r, err := sim.RunWithin(ctx, s, name, nil, e.Limits)
		if err == nil {
			report(1, 0)
		}
		return r, err
	}

	ramps := map[job]Ramp{}
	cols := map[job]Column{}
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
				var err error
				if jb.load < 0 {
					var r Ramp
					r, err = runRamp(rp, simulate)
					mu.Lock()
					ramps[jb] = r
					mu.Unlock()
				} else {
					var c Column
					c, err = runColumn(rp, rp.Phase.Loads[jb.load], simulate)
					mu.Lock()
					cols[jb] = c
					mu.Unlock()
				}
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
		if jb.load < 0 {
			part.Ramps = append(part.Ramps, RampPart{Run: jb.run, Ramp: ramps[jb]})
		} else {
			part.Columns = append(part.Columns, ColumnPart{Run: jb.run, Load: jb.load, Column: cols[jb]})
		}
	}
	return part, nil
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
	ramps := map[job]Ramp{}
	cols := map[job]Column{}
	for _, pt := range parts {
		for _, r := range pt.Ramps {
			ramps[job{r.Run, -1}] = r.Ramp
		}
		for _, c := range pt.Columns {
			cols[job{c.Run, c.Load}] = c.Column
		}
	}
	res := Result{Scenario: p.Scenario, Description: p.Description, Key: p.Key}
	for _, rp := range p.Runs {
		res.Runs = append(res.Runs, RunResult{Name: rp.Name, Changes: rp.Changes, Client: rp.Client, TimeoutS: rp.TimeoutS,
			Target: rp.Target, Capacity: rp.Capacity, Seed: rp.Seed})
	}
	for _, jb := range p.jobs() {
		rr := &res.Runs[jb.run]
		rp := p.Runs[jb.run]
		if jb.load < 0 {
			r, ok := ramps[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the ramp of run %s", rp.Name)
			}
			rr.Ramp = &r
			res.Simulations += r.Simulations
			res.VirtualS += r.VirtualS
			continue
		}
		c, ok := cols[jb]
		if !ok {
			return Result{}, fmt.Errorf("the partials lack run %s at load %v", rp.Name, rp.Phase.Loads[jb.load])
		}
		if rr.Phase == nil {
			rr.Phase = &Phase{PhasePlan: *rp.Phase}
		}
		rr.Phase.Columns = append(rr.Phase.Columns, c)
		res.Simulations += c.Simulations
		res.VirtualS += c.VirtualS
	}
	return res, nil
}

// simulateFunc runs one scenario.
type simulateFunc func(s sim.Scenario, name string) (sim.Result, error)

// withClient returns a copy of the run's scenario whose swept client
// shares nothing with the original, and the client's index.
func (rp RunPlan) withClient() (sim.Scenario, int) {
	s := rp.scenario
	s.Clients = slices.Clone(s.Clients)
	i := slices.IndexFunc(s.Clients, func(c sim.Client) bool { return c.Name == rp.Client })
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
// through the loads, no triggers.
func (rp RunPlan) rampScenario() sim.Scenario {
	loads := rp.Ramp.loads()
	hold := seconds(rp.Ramp.HoldS)
	s, ci := rp.withClient()
	sched := make([]sim.RatePoint, len(loads))
	for i, l := range loads {
		sched[i] = sim.RatePoint{At: time.Duration(i) * hold, Rate: l}
	}
	s.Clients[ci].Arrivals.Schedule = sched
	s.Clients[ci].Arrivals.Rate = 0
	s.Triggers = nil
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
func (rp RunPlan) probeScenario(load, size float64) sim.Scenario {
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
		t = sim.Trigger{Kind: "load", Factor: 1, At: t.At, Duration: t.Duration}
	}
	s.Triggers = []sim.Trigger{t}
	s.Duration = t.At + t.Duration + seconds(ph.AfterS)
	return s
}

func clientBins(r sim.Result, name string) []sim.ClientBin {
	for _, c := range r.Clients {
		if c.Name == name {
			return c.Bins
		}
	}
	return nil
}

func serviceBins(r sim.Result, name string) []sim.ServiceBin {
	for _, v := range r.Services {
		if v.Name == name {
			return v.Bins
		}
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
