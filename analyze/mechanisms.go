package analyze

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/autoscale"
)

// The rules about the simulator's sustaining mechanisms: a cache that hides
// load, capacity that falls past a knee, failures that cost work, hangs
// that hold workers, and replicas that crash before they shed.

// mechanismFindings checks the mechanism rules for every service.
func (g *graph) mechanismFindings(services []ServiceFigure) []Finding {
	var out []Finding
	rates := g.configured()
	g.cold = true
	coldFirst := g.flow(rates, firstTries)
	coldWorst := g.flow(rates, worstCase)
	g.cold = false
	for i, sf := range services {
		v := g.sc.Services[i]
		if h := g.hit[i]; h > 0 && sf.Bounded {
			cf, cw := coldFirst.service[i], coldWorst.service[i]
			sev, found := Info, false
			switch {
			case cf >= sf.Capacity:
				sev, found = Warning, true
			case cw >= sf.Capacity:
				found = true
			}
			if found {
				out = append(out, Finding{Rule: "cache-hides-load", Severity: sev, Where: sf.Name,
					Message: fmt.Sprintf("%s's cache answers about %.0f%% of lookups: %s serves %s/s first tries, but cold or flushed it sees %s/s (%s/s with every retry), against a capacity of %s/s; a miss fills the cache only when it succeeds before its caller gives up, so under that load it stays cold. Its advertised capacity is %s / (1 − %.2f) = %s/s, its hidden capacity %s/s.",
						sf.Name, 100*h, sf.Name, num(sf.FirstTries), num(cf), num(cw), num(sf.Capacity), num(sf.Capacity), h, num(sf.Capacity/(1-h)), num(sf.Capacity)),
					Fix: fmt.Sprintf("Size %s for its load without the cache, or make refills succeed when it is cold: drop expired work and serve first tries first (defenses: stormguard), budget the retries, and warm the cache before it takes traffic.", sf.Name),
					Numbers: map[string]float64{"hit_rate": h, "cold_first_tries_per_s": cf, "cold_worst_case_per_s": cw,
						"capacity_per_s": sf.Capacity, "advertised_capacity_per_s": sf.Capacity / (1 - h)}})
			}
		}
		if sf.PeakCapacity > sf.Capacity*(1+1e-9) {
			out = append(out, Finding{Rule: "thrashing", Severity: Warning, Where: sf.Name,
				Message: fmt.Sprintf("%s's capacity falls past its knee: %s/s below it, %s/s with all %d workers busy; overloaded once, it stays at the lower figure, and the vulnerable load above is computed on it.",
					sf.Name, num(sf.PeakCapacity), num(sf.Capacity), max(1, v.Workers)),
				Fix:     fmt.Sprintf("Keep %s below its knee: an adaptive concurrency limit (limiter: vegas or gradient2) or no more workers than the knee.", sf.Name),
				Numbers: map[string]float64{"peak_capacity_per_s": sf.PeakCapacity, "capacity_per_s": sf.Capacity}})
		}
		if c := v.FailureCost.Refuse; c > 0 && sf.Bounded && v.Capacity == nil {
			// At twice the capacity, X·s + (λ − X)·c = W gives what is served.
			s := time.Duration(float64(time.Second) / (sf.Capacity / float64(max(1, v.Workers)*max(1, v.Replicas))))
			w := float64(max(1, v.Workers) * max(1, v.Replicas))
			lambda := 2 * sf.Capacity
			x := math.Max(0, (w-lambda*c.Seconds())/(s.Seconds()-c.Seconds()))
			if c >= s {
				x = 0
			}
			out = append(out, Finding{Rule: "costly-failures", Severity: Info, Where: sf.Name,
				Message: fmt.Sprintf("each refusal costs %s of %s's work: at twice its capacity (%s/s) it serves %s/s, not %s/s; the more it is asked, the less it does.",
					c, sf.Name, num(lambda), num(x), num(sf.Capacity)),
				Fix:     "Refuse where it is cheap (at the balancer or the client, with a budget and the overload signal), before the work that refusing costs.",
				Numbers: map[string]float64{"refuse_cost_s": c.Seconds(), "served_at_twice_capacity_per_s": x, "capacity_per_s": sf.Capacity}})
		}
		out = append(out, g.hangFindings(i, sf)...)
		if f, ok := g.blindAutoscaler(i, sf); ok {
			out = append(out, f)
		}
		if cr := v.Crash; cr != nil && v.Capacity == nil {
			q := v.Queue.Capacity
			if q == 0 {
				q = 200_000
			}
			if q >= cr.Limit() {
				out = append(out, Finding{Rule: "crash-before-shed", Severity: Warning, Where: sf.Name,
					Message: fmt.Sprintf("a replica of %s crashes when its queue passes %d, before its queue of %d sheds anything: its share then moves to the others, which crash in turn, and each replica that restarts takes the load alone.",
						sf.Name, cr.Limit(), q),
					Fix:     fmt.Sprintf("Bound %s's queue below %d (queue.capacity) or limit its concurrency, so it sheds instead of crashing.", sf.Name, cr.Limit()),
					Numbers: map[string]float64{"crash_queue": float64(cr.Limit()), "queue_capacity": float64(q)}})
			}
		}
	}
	if f, ok := g.offSwitch(); ok {
		out = append(out, f)
	}
	return out
}

