// Package analyze does the arithmetic of the retry-storm checklist on a
// scenario, and models a service under retries as a fluid.
//
// [Scenario] reads a system described in the simulator's vocabulary
// ([scenario.Scenario]: clients, services, calls, policies) and computes, for
// every dependency path, the worst-case amplification (the product of the
// attempts of every layer, and the figure the retry budgets allow), the load
// at which every service becomes vulnerable (capacity ÷ amplification), and
// [Finding]s for the checklist's rules ([Rules]): layers that retry the same
// dependency, retries of errors that cannot succeed, missing jitter, missing
// budgets, timeouts longer than the caller waits. [File] does it for every
// run of a scenario file.
//
// The fluid model ([Params], [Equilibria], [StaticThresholds], [Ramp])
// integrates offered load, queue and goodput of one service in
// milliseconds and finds where it collapses and where it recovers.
//
// docs/analyze.md states every rule and equation.
package analyze

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// Severity ranks a finding. Error findings make `stormguard analyze` exit
// with status 1.
type Severity uint8

// The severities, by increasing weight.
const (
	Info Severity = iota
	Warning
	Error
)

var severityNames = [...]string{"info", "warning", "error"}

// String returns "info", "warning" or "error".
func (s Severity) String() string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("analyze.Severity(%d)", uint8(s))
}

// MarshalText implements encoding.TextMarshaler.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Severity) UnmarshalText(b []byte) error {
	for i, n := range severityNames {
		if string(b) == n {
			*s = Severity(i)
			return nil
		}
	}
	return fmt.Errorf("analyze: unknown severity %q (want info, warning or error)", b)
}

// Finding is one broken (or noted) rule of the checklist.
type Finding struct {
	// Rule is the rule's id, one of [Rules].
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Where names the path ("users → web → api"), call edge ("web→api") or
	// service the finding is about.
	Where string `json:"where"`
	// Message states what is wrong, with its numbers.
	Message string `json:"message"`
	// Fix says in one sentence what to change.
	Fix string `json:"fix"`
	// Numbers holds the figures behind the message, by name.
	Numbers map[string]float64 `json:"numbers,omitempty"`
}

// Hop is one edge of a dependency path: a caller's calls to a service.
type Hop struct {
	// Edge names it: "CALLER→SERVICE".
	Edge    string `json:"edge"`
	Caller  string `json:"caller"`
	Service string `json:"service"`
	// Preset is the policy's preset, if it names one.
	Preset   string `json:"preset,omitempty"`
	Attempts int    `json:"max_attempts"`
	// RetryChance: the policy's retry_probability, the chance that a
	// failed attempt is retried; nil when every one is (unset, or hedged).
	RetryChance *float64 `json:"retry_probability,omitempty"`
	// Worst: attempts per request on this edge when every attempt fails,
	// without budgets: Attempts, or with a retry chance p,
	// 1 + p + … + p^(Attempts−1).
	Worst float64 `json:"worst_case"`
	// Budget in a few words ("none", "token bucket 10 %") and the rule
	// that turns it into a ratio (see docs/analyze.md).
	Budget     string `json:"budget"`
	BudgetRule string `json:"budget_rule"`
	// Budgeted: attempts per request on this edge when every attempt
	// fails, within the budget, at the configured rates.
	Budgeted float64 `json:"budgeted_attempts"`
	// Expected: attempts per request at the services' configured error
	// rates, within the budget.
	Expected float64 `json:"expected_attempts"`
	// Timeout of one attempt.
	Timeout time.Duration `json:"timeout_ns"`

	bounded bool // a budget bounds the retries
}

// attemptsText writes the hop's attempt cap, with its retry chance when it
// has one: "2", "2 at 5 %".
func (h Hop) attemptsText() string {
	if h.RetryChance != nil {
		return fmt.Sprintf("%d at %s", h.Attempts, pct(*h.RetryChance))
	}
	return fmt.Sprint(h.Attempts)
}

// Path is a dependency path: from a client, through the call graph, to a
// service. Its figures are attempts at the last service per request of the
// client.
type Path struct {
	Client   string   `json:"client"`
	Services []string `json:"services"`
	Hops     []Hop    `json:"hops"`
	// Worst: the product of the hops' Worst figures (their max attempts,
	// less with a retry chance).
	Worst float64 `json:"worst_case"`
	// Budgeted: the product of the hops' Budgeted figures.
	Budgeted float64 `json:"budgeted"`
	// Expected: the product of the hops' Expected figures.
	Expected float64 `json:"expected"`
}

// String writes the path as "client → service → …".
func (p Path) String() string {
	s := p.Client
	for _, v := range p.Services {
		s += " → " + v
	}
	return s
}

