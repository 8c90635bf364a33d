package scenario

import (
	"math"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// Lifetime bounds how long a request of c can last, from its arrival to
// its outcome: its deadline (plus the attempt under way when it passes),
// or its attempts' timeouts and the longest delays between them (the
// backoff's cap and, unless the policy ignores the servers' signals, the
// pushback's largest extra). For people who tap again (Humans) it is
// their taps, each after the longest patience, plus the last tap's own
// lifetime; a patience without an upper bound makes it unbounded
// (math.MaxInt64). c is taken with its defaults (see WithDefaults).
//
// Nothing of c can be in flight longer: the verdict counts a request
// still in flight at the end of a run as failed once it is older than
// its caller's patience (see Verdict.Patience), which defaults to this.
func (c Client) Lifetime() time.Duration {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	p := c.Policy.OrDefault().Policy.WithDefaults()
	delay := func(b *backoff.Policy) time.Duration {
		if b == nil || b.Kind == backoff.None {
			return 0
		}
		if b.Cap > 0 {
			return b.Cap
		}
		return backoff.DefaultCap
	}
	d := max(delay(&p.Backoff), delay(p.ThrottleBackoff))
	if !p.IgnoreSignals && !p.Pushback.Ignore {
		d = satAdd(d, p.Pushback.MaxExtra)
	}
	n := time.Duration(max(p.MaxAttempts, 1))
	life := satAdd(satMul(n, timeout), satMul(n-1, d))
	if c.Deadline > 0 {
		life = min(life, satAdd(c.Deadline, timeout))
	}
	if h := c.Humans; h != nil && h.Taps > 1 {
		most, ok := h.Patience.Longest()
		if !ok {
			return math.MaxInt64
		}
		life = satAdd(life, satMul(time.Duration(h.Taps-1), most))
	}
	return life
}

// Longest returns the longest duration d can draw, and false when it has
// no upper bound (exponential, lognormal).
func (d *Dist) Longest() (time.Duration, bool) {
	switch d.Kind {
	case "", "constant":
		return d.Mean, true
	case "uniform":
		return d.Max, true
	case "mixture":
		var most time.Duration
		for i := range d.Of {
			m, ok := d.Of[i].Dist.Longest()
			if !ok {
				return 0, false
			}
			most = max(most, m)
		}
		return most, true
	}
	return 0, false
}

// satAdd and satMul are a + b and n × d, saturating at the largest
// Duration.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(n, d time.Duration) time.Duration {
	if n > 0 && d > math.MaxInt64/n {
		return math.MaxInt64
	}
	return n * d
}

// Disturbed returns the first instant at which anything but the system's
// own dynamics changes the run: a trigger starts, a runbook step is taken,
// a client's arrival rate changes (a schedule, a load trigger) or a burst
// arrives. It returns s.Duration when nothing does. The verdict judges the
// bins before it as the system's baseline: unhealthy there, nothing but a
// steady fault or overload can be the cause (see package result's Judge).
func (s Scenario) Disturbed() time.Duration {
	s = s.WithDefaults()
	first := s.Duration
	for _, t := range s.Triggers {
		first = min(first, t.At)
	}
	for _, a := range s.Actions {
		first = min(first, a.At)
	}
	for i := range s.Clients {
		a := &s.Clients[i].Arrivals
		switch a.Kind {
		case "burst":
			first = min(first, a.At)
		case "closed":
		default:
			// The end of the first stretch of steady rate (load triggers
			// are triggers, above).
			t := time.Duration(0)
			r0, slope, end, ok := a.ratePiece(0, nil)
			for t < first {
				if slope != 0 {
					first = t
					break
				}
				if !ok {
					break
				}
				r, sl, next, more := a.ratePiece(end, nil)
				if r != r0 || sl != 0 {
					first = min(first, end)
					break
				}
				t, slope, end, ok = end, sl, next, more
			}
		}
	}
	return max(first, 0)
}
