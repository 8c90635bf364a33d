package analyze

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The fluid model of a replica with a capacity law (docs/analyze.md,
// "Capacity laws"). Its state n is the attempts present: in service, at
// most W, and queued beyond them, at most Q. The law gives the time an
// attempt holds its worker with k in service, hold(k); by Little's law the
// replica then completes T(n) = k / hold(k) attempts per second, k =
// min(n, W): the law's throughput at the concurrency of the state.
//
//	dn/dt = λ × A(f(n)) − T(n)
//
// Without a law, n ≤ W is the empty queue of the model in fluid.go, and
// n − W its queue.

// lawValid reports a capacity law the model cannot use.
func (p Params) lawValid() error {
	l := p.Law
	switch {
	case l.Kind != "" && l.Kind != "fixed" && l.Kind != "processor-sharing" && l.Kind != "linear":
		return fmt.Errorf("fluid: capacity law %q is not fixed, processor-sharing or linear", l.Kind)
	case l.Cores < 0 || l.PerRequest < 0 || l.Knee < 0 || l.Drop < 0 || l.Drop >= 1:
		return fmt.Errorf("fluid: capacity law %+v has a negative field or a drop outside [0, 1)", *l)
	case p.Workers < 0 || p.Workers > 100_000_000:
		return fmt.Errorf("fluid: workers %d is outside [1, 1e8]", p.Workers)
	case p.ServiceTime <= 0:
		return fmt.Errorf("fluid: a capacity law needs a service time > 0")
	}
	for i, c := range l.Curve {
		if !(c.Speed > 0 && c.Speed <= 1) || c.InService < 0 || i > 0 && c.InService <= l.Curve[i-1].InService {
			return fmt.Errorf("fluid: capacity law's curve point %d %+v: speed must be in (0, 1], in_service rising", i, c)
		}
	}
	return nil
}

// lawModel is one replica with a capacity law.
type lawModel struct {
	p     Params  // the replica's parameters
	w     float64 // workers W
	top   float64 // W + Q: the most attempts present
	s     float64 // service time, seconds
	per   float64 // linear: seconds each attempt in service adds
	cores float64 // processor sharing: cores; 0 otherwise
	grid  []float64
}

func newLawModel(p Params) *lawModel {
	l := p.Law
	m := &lawModel{p: p, w: float64(max(1, p.Workers)), s: p.ServiceTime.Seconds()}
	m.top = m.w + p.QueueCap
	switch l.Kind {
	case "linear":
		m.per = l.PerRequest.Seconds()
	case "processor-sharing":
		m.cores = l.Cores
		if m.cores == 0 {
			m.cores = 1 // the simulator's default
		}
	}
	// The states where the drift is evaluated: a geometric grid, and the
	// points where the law changes.
	g := []float64{0, m.w, m.top}
	for x := 0.25; x < m.top; x *= 1.02 {
		g = append(g, x)
	}
	marks := []float64{m.cores}
	if l.Knee > 0 {
		marks = append(marks, float64(l.Knee))
	}
	for _, c := range l.Curve {
		marks = append(marks, float64(c.InService))
	}
	for _, k := range marks {
		// A state n starts an attempt with n + 1 in service.
		g = append(g, k-1, k, k+1)
	}
	g = slices.DeleteFunc(g, func(x float64) bool { return x < 0 || x > m.top })
	slices.Sort(g)
	m.grid = slices.Compact(g)
	return m
}

// speed is the thrashing curve's speed with k attempts in service.
func (m *lawModel) speed(k float64) float64 {
	return m.p.Law.Speed(int(math.Ceil(k - 1e-9)))
}

// hold is how long an attempt that starts with k in service (itself
// included) holds its worker, with q queued (the slowdown's queue):
//
//	fixed              s / Speed(k)
//	processor-sharing  s × max(1, k / cores) / Speed(k)
//	linear             (s + per_request × k) / Speed(k)
//
// each × the slowdown at q.
func (m *lawModel) hold(k, q float64) float64 {
	k = max(1, k)
	t := (m.s + m.per*k) * m.p.slow(q)
	if m.cores > 0 {
		t *= max(1, k/m.cores)
	}
	return t / m.speed(k)
}

// throughput is T(n): attempts completed per second with n present.
func (m *lawModel) throughput(n float64) float64 {
	k, q := min(n, m.w), max(0, n-m.w)
	if k <= 0 {
		return 0
	}
	return k / m.hold(k, q)
}

// latency is the time an attempt that arrives with n present spends in the
// replica: it waits for the queue ahead of it, then holds a worker.
func (m *lawModel) latency(n float64) float64 {
	if q := n - m.w; q > 0 {
		return q/m.throughput(n) + m.hold(m.w, q)
	}
	return m.hold(min(n+1, m.w), 0)
}

// spread is the standard deviation of that latency: the queue ahead
// spreads like a Poisson count, √(q + 1) / T, as in the model without a
// law; where the attempts in service slow one another (linear, and
// processor sharing beyond the cores) their number k does too, and each
// adds per_request (linear) or s / cores (processor sharing).
func (m *lawModel) spread(n float64) float64 {
	q := max(0, n-m.w)
	sd := math.Sqrt(q+1) / m.throughput(max(n, m.w))
	k := min(n+1, m.w)
	sp := m.speed(k) / m.p.slow(q)
	switch {
	case m.per > 0:
		sd += math.Sqrt(k+1) * m.per / sp
	case m.cores > 0 && k > m.cores:
		sd += math.Sqrt(k-m.cores+1) * m.s / m.cores / sp
	}
	return sd
}

// timeoutFraction is f(n), as in the model without a law: the fraction of
// attempts arriving with n present whose answer comes after the timeout.
func (m *lawModel) timeoutFraction(n float64) float64 {
	p := m.p
	margin := p.Timeout.Seconds() - p.RoundTrip.Seconds() - m.latency(n)
	return 1 / (1 + math.Exp(logistic12*margin/m.spread(n)))
}

func (m *lawModel) drift(lambda, n float64) float64 {
	return lambda*m.p.amplification(lambda, m.p.failed(m.timeoutFraction(n))) - m.throughput(n)
}

// servers is what does failure work: the cores under processor sharing,
// else the workers.
func (m *lawModel) servers() float64 {
	if m.cores > 0 {
		return m.cores
	}
	return m.w
}

// at returns the equilibrium at state n, interior (not at the full
// queue).
func (m *lawModel) at(lambda, n float64, stable bool) Equilibrium {
	f := m.timeoutFraction(n)
	fail := m.p.failed(f)
	off := lambda * m.p.amplification(lambda, fail)
	e := Equilibrium{Queue: max(0, n-m.w), InService: min(n, m.w), Stable: stable, Offered: off,
		TimedOut: f, Failed: fail, Goodput: off * (1 - fail), Collapsed: stable && f >= 0.5}
	e.Healthy = e.Goodput >= 0.9*lambda
	e.Latency = time.Duration((m.latency(n) + m.p.RoundTrip.Seconds()) * float64(time.Second))
	return e
}

// full returns the collapsed equilibrium at the full queue.
func (m *lawModel) full(lambda float64) Equilibrium {
	f := m.timeoutFraction(m.top)
	off, shed := m.p.capState(lambda, m.throughput(m.top), m.servers(), m.p.failed(f))
	fail := shed + (1-shed)*m.p.failed(f)
	e := Equilibrium{Queue: m.top - m.w, InService: m.w, Stable: true, Offered: off, TimedOut: f, Shed: shed,
		Failed: fail, Goodput: off * (1 - fail), Collapsed: true}
	e.Healthy = e.Goodput >= 0.9*lambda
	e.Latency = time.Duration((m.latency(m.top) + m.p.RoundTrip.Seconds()) * float64(time.Second))
	return e
}

// equilibria returns the fixed points at load lambda, by increasing n:
// where the drift falls through zero (stable), where it rises through
// zero (unstable), and the full queue when the drift there is ≥ 0. The
// drift is evaluated on the grid and each sign change refined by
// bisection.
func (m *lawModel) equilibria(lambda float64) []Equilibrium {
	if lambda == 0 {
		return []Equilibrium{m.at(0, 0, true)}
	}
	g := m.grid
	pos := make([]bool, len(g))
	for i, n := range g {
		d := m.drift(lambda, n)
		pos[i] = d > 0 || i == len(g)-1 && d >= 0
	}
	var out []Equilibrium
	for i := 0; i+1 < len(g); i++ {
		if pos[i] == pos[i+1] {
			continue
		}
		a, b := g[i], g[i+1]
		for range 200 {
			mid := (a + b) / 2
			if (m.drift(lambda, mid) > 0) == pos[i] {
				a = mid
			} else {
				b = mid
			}
			if b-a <= 1e-9*max(1, b) {
				break
			}
		}
		out = append(out, m.at(lambda, (a+b)/2, pos[i]))
	}
	if pos[len(g)-1] {
		out = append(out, m.full(lambda))
	}
	return out
}

// collapsed reports whether the stable state an empty replica settles in
// (low) or a collapsed one settles in (!low) is collapsed at load lambda.
func (m *lawModel) collapsed(lambda float64, low bool) bool {
	var pick *Equilibrium
	eq := m.equilibria(lambda)
	for i := range eq {
		if eq[i].Stable && (pick == nil || !low) {
			pick = &eq[i]
		}
	}
	return pick != nil && pick.Collapsed
}

// thresholds finds, by bisection over the load, where the state an empty
// replica settles in becomes collapsed (Collapse) and where the state a
// collapsed one settles in does (Recovery). Above the largest throughput
// the law reaches every state is collapsed.
func (m *lawModel) thresholds() Thresholds {
	most := 0.0
	for _, n := range m.grid {
		most = max(most, m.throughput(n))
	}
	find := func(low bool) float64 {
		lo, hi := 0.0, most*1.001+1e-9
		if m.collapsed(hi*1e-9, low) {
			return 0
		}
		for range 60 {
			mid := (lo + hi) / 2
			if m.collapsed(mid, low) {
				hi = mid
			} else {
				lo = mid
			}
			if hi-lo <= 1e-7*hi {
				break
			}
		}
		return (lo + hi) / 2
	}
	return Thresholds{Collapse: find(true), Recovery: find(false)}
}

// stepper integrates the replica's state over a ramp (see Ramp), from an
// empty replica. Each step of dt is cut into pieces no longer than a fifth
// of the shortest hold, for the explicit Euler scheme to be stable.
func (m *lawModel) stepper(dt float64) func(lambda float64) rampStep {
	n := 0.0
	pieces := max(1, int(math.Ceil(dt/(0.2*m.hold(1, 0)))))
	h := dt / float64(pieces)
	return func(lambda float64) rampStep {
		var st rampStep
		for range pieces {
			f := m.p.failed(m.timeoutFraction(n))
			st = rampStep{offered: lambda * m.p.amplification(lambda, f), fail: f}
			d := st.offered - m.throughput(n)
			if n >= m.top && d >= 0 {
				n = m.top
				var shed float64
				st.offered, shed = m.p.capState(lambda, m.throughput(m.top), m.servers(), f)
				st.fail = shed + (1-shed)*f
				st.shed = st.offered * shed
			} else {
				n = min(m.top, max(0, n+d*h))
			}
			st.queue = max(0, n-m.w)
		}
		return st
	}
}
