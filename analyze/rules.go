package analyze

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// Rule is one rule of the checklist.
type Rule struct {
	ID string `json:"id"`
	// Summary: what breaks the rule, and at which severity.
	Summary string `json:"summary"`
}

// Rules lists the rules [Scenario] checks, in the order findings are
// sorted within a severity. docs/analyze.md states each precisely.
var Rules = []Rule{
	{"overloaded", "error: first tries alone, without any retry, exceed a service's capacity at the configured rates"},
	{"vulnerable", "error: a client's rate is above the rate at which a service's worst-case load (capacity ÷ amplification, budgets included) reaches its capacity"},
	{"layered-retries", "error when two or more layers of one path retry without a budget, else warning: more than one layer retries the same dependency"},
	{"timeout-exceeds-caller", "error (warning without retries): a call's attempt timeout is at least as long as its caller waits for the whole answer"},
	{"retries-exceed-caller", "warning (note when deadlines propagate to a deadline-aware policy): a call's attempts × timeout + backoff outlast its caller's wait"},
	{"timeout-exceeds-deadline", "warning: a client's attempt timeout is at least its request deadline, so a timed-out attempt leaves no time to retry"},
	{"retries-unretryable", "warning: a layer retries answers that cannot succeed on a second try: 'retries exhausted' from a service whose own call already retried, with ignore_signals on"},
	{"ignores-pushback", "warning: a layer retries a service with stormguard's defenses but ignores its overload signal or its Retry-After hint"},
	{"missing-budget", "warning: a layer retries (max_attempts > 1) with no retry budget"},
	{"missing-jitter", "warning (note for partial jitter): a layer retries with backoff none, constant or exponential; equal and proportional jitter are noted"},
	{"cache-hides-load", "warning (note when only the retries would): a service's load without its look-aside cache, cold or flushed, is above its capacity, and refills that time out would keep it cold"},
	{"thrashing", "warning: a service's capacity falls past its knee (capacity_law knee or curve) with every worker busy"},
	{"hang-holds-workers", "warning: hung attempts held until their release, or with nothing to let them go, need more workers than the service has"},
	{"crash-before-shed", "warning: a replica crashes at a queue length its queue reaches before shedding anything"},
	{"costly-failures", "note: refusals cost work, so at twice its capacity a service serves less than its capacity"},
	{"cpu-blind-autoscaler", "warning: an autoscaler reads CPU on a service whose workers spend most of a request waiting on calls"},
	{"no-off-switch", "warning: layers retry and no runbook step (actions) turns their retries off, sheds or pauses them"},
}

// findings checks every rule.
func (g *graph) findings(paths []Path, services []ServiceFigure) []Finding {
	var out []Finding
	out = append(out, g.capacityFindings(services)...)
	out = append(out, g.mechanismFindings(services)...)
	out = append(out, layered(paths)...)
	for id := range g.edges {
		out = append(out, g.edgeFindings(id)...)
	}
	rank := map[string]int{}
	for i, r := range Rules {
		rank[r.ID] = i
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(b.Severity, a.Severity), cmp.Compare(rank[a.Rule], rank[b.Rule]))
	})
	return out
}

