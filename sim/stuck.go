package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Stopping a run whose verdict is settled (RunJudged).
//
// A run may stop before its end when, from some instant on, no request of
// any client can succeed before the end, whatever the random draws: then
// the full run would end metastable (rule 7 of judge), and simulating the
// rest is work whose only product is the same verdict. The simulator
// proves it with a bound, not a guess: a service is stuck when every
// replica's FIFO queue holds more attempts than its workers could start
// before the end even at their fastest (one start per worker per shortest
// service time, at the highest speed the service can reach), and the
// queue has no way to lose items but by starting them (no deadline or
// CoDel drops, no priority that lets a newcomer pass, no supersession, no
// crash, no admission gate from a policy file, whose queue expires items). An attempt that reaches such a service joins the back of a queue
// that will not have reached it by the end. A client is stuck when every
// way its requests can succeed passes through a stuck service: its target
// is stuck, or every call its target makes is required (no fallback) and
// leads, without a cache, to a stuck service.
//
// The check runs at the end of each bin once nothing can change the
// system any more (the triggers have ended, the runbook's steps and the
// arrival schedules are past, no autoscaler, no replica booting), and it
// stops the run when every client is stuck and the bins the verdict would
// judge at the end lie after the stop: each client's requests end within a
// bounded time (attempts × timeout + the longest backoff between them, or
// its deadline), so the arrival bins from the stop to the end of the run,
// minus that time, all end in failure. Their windows would all show no
// success; one counts as healthy only if it held at most one ended request
// while the clients' rate at the stop puts about 20 in it (the window is
// sized for 20 at the run's mean demand, and the check asks that the rate
// at the stop be at least 90 % of the mean so far), so the verdict could
// differ only if most of the last settling stretch's windows were that
// empty: a probability below 1e-12.

// stuckPossible reports whether the scenario can ever be proven stuck:
// none of the mechanisms that make a queue lose items other than by
// starting them, or change the system later, is present at all. It is
// decided once per run; the per-bin check then looks at the state.
func (w *world) stuckPossible() bool {
	for i := range w.services {
		if w.services[i].scaler != nil {
			return false
		}
	}
	for i := range w.clients {
		c := &w.clients[i]
		k := c.spec.Arrivals.Kind
		if c.spec.Humans != nil || (k != "poisson" && k != "constant" && k != "") || w.edges[c.edge].hedged {
			return false
		}
	}
	return true
}

// quietFrom is the instant after which nothing scheduled changes the
// system: the end of the last trigger, the last runbook step (and its
// delay), the last arrival schedule point.
func (w *world) quietFrom() engine.Time {
	var t time.Duration
	for _, tr := range w.sc.Triggers {
		t = max(t, tr.At+tr.Duration)
	}
	for _, a := range w.sc.Actions {
		t = max(t, a.At+a.Delay)
	}
	for i := range w.clients {
		for _, p := range w.clients[i].spec.Arrivals.Schedule {
			t = max(t, p.At)
		}
	}
	return engine.Time(t)
}

// minWork is the shortest local work a distribution can draw; 0 when it
// has no positive lower bound.
func minWork(d *scenario.Dist) time.Duration {
	switch d.Kind {
	case "", "constant":
		return d.Mean
	case "uniform":
		return d.Min
	case "mixture":
		m := time.Duration(math.MaxInt64)
		for i := range d.Of {
			m = min(m, minWork(&d.Of[i].Dist))
		}
		return m
	}
	return 0
}

// queueStuck reports whether no attempt reaching service v from now on can
// start before the end (see the comment at the top of the file).
func (w *world) queueStuck(v *service) bool {
	q := v.spec.Queue
	if v.ps || v.spec.Capacity != nil || v.spec.Supersede != nil || v.spec.Server != nil || v.expire || v.spec.Crash != nil || v.hangP > 0 ||
		q.CoDelTarget > 0 || (q.Discipline != "" && q.Discipline != "fifo") || v.spec.Slowdown.Factor < 0 {
		return false
	}
	st := minWork(&v.spec.ServiceTime)
	if st <= 0 {
		return false
	}
	fast := v.capacity * v.opSpeed * v.spec.Law.MaxSpeed()
	if fast <= 0 {
		return false
	}
	left := float64(w.end - w.now())
	starts := float64(v.workers) * (left*fast/float64(st) + 1)
	up := 0
	for i := range v.reps {
		r := &v.reps[i]
		if r.booting || r.delayed || r.draining {
			return false // it may change
		}
		if r.down || r.retired {
			continue
		}
		if float64(r.queue.Len()) <= starts {
			return false
		}
		up++
	}
	return up > 0
}

// stuckService reports whether every way an attempt at service si can
// succeed passes through a stuck service. memo holds 0 (unknown), 1
// (stuck), 2 (not stuck), 3 (being decided: a cycle counts as not stuck).
func (w *world) stuckService(si int32, memo []uint8) bool {
	switch memo[si] {
	case 1:
		return true
	case 2, 3:
		return false
	}
	memo[si] = 3
	v := &w.services[si]
	stuck := w.queueStuck(v)
	if !stuck && v.spec.OnCallFailure != "fallback" && v.cache == nil {
		for _, ei := range v.calls {
			e := &w.edges[ei]
			if e.cache == nil && w.stuckService(e.target, memo) {
				stuck = true
				break
			}
		}
	}
	memo[si] = 2
	if stuck {
		memo[si] = 1
	}
	return stuck
}

// lifetime bounds how long a request of client c takes to end, from its
// arrival (scenario.Client.Lifetime).
func (w *world) lifetime(c *client) time.Duration { return c.spec.Lifetime() }

// settledStuck reports, at the end of a bin, whether the run's verdict is
// settled metastable (see the comment at the top of the file), and why.
// memo has a byte per service.
func (w *world) settledStuck(memo []uint8) (string, bool) {
	now := w.now()
	var life time.Duration
	rate, demand := 0.0, 0.0
	clear(memo)
	for i := range w.clients {
		c := &w.clients[i]
		e := &w.edges[c.edge]
		if e.cache != nil || !w.stuckService(e.target, memo) {
			return "", false
		}
		life = max(life, w.lifetime(c))
		rate += c.rate(now)
		demand += float64(c.stats.total.Requests)
	}
	binS := w.bin.Seconds()
	perBin := demand / (float64(now) / float64(w.bin)) // the mean demand so far
	if rate <= 0 || rate*binS < 0.9*perBin {
		return "", false
	}
	// The bins judged at the end (rules 2 to 4): the settling stretch and
	// a window, before the arrivals still pending at the end.
	var trigEnd time.Duration
	for _, t := range w.sc.Triggers {
		trigEnd = max(trigEnd, t.At+t.Duration)
	}
	span := time.Duration(w.end) - trigEnd
	settle := max(3, int(math.Ceil(0.1*float64(span)/float64(w.bin))))
	k := max(1, int(math.Ceil(result.MinWindow/min(rate*binS, perBin))))
	if now.Add(life+time.Duration(settle+k+2)*w.bin) > w.end {
		return "", false
	}
	name := ""
	for si := range w.services {
		if memo[si] == 1 && w.queueStuck(&w.services[si]) {
			name = w.services[si].spec.Name
			break
		}
	}
	return fmt.Sprintf("stopped at %.0f s of %.0f s: the queue of %s held more attempts than its workers could start before the end, so no request could succeed from then on",
		time.Duration(now).Seconds(), time.Duration(w.end).Seconds(), name), true
}
