package sweep

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sweep/plan"
)

// probesAtMost bounds the simulations of one phase search over a grid of n
// sizes: the bisection for the smallest trigger that tips the system (2 +
// ⌈log₂ n⌉ runs) and the one for the smallest that disturbs it, which
// reuses the first one's runs (at most ⌈log₂ n⌉ + 1 more).
func probesAtMost(n int) int {
	l := int(math.Ceil(math.Log2(float64(max(n, 1)))))
	return 2*l + 3
}

// bisectAtMost bounds the simulations of one Bisect over a grid of n
// steps: the top, the bottom, then ⌈log₂ n⌉ halvings.
func bisectAtMost(n int) int {
	return 2 + int(math.Ceil(math.Log2(float64(max(n, 1)))))
}

// Estimate returns what carrying out the jobs of e.Shard of p would cost
// (see sim.Cost): the events of every simulation, and the memory of the
// e.Workers simulations that run at once. A phase search counts its
// largest trigger for every run, and the most runs a bisection takes; a
// runbook search the most runs its bisection takes, each with the largest
// capacity factor (or the earliest time); the comparison one run per run
// and seed.
// The drivers name the run, the part of the sweep and the option that
// sets it, then what drives the simulation's own estimate.
func Estimate(p Plan, e Exec) sim.Cost {
	sh := e.Shard.OrWhole()
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var c sim.Cost
	topEvents, topMemory := -1.0, -1.0
	jobs := 0
	for _, jb := range p.ShardJobs(sh) {
		jobs++
		rp := p.Runs[jb.Run]
		var one sim.Cost
		var sims int
		var what string
		switch jb.Kind {
		case plan.JobRamp:
			r := rp.Ramp
			one, sims = sim.Estimate(rp.RampScenario()), 1
			what = fmt.Sprintf("run %s's ramp, %d steps of %s up to %s/s (--ramp, --hold)",
				rp.Name, len(r.Loads()), plan.FormatDuration(plan.Seconds(r.HoldS)), brief(r.To))
		case plan.JobColumn:
			ph := rp.Phase
			load := ph.Loads[jb.Index]
			one, sims = sim.Estimate(rp.ProbeScenario(load, ph.Max)), probesAtMost(ph.Sizes())
			what = fmt.Sprintf("run %s's phase search at %s/s (--loads), up to %d simulations", rp.Name, brief(load), sims)
		case plan.JobCapacity:
			c := rp.AddCapacity
			one, sims = sim.Estimate(rp.CapacityScenario(plan.Seconds(c.AtS), c.Max)), bisectAtMost(c.Sizes())
			what = fmt.Sprintf("run %s's capacity search at %s (--capacity-at), up to %d simulations", rp.Name, plan.FormatDuration(plan.Seconds(c.AtS)), sims)
		case plan.JobLatest:
			l := rp.Latest
			one, sims = sim.Estimate(rp.CapacityScenario(plan.Seconds(l.FromS), l.Factor)), bisectAtMost(l.Sizes())
			what = fmt.Sprintf("run %s's latest-time search for %s× (--capacity-latest), up to %d simulations", rp.Name, plan.FormatNumber(l.Factor), sims)
		case plan.JobCompare:
			s := rp.SeedScenario(jb.Index)
			one, sims = sim.Estimate(s), 1
			what = fmt.Sprintf("run %s with seed %d (--compare-seeds)", rp.Name, s.Seed)
		}
		ev := one.Events * float64(sims)
		c.Events += ev
		if ev > topEvents || math.IsNaN(ev) {
			topEvents, c.EventsDriver = ev, what+": "+one.EventsDriver
		}
		if one.Memory > topMemory || math.IsNaN(one.Memory) {
			topMemory, c.MemoryDriver = one.Memory, what+": "+one.MemoryDriver
		}
	}
	at := min(workers, jobs)
	c.Memory = float64(at) * max(topMemory, 0)
	if at > 1 {
		c.MemoryDriver += fmt.Sprintf("; %d simulations at once (--workers)", at)
	}
	return c
}

// brief writes a number briefly: 0.5, 280, 3.6e9.
func brief(x float64) string {
	if math.Abs(x) < 1e6 {
		return plan.FormatNumber(x)
	}
	s := strconv.FormatFloat(x, 'g', 2, 64)
	return strings.NewReplacer("e+0", "e", "e+", "e").Replace(s)
}

// check refuses the jobs of e.Shard of p if they exceed e.Limits.
func check(p Plan, e Exec) error {
	err := e.Limits.Check(Estimate(p, e))
	if le, ok := err.(*sim.LimitError); ok {
		le.Subject = "the sweep"
		if sh := e.Shard.OrWhole(); sh.Count > 1 {
			le.Subject = fmt.Sprintf("shard %v of the sweep", sh)
		}
	}
	return err
}