// capacityFindings: overloaded and vulnerable.
func (g *graph) capacityFindings(services []ServiceFigure) []Finding {
	var out []Finding
	for _, sf := range services {
		if !sf.Bounded {
			continue
		}
		if sf.FirstTries > 0 && sf.FirstTries >= sf.Capacity {
			at := "the configured rates"
			for _, x := range sf.Clients {
				if x.RateNote != "" {
					at += " (" + x.Client + ": " + x.RateNote + ")"
				}
			}
			out = append(out, Finding{Rule: "overloaded", Severity: Error, Where: sf.Name,
				Message: fmt.Sprintf("%s receives %s/s first tries at %s, at or above its capacity of %s/s, before any retry.",
					sf.Name, num(sf.FirstTries), at, num(sf.Capacity)),
				Fix:     fmt.Sprintf("Give %s more capacity than %s/s or shed load before it: no retry policy helps a service that is over capacity on first tries.", sf.Name, num(sf.FirstTries)),
				Numbers: map[string]float64{"first_tries_per_s": sf.FirstTries, "capacity_per_s": sf.Capacity}})
			continue
		}
		for _, x := range sf.Clients {
			if !x.RateKnown || x.Rate <= 0 || x.Rate <= x.VulnerableAbove*(1+1e-9) {
				continue
			}
			others := ""
			if len(sf.Clients) > 1 {
				others = ", the other clients at their rates"
			}
			budgets := ""
			if x.VulnerableAboveWithoutBudgets != x.VulnerableAbove {
				budgets = fmt.Sprintf(" (%s/s without the budgets)", num(x.VulnerableAboveWithoutBudgets))
			}
			rate := num(x.Rate) + "/s"
			if x.RateNote != "" {
				rate += " (" + x.RateNote + ")"
			}
			out = append(out, Finding{Rule: "vulnerable", Severity: Error, Where: sf.Name,
				Message: fmt.Sprintf("%s runs at %s; %s becomes vulnerable above %s/s%s: its capacity of %s/s ÷ %s worst-case amplification%s.",
					x.Client, rate, sf.Name, num(x.VulnerableAbove), budgets, num(sf.Capacity), times(x.Effective), others),
				Fix: fmt.Sprintf("Cut the amplification at %s (retry at one layer, with a retry budget: 10 %% bounds it near 1.1×) or give it the capacity for %s/s.",
					sf.Name, num(sf.Budgeted)),
				Numbers: map[string]float64{
					"rate_per_s":                             x.Rate,
					"vulnerable_above_per_s":                 x.VulnerableAbove,
					"vulnerable_above_without_budgets_per_s": x.VulnerableAboveWithoutBudgets,
					"capacity_per_s":                         sf.Capacity,
					"amplification":                          x.Effective,
					"worst_case":                             x.Worst,
				}})
		}
	}
	return out
}

// layered: more than one layer of a path retries. A path is reported when
// its last hop retries and no longer reported path extends it.
func layered(paths []Path) []Finding {
	type cand struct {
		p     Path
		retry []Hop
	}
	var cands []cand
	for _, p := range paths {
		if p.Hops[len(p.Hops)-1].Worst <= 1 {
			continue
		}
		var r []Hop
		for _, h := range p.Hops {
			if h.Worst > 1 {
				r = append(r, h)
			}
		}
		if len(r) >= 2 {
			cands = append(cands, cand{p, r})
		}
	}
	var out []Finding
	for i, c := range cands {
		extended := false
		for j, d := range cands {
			if i != j && len(d.p.Hops) > len(c.p.Hops) && d.p.Client == c.p.Client &&
				slices.Equal(d.p.Services[:len(c.p.Services)], c.p.Services) {
				extended = true
				break
			}
		}
		if extended {
			continue
		}
		owner := c.retry[len(c.retry)-1]
		var list, rest []string
		product, unbudgeted := 1.0, 0
		for _, h := range c.retry {
			list = append(list, h.Edge+" "+h.attemptsText())
			product *= h.Worst
			if !h.bounded {
				unbudgeted++
			}
			if h != owner {
				rest = append(rest, h.Edge)
			}
		}
		sev := Warning
		if unbudgeted >= 2 {
			sev = Error
		}
		dep := c.p.Services[len(c.p.Services)-1]
		out = append(out, Finding{Rule: "layered-retries", Severity: sev, Where: c.p.String(),
			Message: fmt.Sprintf("%d layers retry on %s (%s): up to %s attempts reach %s per request.",
				len(c.retry), c.p.String(), strings.Join(list, ", "), num(product), dep),
			Fix: fmt.Sprintf("Let %s own the retries (it is closest to %s) and make %s fail fast (max_attempts: 1).",
				owner.Edge, dep, andList(rest)),
			Numbers: map[string]float64{"layers": float64(len(c.retry)), "worst_case": product,
				"unbudgeted_layers": float64(unbudgeted), "budgeted": c.p.Budgeted}})
	}
	return out
}

// wait is how long the callers of service s wait for one attempt at most:
// the shortest timeout (or client deadline) of the edges into s, and the
// edge that waits that long.
func (g *graph) wait(s int) (time.Duration, int) {
	best, who := time.Duration(0), -1
	for _, id := range g.in[s] {
		e := g.edges[id]
		w := e.timeout
		if e.deadline > 0 && e.deadline < w {
			w = e.deadline
		}
		if who < 0 || w < best {
			best, who = w, id
		}
	}
	return best, who
}