// Exposure is what one client does to one service.
type Exposure struct {
	Client string `json:"client"`
	// Rate: the client's new requests per second (the peak of a
	// schedule); RateKnown is false for a burst or a closed loop without
	// think time, and RateNote says how the rate was read.
	Rate      float64 `json:"rate_per_s"`
	RateKnown bool    `json:"rate_known"`
	RateNote  string  `json:"rate_note,omitempty"`
	// Worst: attempts at the service per request of the client when every
	// attempt fails, without budgets, summed over the paths.
	Worst float64 `json:"worst_case"`
	// Budgeted: the same within the budgets, at the configured rates.
	Budgeted float64 `json:"budgeted"`
	// Effective: the attempts per request that compete with first tries
	// for the service's capacity: Budgeted, except that a service that
	// serves first tries first (ServiceFigure.FirstTriesFirst) makes its
	// own callers' retries wait, so they do not count.
	Effective float64 `json:"effective"`
	// VulnerableAbove: the client's rate above which the service's
	// worst-case load (budgets included; Effective) exceeds its capacity,
	// the other clients at their rates; VulnerableAboveWithoutBudgets
	// ignores the budgets. Both are 0 when the service has no bounded
	// capacity.
	VulnerableAbove               float64 `json:"vulnerable_above_per_s"`
	VulnerableAboveWithoutBudgets float64 `json:"vulnerable_above_without_budgets_per_s"`
}

// ServiceFigure is one service's capacity and load.
type ServiceFigure struct {
	Name string `json:"name"`
	// Bounded is false when nothing bounds the capacity (no service time
	// and no calls); Capacity is then 0.
	Bounded bool `json:"bounded"`
	// Capacity: attempts per second, workers ÷ Hold (or per_tick ÷ tick),
	// times the replicas, with every worker busy (past a thrashing knee:
	// at the fallen speed; see docs/analyze.md for the capacity laws):
	// scenario.Figure's, the figure sweep takes too.
	Capacity float64 `json:"capacity_per_s"`
	// PeakCapacity: the capacity below a thrashing knee, when it is higher.
	PeakCapacity float64 `json:"peak_capacity_per_s,omitempty"`
	// CacheHitRate: the warm hit rate of its look-aside cache (0: none).
	// Its loads count only the misses.
	CacheHitRate float64 `json:"cache_hit_rate,omitempty"`
	// FirstTriesFirst: the service's queue serves first tries before
	// retries (queue discipline first-tries-first or
	// first-tries-adaptive-lifo, which defenses: stormguard sets).
	FirstTriesFirst bool `json:"first_tries_first"`
	// Hold: how long a request holds a worker when every call answers at
	// the first attempt: the service time plus each call's round trip and
	// the callee's own Hold.
	Hold time.Duration `json:"hold_ns"`
	// Loads at the configured rates, attempts per second: first tries
	// only; every attempt failing without budgets; and within budgets.
	FirstTries float64 `json:"first_tries_per_s"`
	Worst      float64 `json:"worst_case_per_s"`
	Budgeted   float64 `json:"budgeted_per_s"`
	// ErrorRate: the probability that an attempt fails at the configured
	// error rates (its own and those of calls it cannot do without).
	ErrorRate float64    `json:"error_rate"`
	Clients   []Exposure `json:"clients"`
	// Fluid: the fluid model's thresholds, for a service without calls
	// that one client calls (see [FluidParams]).
	Fluid *FluidFigure `json:"fluid,omitempty"`
}

// FluidFigure is the fluid model of a service and its one client.
type FluidFigure struct {
	Client     string     `json:"client"`
	Params     Params     `json:"params"`
	Thresholds Thresholds `json:"thresholds"`
	// Region of the client's configured rate; nil when it has no steady
	// rate.
	Region *Region `json:"region,omitempty"`
}

// Analysis is the checklist computed for one scenario.
type Analysis struct {
	// Run: the run's name; Changes: what it changes in the base scenario.
	Run     string   `json:"run"`
	Changes []string `json:"changes,omitempty"`
	// Paths: every dependency path, from each client, callers first (at
	// most MaxPaths; PathsTruncated says when more were left out).
	Paths          []Path `json:"paths"`
	PathsTruncated bool   `json:"paths_truncated,omitempty"`
	// Services in the order of the scenario.
	Services []ServiceFigure `json:"services"`
	// Findings: errors first, then warnings, then notes.
	Findings []Finding `json:"findings"`
}

