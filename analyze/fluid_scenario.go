package analyze

import (
	"fmt"

	"github.com/stormguard/stormguard/sim"
)

// FluidParams reads the fluid model's parameters from a scenario: the
// named client and the service it calls. The service must be one the
// model describes: workers with a service time, a FIFO queue, no calls, no
// limiter, no tick capacity, no expired-drop and no stormguard defenses
// (which reorder the queue). The budget is read as in the checklist (see
// docs/analyze.md, "Budgets"); its initial burst is left out.
func FluidParams(s sim.Scenario, client string) (Params, error) {
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
	case v.SimOnly() != "":
		why = "it has " + v.SimOnly() + " (a model of the simulator only)"
	}
	if why != "" {
		return Params{}, fmt.Errorf("fluid: service %s is outside the model: %s", v.Name, why)
	}
	p := Params{
		Capacity:    float64(max(1, v.Workers)) / st.Seconds(),
		ServiceTime: st,
		Timeout:     e.timeout,
		RoundTrip:   2 * e.net,
		Attempts:    e.attempts(),
		QueueCap:    float64(v.Queue.Capacity),
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