// backoffTotal is the typical total wait before the retries of a request
// that makes k attempts: each delay at the middle of its jitter range.
func backoffTotal(p backoff.Policy, k int) time.Duration {
	var total, prev time.Duration
	for n := 1; n < k; n++ {
		d := p.Delay(n, prev, 0.5)
		total += d
		prev = d
	}
	return total
}

// deadlineAware: the retrier will not start a retry the deadline cannot
// hold (docs/analyze.md, retries-exceed-caller).
func deadlineAware(e *edge) bool {
	return e.policy.LearnAttemptTime || e.policy.MinAttemptTime > 0
}

// edgeFindings checks the rules about one edge.
func (g *graph) edgeFindings(id int) []Finding {
	e := &g.edges[id]
	k := e.attempts()
	svc := g.sc.Services[e.to]
	var out []Finding
	add := func(rule string, sev Severity, msg, fix string, nums map[string]float64) {
		out = append(out, Finding{Rule: rule, Severity: sev, Where: e.name, Message: msg, Fix: fix, Numbers: nums})
	}
	policy := "its policy"
	if e.preset != "" {
		policy = "preset " + e.preset
	}

	// timeout-exceeds-caller and retries-exceed-caller: calls only.
	if e.from >= 0 && len(g.in[e.from]) > 0 {
		w, who := g.wait(e.from)
		caller := g.edges[who]
		nums := map[string]float64{"timeout_s": e.timeout.Seconds(), "caller_wait_s": w.Seconds(), "attempts": float64(k)}
		switch {
		case e.timeout >= w:
			sev, what := Warning, "the caller has gone before the attempt times out"
			if k > 1 {
				sev, what = Error, "no retry can finish while the caller still waits"
			}
			add("timeout-exceeds-caller", sev,
				fmt.Sprintf("%s waits up to %v per attempt, and %s waits only %v for %s's whole answer: %s.",
					e.name, e.timeout, caller.name, w, g.sc.Services[e.from].Name, what),
				fmt.Sprintf("Give %s a timeout well under %v (at most %v for %d attempts) and propagate deadlines (propagate_deadline: true).",
					e.name, w, (w/time.Duration(k)).Round(time.Millisecond), k), nums)
		case k > 1:
			bo := backoffTotal(e.policy.Backoff, k)
			total := time.Duration(k)*e.timeout + bo
			if total > w {
				sev := Warning
				mitigated := caller.propagate && e.propagate && deadlineAware(e)
				if mitigated {
					sev = Info
				}
				nums["worst_time_s"] = total.Seconds()
				nums["backoff_s"] = bo.Seconds()
				msg := fmt.Sprintf("%s can take %d × %v + %v of backoff = %v, longer than %s waits (%v): its last retries end after the caller has gone.",
					e.name, k, e.timeout, bo.Round(time.Millisecond), total.Round(time.Millisecond), caller.name, w)
				fix := fmt.Sprintf("Fit the attempts in %v (attempts × timeout + backoff), or propagate the deadline to a deadline-aware policy (preset stormguard) so retries that cannot finish are not started.", w)
				if mitigated {
					msg += " The deadline propagates and the policy is deadline-aware, so retries that cannot finish are not started."
					fix = "Nothing to do unless the wasted last attempts matter; a shorter timeout would make room for the retries."
				}
				add("retries-exceed-caller", sev, msg, fix, nums)
			}
		}
	}

	// timeout-exceeds-deadline: clients only.
	if e.client >= 0 && e.deadline > 0 && k > 1 && e.timeout >= e.deadline {
		add("timeout-exceeds-deadline", Warning,
			fmt.Sprintf("%s's attempt timeout (%v) is not shorter than its request deadline (%v): an attempt that times out leaves no time for the %d retries.",
				e.name, e.timeout, e.deadline, k-1),
			fmt.Sprintf("Make the attempt timeout a fraction of the deadline (at most %v for %d attempts), or drop the retries.",
				(e.deadline/time.Duration(k)).Round(time.Millisecond), k),
			map[string]float64{"timeout_s": e.timeout.Seconds(), "deadline_s": e.deadline.Seconds(), "attempts": float64(k)})
	}
	if k < 2 || e.retryChance() == 0 {
		return out
	}

	// retries-unretryable: the callee answers "retries exhausted".
	if e.policy.IgnoreSignals && svc.OnCallFailure != "fallback" {
		var below []string
		most := 0
		for _, cid := range g.out[e.to] {
			c := &g.edges[cid]
			if c.attempts() > 1 {
				below = append(below, fmt.Sprintf("%s (%d attempts)", c.name, c.attempts()))
				most = max(most, c.attempts())
			}
		}
		if len(below) > 0 {
			add("retries-unretryable", Warning,
				fmt.Sprintf("%s retries %s's failures after %s already retried: an answer that says retries are exhausted below cannot succeed on a second try, but %s ignores that signal, so each retry repeats the attempts below.",
					e.name, svc.Name, andList(below), policy),
				fmt.Sprintf("Give %s a policy that honours server signals (ignore_signals: false, as preset stormguard), or max_attempts: 1.", e.name),
				map[string]float64{"attempts": float64(k), "attempts_below": float64(most)})
		}
	}

	// ignores-pushback: the callee signals overload.
	if svc.Defenses == "stormguard" && (e.policy.IgnoreSignals || e.policy.Pushback.Ignore) {
		var what []string
		if e.policy.IgnoreSignals {
			what = append(what, "its overload signal")
		}
		if e.policy.Pushback.Ignore {
			what = append(what, "its Retry-After hint")
		}
		add("ignores-pushback", Warning,
			fmt.Sprintf("%s runs stormguard's defenses, but %s ignores %s and retries as if the service had not asked it to back off.",
				svc.Name, e.name, strings.Join(what, " and ")),
			fmt.Sprintf("Give %s a policy that honours signals and hints (ignore_signals: false, pushback.ignore: false, as preset stormguard).", e.name),
			map[string]float64{"attempts": float64(k)})
	}

	// missing-budget.
	if !e.budget.has {
		b := ""
		if e.budget.short != "none" {
			b = " (its " + e.budget.short + " budget bounds nothing)"
		}
		retried := "every request is retried " + timesWord(k-1)
		if p := e.retryChance(); p < 1 {
			retried = fmt.Sprintf("a failed attempt is retried with probability %s, up to %s: %s attempts per request", pct(p), timesWord(k-1), times(e.amplification()))
		}
		add("missing-budget", Warning,
			fmt.Sprintf("%s makes up to %d attempts with no retry budget%s: when %s fails, %s.",
				e.name, k, b, svc.Name, retried),
			fmt.Sprintf("Give %s a retry budget on top of max_attempts (preset stormguard keeps retries within 10 %% of requests).", e.name),
			map[string]float64{"attempts": float64(k)})
	}

	// missing-jitter.
	check := func(field string, p backoff.Policy) {
		switch p.Kind {
		case backoff.None, backoff.Constant, backoff.Exponential:
			how := "backoff " + p.Kind.String() + " has no jitter"
			if p.Kind == backoff.None {
				how = "retries at once (backoff none)"
			}
			add("missing-jitter", Warning,
				fmt.Sprintf("%s %s%s: clients that failed together retry together, in waves.", e.name, how, field),
				fmt.Sprintf("Use full jitter on %s (backoff: {kind: full-jitter, base: 50ms, cap: 10s}).", e.name),
				map[string]float64{"attempts": float64(k)})
		case backoff.EqualJitter, backoff.Proportional:
			add("missing-jitter", Info,
				fmt.Sprintf("%s's backoff %s%s randomises only part of each wait, so retries still bunch.", e.name, p.Kind, field),
				fmt.Sprintf("Prefer full jitter on %s, which spreads retries over the whole window.", e.name),
				map[string]float64{"attempts": float64(k)})
		}
	}
	check("", e.policy.Backoff)
	if e.policy.ThrottleBackoff != nil {
		check(" (throttle_backoff)", *e.policy.ThrottleBackoff)
	}
	return out
}

// timesWord writes a count of repetitions: "once", "twice", "3 times".
func timesWord(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// andList joins "a", "b" and "c" as "a, b and c".
func andList(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
