package sweep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep/plan"
)

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

// order is a job's place when jobs start: the longest first (ramps, the
// runbook searches, the phase columns from the highest load), single runs
// last. It changes only the wall time.
func order(j plan.Job) (int, int) {
	switch j.Kind {
	case plan.JobRamp:
		return 0, 0
	case plan.JobCapacity, plan.JobLatest:
		return 1, 0
	case plan.JobColumn:
		return 2, -j.Index
	}
	return 3, 0
}

// Run carries out the whole plan and returns its result.
func Run(ctx context.Context, p Plan, e Exec) (Result, error) {
	if e.Shard.OrWhole() != (Shard{Index: 1, Count: 1}) {
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
	sh := e.Shard.OrWhole()
	if err := sh.Validate(); err != nil {
		return Partial{}, err
	}
	part := Partial{Format: PartialFormat, Shard: sh, Plan: p}
	for _, rp := range p.Runs {
		if !rp.HasScenario() {
			return part, fmt.Errorf("run %s has no scenario to simulate: make plans with NewPlan", rp.Name)
		}
	}
	if err := check(p, e); err != nil {
		return part, err
	}
	mine := p.ShardJobs(sh)
	// Longest first (see order); the workers take indexes into mine.
	start := make([]int, len(mine))
	for i := range start {
		start[i] = i
	}
	slices.SortStableFunc(start, func(a, b int) int {
		a1, a2 := order(mine[a])
		b1, b2 := order(mine[b])
		return cmp.Or(cmp.Compare(a1, b1), cmp.Compare(a2, b2))
	})
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var mu sync.Mutex // guards prog, the calls of e.Progress, and errs
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

	got := make([]jobResult, len(mine)) // each written by one worker
	var errs []error
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(len(start), 1)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue
				}
				jb := mine[i]
				rp := p.Runs[jb.Run]
				var err error
				got[i], err = run(jb, rp, simulate, judge)
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
	for _, i := range start {
		next <- i
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
	for i, jb := range mine {
		g := got[i]
		switch jb.Kind {
		case plan.JobRamp:
			part.Ramps = append(part.Ramps, RampPart{Run: jb.Run, Ramp: g.ramp})
		case plan.JobColumn:
			part.Columns = append(part.Columns, ColumnPart{Run: jb.Run, Load: jb.Index, Column: g.col})
		case plan.JobCapacity:
			part.Capacities = append(part.Capacities, CapacityPart{Run: jb.Run, Search: g.capacity})
		case plan.JobLatest:
			part.Latests = append(part.Latests, LatestPart{Run: jb.Run, Search: g.latest})
		case plan.JobCompare:
			part.Compares = append(part.Compares, ComparePart{Run: jb.Run, Seed: jb.Index, Outcome: g.seed})
		}
	}
	return part, nil
}

// jobResult is what one job found: the field of its kind.
type jobResult struct {
	ramp     Ramp
	col      Column
	capacity CapacitySearch
	latest   LatestSearch
	seed     SeedRun
}

// run carries out the job jb of run rp: the ramp and the comparison's
// runs with simulate, which runs to the end (their series and times
// matter), the searches with judge, which may stop a run once its verdict
// is settled.
func run(jb plan.Job, rp RunPlan, simulate, judge simulateFunc) (jobResult, error) {
	var g jobResult
	var err error
	switch jb.Kind {
	case plan.JobRamp:
		g.ramp, err = runRamp(rp, simulate)
	case plan.JobColumn:
		g.col, err = runColumn(rp, rp.Phase.Loads[jb.Index], judge)
	case plan.JobCapacity:
		g.capacity, err = runCapacity(rp, judge)
	case plan.JobLatest:
		g.latest, err = runLatest(rp, judge)
	case plan.JobCompare:
		g.seed, err = runCompareSeed(rp, jb.Index, simulate)
	}
	return g, err
}

// simulateFunc runs one scenario.
type simulateFunc func(s scenario.Scenario, name string) (result.Result, error)

// runRamp runs the quasi-static ramp of a run: one simulation (see
// RunPlan.RampScenario).
func runRamp(rp RunPlan, simulate simulateFunc) (Ramp, error) {
	r := Ramp{RampPlan: *rp.Ramp}
	loads := r.Loads()
	res, err := simulate(rp.RampScenario(), rp.Name+"/ramp")
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
		name := fmt.Sprintf("%s/load=%s/%s=%s", rp.Name, plan.FormatNumber(load), ph.Vary, plan.FormatNumber(size))
		res, err := simulate(rp.ProbeScenario(load, size), name)
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
