package analyze

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/scenario"
)

// edge is one caller → service edge of the call graph: a client's target
// or a service's call, with its policy after defaults.
type edge struct {
	name      string // "users→web"; a service's second call to the same service is "web→api (call 2)"
	caller    string // client or service name
	client    int    // index of the client, or -1 for a call
	from      int    // index of the calling service, or -1 for a client
	to        int    // index of the called service
	preset    string
	policy    retry.Policy // with retry defaults
	timeout   time.Duration
	deadline  time.Duration // clients only; 0: none
	propagate bool
	procs     int           // retriers (and so budgets) on this edge
	net       time.Duration // mean one-way latency
	budget    budgetRule
}

// attempts is the edge's attempt cap: the hedges of a hedged layer (gRFC
// A6: a hedged call sends up to hedge.max_attempts copies, which is its
// worst case whatever the answers), else max_attempts.
func (e *edge) attempts() int {
	if h := e.policy.Hedge; h != nil && h.MaxAttempts > 1 {
		return h.MaxAttempts
	}
	return e.policy.MaxAttempts
}

// retryChance is the probability that the edge retries a failed attempt
// that every other rule would retry: the policy's retry_probability, 1
// when unset. A hedged call sends its copies whatever it is (retry.Hedge).
func (e *edge) retryChance() float64 {
	if p := e.policy.RetryProbability; p != nil && !e.hedged() {
		return *p
	}
	return 1
}

// hedged reports whether the edge hedges (see attempts).
func (e *edge) hedged() bool { return e.policy.Hedge != nil && e.policy.Hedge.MaxAttempts > 1 }

// amplification is the edge's attempts per request when every attempt
// fails: each retry is made with the retry chance p, up to the attempt cap
// k, so 1 + p + … + p^(k−1) — k when p is 1, 1 when p is 0 (a 5 % chance
// with 2 attempts: 1.05). It is a mean over requests, which is what loads a
// service; the rare request may still make all k.
func (e *edge) amplification() float64 { return expectedAttempts(e.retryChance(), e.attempts()) }

// graph is a scenario prepared for the rules: defaults applied, edges
// built, services in call order.
type graph struct {
	sc       scenario.Scenario // as written
	def      scenario.Scenario // sc with its defaults: what the simulator runs
	svc      map[string]int
	edges    []edge
	in, out  [][]int         // per service: incoming and outgoing (call) edges
	clientEd []int           // per client: its edge
	order    []int           // services, callers before callees
	hold     []time.Duration // scenario.Figure's Hold
	capacity []float64       // attempts/s when every worker is busy; +Inf when unbounded
	peak     []float64       // attempts/s at its best: before a thrashing knee
	hit      []float64       // warm hit rate of the service's look-aside cache (0: none)
	cold     bool            // flow as if every cache were cold
	rates    []clientRate
}

// clientRate is a client's rate of new requests, when it has a steady one.
type clientRate struct {
	value float64 // requests/s
	known bool
	note  string // how it was read, when not simply the rate
}

// newGraph builds the call graph of a validated scenario, its edges with
// the scenario's defaults (scenario.Scenario.WithDefaults) applied.
func newGraph(s scenario.Scenario) (*graph, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	g := &graph{sc: s, def: s.WithDefaults(), svc: map[string]int{}}
	n := len(s.Services)
	for i, v := range s.Services {
		g.svc[v.Name] = i
	}
	g.in, g.out = make([][]int, n), make([][]int, n)
	for i, c := range g.def.Clients {
		e := edge{name: c.Name + "→" + c.Target, caller: c.Name, client: i, from: -1, to: g.svc[c.Target],
			timeout: c.Timeout, deadline: c.Deadline, propagate: c.PropagateDeadline,
			procs: c.Processes, net: mean(c.Network.Latency)}
		e.preset, e.policy = c.Policy.Preset, c.Policy.Policy.WithDefaults()
		g.add(e)
		g.clientEd = append(g.clientEd, len(g.edges)-1)
		g.rates = append(g.rates, rateOf(c.Arrivals))
	}
	for i, v := range g.def.Services {
		seen := map[string]int{}
		for _, c := range v.Calls {
			seen[c.Service]++
			name := v.Name + "→" + c.Service
			if seen[c.Service] > 1 {
				name += fmt.Sprintf(" (call %d)", seen[c.Service])
			}
			e := edge{name: name, caller: v.Name, client: -1, from: i, to: g.svc[c.Service],
				timeout: c.Timeout, propagate: c.PropagateDeadline,
				procs: 1, net: mean(c.Network.Latency)}
			e.preset, e.policy = c.Policy.Preset, c.Policy.Policy.WithDefaults()
			g.add(e)
		}
	}
	g.order = g.topo()
	g.capacities()
	return g, nil
}

func (g *graph) add(e edge) {
	e.budget = ruleFor(e.policy.Budget, e.procs, e.timeout)
	id := len(g.edges)
	g.edges = append(g.edges, e)
	g.in[e.to] = append(g.in[e.to], id)
	if e.from >= 0 {
		g.out[e.from] = append(g.out[e.from], id)
	}
}

// mean is a distribution's mean.
func mean(d scenario.Dist) time.Duration { return d.Average() }