// blindAutoscaler: a CPU-keyed autoscaler on a service whose workers spend
// most of a request waiting on its calls cannot see the tier overloaded:
// when the calls slow down, workers wait longer, CPU falls, and it scales
// down (Slack, 2021).
func (g *graph) blindAutoscaler(i int, sf ServiceFigure) (Finding, bool) {
	v := g.sc.Services[i]
	a := v.Autoscale
	if a == nil || a.Metric != "cpu" || sf.Hold <= 0 {
		return Finding{}, false
	}
	local := v.ServiceTime.Average()
	share := float64(local) / float64(sf.Hold)
	if share >= 0.5 {
		return Finding{}, false
	}
	p := a.Policy.WithDefaults()
	if p.ScaleDown.SelectPolicy == autoscale.SelectDisabled {
		return Finding{}, false // it never scales down
	}
	// How long a slowdown must last before the autoscaler acts on it: its
	// scale-down stabilization window (Kubernetes' default 300 s), or its
	// next evaluation without one.
	when := fmt.Sprintf("at its next evaluation (every %v)", p.Interval)
	window := 0.0
	if w := p.ScaleDown.StabilizationWindow; w != nil && *w > 0 {
		window = w.Seconds()
		when = fmt.Sprintf("once a slowdown outlasts its %v scale-down stabilization window", *w)
	}
	return Finding{Rule: "cpu-blind-autoscaler", Severity: Warning, Where: sf.Name,
		Message: fmt.Sprintf("%s's autoscaler reads CPU, but its workers spend %.0f%% of a request (%v of %v) waiting on calls: when the calls slow down its workers wait longer, its CPU falls, and the autoscaler scales an overloaded tier down %s.",
			sf.Name, 100*(1-share), sf.Hold-local, sf.Hold, when),
		Fix:     fmt.Sprintf("Key %s's autoscaler on in-flight concurrency or queue delay, which see the tier's overload; or bound how fast it scales down (scale_down: a longer stabilization_window, slower policies).", sf.Name),
		Numbers: map[string]float64{"cpu_share_of_hold": share, "hold_s": sf.Hold.Seconds(), "scale_down_window_s": window}}, true
}

// offSwitch: layers retry and the runbook has no step that turns their
// retries off, sheds or pauses them: "build the off switch before you need
// it".
func (g *graph) offSwitch() (Finding, bool) {
	covered := map[string]bool{}
	for _, a := range g.sc.Actions {
		switch a.Kind {
		case "retries-off", "shed", "pause":
			covered[a.Target] = true
		}
	}
	var layers []string
	for _, e := range g.edges {
		target := g.sc.Services[e.to].Name
		if e.amplification() > 1 && !covered[e.caller] && !covered[target] {
			layers = append(layers, e.name)
		}
	}
	if len(layers) == 0 {
		return Finding{}, false
	}
	return Finding{Rule: "no-off-switch", Severity: Warning, Where: "runbook",
		Message: fmt.Sprintf("%s retr%s, and no step of the scenario's runbook (actions) turns %s retries off, sheds or pauses them: removing load is the one recovery move that always works, and without a switch it is a code change in the middle of an incident.",
			andList(layers), map[bool]string{true: "y", false: "ies"}[len(layers) > 1], map[bool]string{true: "their", false: "its"}[len(layers) > 1]),
		Fix:     "Wire a kill switch (killswitch.Dials) into the retrying layers and rehearse it: add a retries-off or shed action to a run and check that it recovers.",
		Numbers: map[string]float64{"layers": float64(len(layers))}}, true
}

// hangFindings: hung attempts, of the service's own hang or a hang
// trigger, held until release with no propagated deadline on some edge
// into the service, need more workers than it has.
func (g *graph) hangFindings(i int, sf ServiceFigure) []Finding {
	v := g.sc.Services[i]
	p, rel, what := 0.0, time.Duration(0), ""
	if v.Hang != nil {
		p, rel, what = v.Hang.Probability, v.Hang.Release, "its hang"
	}
	for _, t := range g.sc.Triggers {
		if t.Kind == "hang" && t.Target == v.Name && t.Factor > p {
			p, rel, what = t.Factor, t.Release, fmt.Sprintf("the hang trigger at %v", t.At)
		}
	}
	if p == 0 {
		return nil
	}
	// The longest an unanswered attempt holds a worker: the release, or the
	// propagated deadline of the slowest edge in.
	hold := rel
	for _, id := range g.in[i] {
		e := g.edges[id]
		if !e.propagate {
			continue
		}
		d := e.timeout
		if e.deadline > 0 {
			d = min(d, e.deadline)
		}
		if hold == 0 || d < hold {
			hold = d
		}
	}
	workers := max(1, v.Workers) * max(1, v.Replicas)
	if hold == 0 {
		return []Finding{{Rule: "hang-holds-workers", Severity: Warning, Where: sf.Name,
			Message: fmt.Sprintf("with %s (%.0f%% of attempts) nothing lets a hung attempt go: no release and no propagated deadline; every hang holds one of %s's %d workers to the end.", what, 100*p, sf.Name, workers),
			Fix:     fmt.Sprintf("Propagate the callers' deadlines to %s (propagate_deadline) or give it a server-side timeout.", sf.Name),
			Numbers: map[string]float64{"hang_probability": p, "workers": float64(workers)}}}
	}
	need := sf.FirstTries * p * hold.Seconds()
	if need < float64(workers) || sf.FirstTries == 0 {
		return nil
	}
	return []Finding{{Rule: "hang-holds-workers", Severity: Warning, Where: sf.Name,
		Message: fmt.Sprintf("with %s, %.0f%% of %s/s attempts hang and each holds a worker for %v: about %s workers, more than %s's %d.",
			what, 100*p, num(sf.FirstTries), hold, num(need), sf.Name, workers),
		Fix:     fmt.Sprintf("Propagate the callers' deadlines to %s (propagate_deadline), so a hung attempt is let go when nobody waits for it.", sf.Name),
		Numbers: map[string]float64{"hang_probability": p, "hold_s": hold.Seconds(), "workers_needed": need, "workers": float64(workers)}}}
}
