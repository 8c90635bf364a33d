package plan

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// Job is one unit of a plan's work: the ramp of a run, the phase search
// of a run at one load (Index: the load's), a runbook search of a run, or
// one run of the comparison (Index: its seed's, from 0). Jobs are numbered
// in plan order (see Plan.Jobs); shard I of N takes the jobs whose number
// is I − 1 modulo N.
type Job struct {
	Kind  JobKind
	Run   int // index into Plan.Runs
	Index int // the load's (JobColumn) or the seed's (JobCompare); else 0
}

// JobKind is what a Job computes.
type JobKind uint8

// The kinds of job, and the result each makes.
const (
	JobRamp     JobKind = iota // a Ramp
	JobColumn                  // a Column
	JobCapacity                // a CapacitySearch
	JobLatest                  // a LatestSearch
	JobCompare                 // a SeedRun
)

// Jobs lists the plan's jobs: every run's ramp and phase columns, then
// every run's runbook searches, then the comparison's runs (so that a
// plan without runbook questions numbers its jobs as before them).
func (p Plan) Jobs() []Job {
	var js []Job
	for r, rp := range p.Runs {
		if rp.Ramp != nil {
			js = append(js, Job{JobRamp, r, 0})
		}
		if rp.Phase != nil {
			for l := range rp.Phase.Loads {
				js = append(js, Job{JobColumn, r, l})
			}
		}
	}
	for r, rp := range p.Runs {
		if rp.AddCapacity != nil {
			js = append(js, Job{JobCapacity, r, 0})
		}
		if rp.Latest != nil {
			js = append(js, Job{JobLatest, r, 0})
		}
	}
	if p.Compare != nil {
		for r := range p.Runs {
			for k := range p.Compare.Seeds {
				js = append(js, Job{JobCompare, r, k})
			}
		}
	}
	return js
}

// ShardJobs lists the jobs of shard sh (the zero Shard: all of them), in
// plan order.
func (p Plan) ShardJobs(sh Shard) []Job {
	sh = sh.OrWhole()
	var mine []Job
	if sh.Count < 1 {
		return nil
	}
	for j, jb := range p.Jobs() {
		if j%sh.Count == sh.Index-1 {
			mine = append(mine, jb)
		}
	}
	return mine
}

// The simulations a plan's jobs make are scenarios derived from the run's
// own, which New keeps (it is not part of the JSON: a plan read back from
// a file has none, and HasScenario is false).

// HasScenario reports whether the run carries the scenario its
// simulations derive from, as New makes it; a plan decoded from JSON has
// none and cannot be run.
func (rp RunPlan) HasScenario() bool {
	return slices.ContainsFunc(rp.scenario.Clients, func(c scenario.Client) bool { return c.Name == rp.Client })
}

// withClient returns a copy of the run's scenario whose swept client
// shares nothing with the original, and the client's index.
func (rp RunPlan) withClient() (scenario.Scenario, int) {
	s := rp.scenario
	s.Clients = slices.Clone(s.Clients)
	i := slices.IndexFunc(s.Clients, func(c scenario.Client) bool { return c.Name == rp.Client })
	s.Clients[i].Arrivals.Schedule = nil
	return s, i
}

// Loads returns the loads of the ramp's steps, up then down.
func (r RampPlan) Loads() []float64 {
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

// RampScenario is the simulation of a run's ramp: its arrival rate steps
// through the loads, no triggers and no runbook actions (timed for the
// file's trigger, they would land anywhere on the ramp; autoscalers stay:
// they are part of the system).
func (rp RunPlan) RampScenario() scenario.Scenario {
	loads := rp.Ramp.Loads()
	hold := Seconds(rp.Ramp.HoldS)
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

// ProbeScenario is one simulation of a phase search: the run at load
// with the trigger of the given size.
func (rp RunPlan) ProbeScenario(load, size float64) scenario.Scenario {
	ph := rp.Phase
	s, ci := rp.withClient()
	s.Clients[ci].Arrivals.Rate = load
	t := ph.Trigger
	switch ph.Vary {
	case VaryFactor:
		t.Factor = size
	case VaryAdd:
		t.Add = Seconds(size)
	case VaryKeys:
		t.Keys = int(math.Round(size))
	default:
		t.Duration = Seconds(size)
	}
	if size == 0 && (ph.Vary == VaryKeys || ph.Vary == VaryFactor && t.Kind == "hang") {
		// Size 0 is no trigger, in the same window (a hang probability
		// of 0 is not one; a flush of 0 keys would flush them all): a
		// load spike of 1×, which changes nothing.
		t = scenario.Trigger{Kind: "load", Factor: 1, At: t.At, Duration: t.Duration}
	}
	s.Triggers = []scenario.Trigger{t}
	s.Duration = t.At + t.Duration + Seconds(ph.AfterS)
	return s
}

// CapacityScenario is a run with the capacity of its target set to
// factor at the time at (the run's own capacity actions on the target
// removed); a factor of 1 adds no action.
func (rp RunPlan) CapacityScenario(at time.Duration, factor float64) scenario.Scenario {
	s := rp.scenario
	var acts []scenario.Action
	for _, a := range s.Actions {
		if a.Kind != "capacity" || a.Target != rp.Target {
			acts = append(acts, a)
		}
	}
	if factor != 1 {
		acts = append(acts, scenario.Action{At: at, Kind: "capacity", Target: rp.Target, Value: factor,
			Label: fmt.Sprintf("capacity %s× (sweep)", FormatNumber(factor))})
	}
	s.Actions = acts
	return s
}

// SeedScenario is the k-th run of the comparison: the run with its seed
// + k.
func (rp RunPlan) SeedScenario(k int) scenario.Scenario {
	s := rp.scenario
	s.Seed = rp.Seed + uint64(k)
	return s
}

// Seconds turns the plan's seconds into a duration, rounded to the
// nanosecond.
func Seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