// rateOf reads a client's steady rate of new requests: the rate, the peak
// of a schedule, or for a closed loop users ÷ think time (an upper bound,
// since users also wait for answers). A burst has none.
func rateOf(a scenario.Arrivals) clientRate {
	switch a.Kind {
	case "burst":
		return clientRate{note: "a burst has no steady rate"}
	case "closed":
		if t := mean(a.Think); t > 0 {
			return clientRate{value: float64(a.Users) / t.Seconds(), known: true, note: "closed loop: users ÷ think time, an upper bound"}
		}
		return clientRate{note: "a closed loop without think time has no rate known in advance"}
	}
	if len(a.Schedule) > 0 {
		peak := 0.0
		for _, p := range a.Schedule {
			peak = max(peak, p.Rate)
		}
		return clientRate{value: peak, known: true, note: "the peak of the schedule"}
	}
	return clientRate{value: a.Rate, known: true}
}

// topo orders the services so that every caller comes before its callees
// (the call graph is acyclic: the scenario validated).
func (g *graph) topo() []int {
	n := len(g.sc.Services)
	indeg := make([]int, n)
	for _, e := range g.edges {
		if e.from >= 0 {
			indeg[e.to]++
		}
	}
	var order, queue []int
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		order = append(order, i)
		for _, id := range g.out[i] {
			j := g.edges[id].to
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	return order
}

// capacities reads each service's holding time, capacity and peak from
// the scenario's capacity figures (scenario.Figures: the one formula sweep
// uses too) and the warm hit rate of its look-aside cache.
func (g *graph) capacities() {
	n := len(g.sc.Services)
	g.hold = make([]time.Duration, n)
	g.capacity = make([]float64, n)
	g.peak = make([]float64, n)
	g.hit = make([]float64, n)
	for i, f := range scenario.Figures(g.sc) {
		g.hold[i], g.capacity[i], g.peak[i] = f.Hold, f.Capacity, f.Peak
		if c := g.sc.Services[i].Cache; c != nil {
			g.hit[i] = c.WarmHitRate()
		}
	}
}

// flow is the attempts per second on every edge and at every service
// when the clients send rates[c] new requests per second and each edge
// turns x requests per second into att(e, x) attempts per second.
type flow struct {
	edge    []float64 // attempts/s on each edge
	request []float64 // requests/s on each edge
	service []float64 // attempts/s arriving at each service
}

func (g *graph) flow(rates []float64, att func(e *edge, x float64) float64) flow {
	f := flow{edge: make([]float64, len(g.edges)), request: make([]float64, len(g.edges)),
		service: make([]float64, len(g.sc.Services))}
	// A look-aside cache answers its hits before the caller's retrier sees
	// them: only misses become attempts.
	miss := func(to int, x float64) float64 {
		if g.cold {
			return x
		}
		return x * (1 - g.hit[to])
	}
	for c, id := range g.clientEd {
		f.request[id] = rates[c]
		f.edge[id] = att(&g.edges[id], miss(g.edges[id].to, rates[c]))
		f.service[g.edges[id].to] += f.edge[id]
	}
	for _, i := range g.order {
		for _, id := range g.out[i] {
			f.request[id] = f.service[i]
			f.edge[id] = att(&g.edges[id], miss(g.edges[id].to, f.service[i]))
			f.service[g.edges[id].to] += f.edge[id]
		}
	}
	return f
}

// The attempt models of an edge: first tries only, every attempt failing
// without a budget, and every attempt failing within the budget.
func firstTries(_ *edge, x float64) float64 { return x }
func worstCase(e *edge, x float64) float64  { return e.amplification() * x }
func budgeted(e *edge, x float64) float64   { return e.budget.attempts(e.amplification(), x) }

// configured returns the clients' steady rates (0 when unknown).
func (g *graph) configured() []float64 {
	r := make([]float64, len(g.rates))
	for i, c := range g.rates {
		if c.known {
			r[i] = c.value
		}
	}
	return r
}

// threshold returns the rate of client c at which the attempts arriving at
// service s reach its capacity under the attempt model att, the other
// clients at rates. It returns 0 when the others alone reach it, and
// ok = false when client c cannot reach s or s has no bound.
func (g *graph) threshold(c, s int, rates []float64, att func(*edge, float64) float64) (float64, bool) {
	capacity := g.capacity[s]
	if math.IsInf(capacity, 1) {
		return 0, false
	}
	r := append([]float64(nil), rates...)
	load := func(x float64) float64 {
		r[c] = x
		return g.flow(r, att).service[s]
	}
	if load(1) == load(0) {
		return 0, false
	}
	if load(0) >= capacity {
		return 0, true
	}
	// Every attempt model sends at least one attempt per request, so the
	// load reaches the capacity at a rate of at most the capacity. The load
	// is piecewise linear in x (a minimum of linear pieces per edge):
	// bisect, then interpolate within the last bracket, where it is linear.
	lo, hi := 0.0, capacity
	for range 100 {
		m := (lo + hi) / 2
		if load(m) < capacity {
			lo = m
		} else {
			hi = m
		}
		if hi-lo <= 1e-9*hi {
			break
		}
	}
	if a, b := load(lo), load(hi); b > a {
		return lo + (capacity-a)*(hi-lo)/(b-a), true
	}
	return (lo + hi) / 2, true
}