// Count returns the number of findings of severity s.
func (a Analysis) Count(s Severity) int {
	n := 0
	for _, f := range a.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// MaxPaths bounds the paths an Analysis lists.
const MaxPaths = 1000

// Scenario analyses one scenario (a run of a file, or one built in code).
// It applies the simulator's defaults first. The error is the scenario's
// validation error.
func Scenario(s scenario.Scenario) (Analysis, error) {
	g, err := newGraph(s)
	if err != nil {
		return Analysis{}, err
	}
	a := Analysis{Run: s.Name}
	hops := g.hops()
	a.Paths, a.PathsTruncated = g.paths(hops)
	a.Services = g.services()
	a.Findings = g.findings(a.Paths, a.Services)
	return a, nil
}

// hops computes every edge's figures at the configured rates.
func (g *graph) hops() []Hop {
	rates := g.configured()
	fb := g.flow(rates, budgeted)
	fail := g.errorRates()
	out := make([]Hop, len(g.edges))
	for id := range g.edges {
		e := &g.edges[id]
		k := e.attempts()
		w := e.amplification()
		b := w
		if x := fb.request[id]; x > 0 {
			b = fb.edge[id] / x
		} else if e.budget.has {
			b = min(b, 1+e.budget.ratio)
		}
		out[id] = Hop{Edge: e.name, Caller: e.caller, Service: g.sc.Services[e.to].Name, Preset: e.preset,
			Attempts: k, Worst: w, Budget: e.budget.short, BudgetRule: e.budget.text, Budgeted: b,
			Expected: min(b, expectedAttempts(e.retryChance()*fail[e.to], k)), Timeout: e.timeout, bounded: e.budget.has}
		if p := e.retryChance(); p < 1 {
			out[id].RetryChance = &p
		}
	}
	return out
}

// expectedAttempts is the mean number of attempts of a request whose
// attempts lead to a retry independently with probability q (an attempt
// fails, or fails and the retry chance says yes), at most k:
// 1 + q + … + q^(k−1) = (1 − q^k) / (1 − q).
func expectedAttempts(q float64, k int) float64 {
	sum, term := 0.0, 1.0
	for range k {
		sum += term
		term *= q
	}
	return sum
}

// failsAll is the probability that a request fails when each attempt fails
// with probability q, a failed attempt is retried with probability p, and
// at most k attempts are made: F₁ = q, F_j = q × (1 − p + p × F_(j−1)); q^k
// when p is 1.
func failsAll(q, p float64, k int) float64 {
	f := q
	for range k - 1 {
		f = q * (1 - p + p*f)
	}
	return f
}

// errorRates returns, callees first, the probability that an attempt at
// each service fails at the configured error rates: it fails by its own
// error rate, or because a call it cannot do without (on_call_failure:
// fail) failed every attempt.
func (g *graph) errorRates() []float64 {
	q := make([]float64, len(g.sc.Services))
	for k := len(g.order) - 1; k >= 0; k-- {
		i := g.order[k]
		v := g.sc.Services[i]
		ok := 1 - v.ErrorRate
		if v.OnCallFailure != "fallback" {
			for _, id := range g.out[i] {
				e := g.edges[id]
				ok *= 1 - failsAll(q[e.to], e.retryChance(), e.attempts())
			}
		}
		q[i] = 1 - ok
	}
	return q
}

// paths lists the dependency paths from every client, depth first.
func (g *graph) paths(hops []Hop) ([]Path, bool) {
	var out []Path
	truncated := false
	var walk func(client string, ids []int)
	walk = func(client string, ids []int) {
		if len(out) >= MaxPaths {
			truncated = true
			return
		}
		p := Path{Client: client, Worst: 1, Budgeted: 1, Expected: 1}
		for _, id := range ids {
			h := hops[id]
			p.Hops = append(p.Hops, h)
			p.Services = append(p.Services, h.Service)
			p.Worst *= h.Worst
			p.Budgeted *= h.Budgeted
			p.Expected *= h.Expected
		}
		out = append(out, p)
		last := g.edges[ids[len(ids)-1]].to
		for _, id := range g.out[last] {
			walk(client, append(slices.Clip(ids), id))
		}
	}
	for c, id := range g.clientEd {
		walk(g.sc.Clients[c].Name, []int{id})
	}
	return out, truncated
}

// services computes every service's capacity, loads and exposures.
func (g *graph) services() []ServiceFigure {
	rates := g.configured()
	first := g.flow(rates, firstTries)
	worst := g.flow(rates, worstCase)
	budg := g.flow(rates, budgeted)
	fail := g.errorRates()
	out := make([]ServiceFigure, len(g.sc.Services))
	for i, v := range g.sc.Services {
		sf := ServiceFigure{Name: v.Name, Hold: g.hold[i], FirstTries: first.service[i], Worst: worst.service[i],
			Budgeted: budg.service[i], ErrorRate: fail[i]}
		if c := g.capacity[i]; !math.IsInf(c, 1) {
			sf.Bounded, sf.Capacity = true, c
			if p := g.peak[i]; p > c*(1+1e-9) {
				sf.PeakCapacity = p
			}
		}
		sf.CacheHitRate = g.hit[i]
		sf.FirstTriesFirst = firstTriesFirst(g.def.Services[i])
		// The attempt models for the vulnerable load: a service that serves
		// first tries first counts only first tries on its incoming edges.
		effective := func(att func(*edge, float64) float64) func(*edge, float64) float64 {
			if !sf.FirstTriesFirst {
				return att
			}
			return func(e *edge, x float64) float64 {
				if e.to == i {
					return x
				}
				return att(e, x)
			}
		}
		eff := g.flow(rates, effective(budgeted))
		for c := range g.sc.Clients {
			unit := make([]float64, len(rates))
			unit[c] = 1
			w := g.flow(unit, worstCase).service[i]
			if w == 0 {
				continue // c does not reach i
			}
			r := g.rates[c]
			x := Exposure{Client: g.sc.Clients[c].Name, Rate: r.value, RateKnown: r.known, RateNote: r.note, Worst: w}
			if r.known && r.value > 0 {
				without := append([]float64(nil), rates...)
				without[c] = 0
				x.Budgeted = (budg.service[i] - g.flow(without, budgeted).service[i]) / r.value
				x.Effective = (eff.service[i] - g.flow(without, effective(budgeted)).service[i]) / r.value
			} else {
				x.Budgeted = g.flow(unit, ratioOnly).service[i]
				x.Effective = g.flow(unit, effective(ratioOnly)).service[i]
			}
			x.VulnerableAbove, _ = g.threshold(c, i, rates, effective(budgeted))
			x.VulnerableAboveWithoutBudgets, _ = g.threshold(c, i, rates, effective(worstCase))
			sf.Clients = append(sf.Clients, x)
		}
		sf.Fluid = g.fluid(i)
		out[i] = sf
	}
	return out
}

// firstTriesFirst reports whether the service's queue serves first tries
// before retries; v has its defaults (defenses: stormguard sets the
// discipline).
func firstTriesFirst(v scenario.Service) bool {
	d := v.Queue.Discipline
	return v.Capacity == nil && (d == "first-tries-first" || d == "first-tries-adaptive-lifo")
}

// ratioOnly is the budgeted attempt model without the floors, for clients
// whose rate is unknown.
func ratioOnly(e *edge, x float64) float64 {
	k := e.amplification()
	if !e.budget.has {
		return k * x
	}
	return min(k, 1+e.budget.ratio) * x
}

// fluid returns the fluid model of service i when it has no calls and one
// caller, a client (see FluidParams).
func (g *graph) fluid(i int) *FluidFigure {
	if len(g.in[i]) != 1 || g.edges[g.in[i][0]].client < 0 {
		return nil
	}
	e := g.edges[g.in[i][0]]
	p, err := g.fluidParams(e.client)
	if err != nil {
		return nil
	}
	th, err := StaticThresholds(p)
	if err != nil {
		return nil
	}
	ff := &FluidFigure{Client: g.sc.Clients[e.client].Name, Params: p, Thresholds: th}
	if r := g.rates[e.client]; r.known {
		region := th.Classify(r.value)
		ff.Region = &region
	}
	return ff
}

// File analyses every run of a scenario file, and the base scenario when
// no run is the base unchanged (and it is valid on its own).
func File(f scenario.File) (Report, error) {
	r := Report{File: f.Path, Scenario: f.Base.Name, Description: f.Base.Description}
	base := true
	for _, run := range f.Runs {
		if len(run.Changes) == 0 {
			base = false
		}
	}
	if base && f.Base.Validate() == nil {
		a, err := Scenario(f.Base)
		if err != nil {
			return Report{}, err
		}
		a.Run = "(base)"
		r.Analyses = append(r.Analyses, a)
	}
	for _, run := range f.Runs {
		a, err := Scenario(run.Scenario)
		if err != nil {
			return Report{}, fmt.Errorf("run %s: %w", run.Name, err)
		}
		a.Run, a.Changes = run.Name, run.Changes
		r.Analyses = append(r.Analyses, a)
	}
	for _, a := range r.Analyses {
		r.Errors += a.Count(Error)
		r.Warnings += a.Count(Warning)
		r.Notes += a.Count(Info)
	}
	return r, nil
}

// Report is the checklist for every run of a scenario file.
type Report struct {
	File        string     `json:"file"`
	Scenario    string     `json:"scenario"`
	Description string     `json:"description,omitempty"`
	Analyses    []Analysis `json:"analyses"`
	// Errors, Warnings and Notes count the findings of each severity
	// over all analyses.
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Notes    int `json:"notes"`
}
