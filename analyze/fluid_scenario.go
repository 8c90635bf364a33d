package analyze

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// FluidParams reads the fluid model's parameters from a scenario: the
// named client and the service it calls. The service must be one the
// model describes: workers with a service time, a FIFO queue, no calls, no
// limiter, no tick capacity, no expired-drop and no stormguard defenses
// (which reorder the queue). Of the simulator's mechanisms it folds in
// replicas (not their crashes), a cache with a fixed hit rate, the
// capacity laws and the cost of refusals; it refuses crashes, hangs, a
// keyed cache and error answers that cost work (see docs/analyze.md,
// "Mechanisms in the fluid model"). The budget is read as in the checklist
// (see docs/analyze.md, "Budgets"); its initial burst is left out.
func FluidParams(s scenario.Scenario, client string) (Params, error) {
	g, err := newGraph(s)
	if err != nil {
		return Params{}, err
	}
	for c, cl := range s.Clients {
		if cl.Name == client {
			return g.fluidParams(c)
		}
	}
	return Params{}, fmt.Errorf("fluid: scenario %s has no client %q", s.Name, client)
}

func (g *graph) fluidParams(c int) (Params, error) {
	e := g.edges[g.clientEd[c]]
	v := g.sc.Services[e.to]
	st := mean(v.ServiceTime)
	why := ""
	switch {
	case len(v.Calls) > 0:
		why = "it makes calls"
	case v.Capacity != nil:
		why = "it has a tick capacity"
	case v.Limiter != nil:
		why = "it has a concurrency limiter"
	case v.Defenses == "stormguard" || v.ExpiredDrop:
		why = "it drops expired work"
	case v.Queue.Discipline != "" && v.Queue.Discipline != "fifo":
		why = "its queue is not FIFO"
	case st <= 0:
		why = "it has no service time"
	default:
		why = outsideFluid(v, e.timeout, st)
	}
	if why != "" {
		return Params{}, fmt.Errorf("fluid: service %s is outside the model: %s", v.Name, why)
	}
	reps := max(1, v.Replicas)
	p := Params{
		Capacity:    float64(max(1, v.Workers)*reps) / st.Seconds(),
		ServiceTime: st,
		Timeout:     e.timeout,
		RoundTrip:   2 * e.net,
		Attempts:    e.attempts(),
		QueueCap:    float64(v.Queue.Capacity * reps),
		RefuseCost:  v.FailureCost.Refuse,
		ErrorRate:   v.ErrorRate,
	}
	if reps > 1 {
		p.Replicas = reps
	}
	if c := v.Cache; c != nil {
		p.HitRate = c.HitRate
	}
	if l := v.Law; l != nil && !trivialLaw(l, max(1, v.Workers)) {
		p.Law, p.Workers, p.Capacity = l, max(1, v.Workers), 0
		p.Capacity = p.withDefaults().Capacity
	}
	if r := e.retryChance(); r < 1 {
		p.RetryProbability = &r
	}
	if e.deadline > 0 && e.deadline < p.Timeout {
		p.Timeout = e.deadline
	}
	if e.budget.has {
		p.Budget = &FluidBudget{Ratio: e.budget.ratio, Floor: e.budget.floor}
	}
	if v.Slowdown.Factor > 0 && v.Slowdown.Queue > 0 {
		p.SlowdownQueue, p.SlowdownFactor = float64(v.Slowdown.Queue), v.Slowdown.Factor
	}
	return p, p.withDefaults().Validate()
}

// outsideFluid names what puts service v, called with the given timeout,
// outside the fluid model, or "".
func outsideFluid(v scenario.Service, timeout, st time.Duration) string {
	switch {
	case v.Crash != nil:
		return "its replicas crash (crash): a crash empties a replica's queue and sends its share to the others until it restarts, a state the fluid model does not follow"
	case v.Hang != nil:
		return "its attempts hang (hang): a hung attempt holds a worker, doing nothing, until its deadline or release, which the fluid model's capacity leaves out"
	case v.Cache != nil && v.Cache.Keys > 0:
		return "its cache has keys: its hit rate depends on which refills succeed in time, a second state the fluid model does not follow (a cache with a fixed hit_rate fits)"
	case v.Cache != nil && mean(v.Cache.Latency) >= timeout:
		return "its cache answers no sooner than the timeout"
	case v.FailureCost.Error > 0 && v.ErrorRate > 0:
		return "its error answers cost work (failure_cost.error), which the fluid model's capacity leaves out"
	case v.FailureCost.Refuse >= st:
		return fmt.Sprintf("a refusal costs %v, no less than serving an attempt (%v): the fluid model needs refusals cheaper than service", v.FailureCost.Refuse, st)
	}
	return ""
}

// trivialLaw reports whether a capacity law makes no difference to a
// replica of w workers: fixed without a knee or curve, processor sharing
// with a core for every worker, or a knee no attempt reaches.
func trivialLaw(l *scenario.CapacityLaw, w int) bool {
	flat := len(l.Curve) == 0 && (l.Knee == 0 || l.Knee >= w)
	switch l.Kind {
	case "", "fixed":
		return flat
	case "processor-sharing":
		cores := l.Cores
		if cores == 0 {
			cores = 1
		}
		return flat && cores >= float64(w)
	case "linear":
		return flat && l.PerRequest == 0
	}
	return false
}
