package analyze

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// Params describes one service and the clients that call it, for the fluid
// model (see docs/analyze.md, "The fluid model", for the equations). It is
// plain data; a zero field takes the default in brackets. [FluidParams]
// builds one from a scenario.
type Params struct {
	// Capacity μ: attempts per second the service completes while it has
	// work queued (workers ÷ mean service time × Replicas; with a Law,
	// derived from it).
	Capacity float64 `json:"capacity_per_s"`
	// ServiceTime s of one attempt on one worker [0].
	ServiceTime time.Duration `json:"service_time_ns"`
	// Timeout τ: the caller abandons an attempt with no answer after it.
	Timeout time.Duration `json:"timeout_ns"`
	// RoundTrip: network time there and back, part of every answer [0].
	RoundTrip time.Duration `json:"round_trip_ns,omitempty"`
	// Attempts k a request makes at most, the first try included [3].
	Attempts int `json:"attempts"`
	// RetryProbability p: a failed attempt is retried with this
	// probability (retry.Policy's retry_probability) [nil: always].
	RetryProbability *float64 `json:"retry_probability,omitempty"`
	// Budget bounds the retries of all requests together; nil means none.
	Budget *FluidBudget `json:"budget,omitempty"`
	// QueueCap: attempts that may wait, in all replicas' queues; beyond
	// it arrivals are shed [200000 × Replicas, the simulator's default].
	QueueCap float64 `json:"queue_cap"`
	// SlowdownQueue and SlowdownFactor: the service time is multiplied by
	// 1 + SlowdownFactor × min(1, q / SlowdownQueue) as the queue q grows,
	// as in the simulator [0: no slowdown].
	SlowdownQueue  float64 `json:"slowdown_queue,omitempty"`
	SlowdownFactor float64 `json:"slowdown_factor,omitempty"`

	// The simulator's mechanisms the model folds in (docs/analyze.md,
	// "Mechanisms in the fluid model").

	// Replicas R behind a balancer that splits the load evenly, each with
	// its share of Capacity and of QueueCap, its own queue and its own
	// workers [1].
	Replicas int `json:"replicas,omitempty"`
	// HitRate h of a look-aside cache with a fixed hit rate in front of
	// the service: h of the requests are answered by the cache, in time,
	// and never reach the service or the retrier [0: no cache].
	HitRate float64 `json:"hit_rate,omitempty"`
	// RefuseCost: the work each refusal by a full queue takes from the
	// replica's workers (cores, under processor sharing), as the
	// simulator's failure_cost.refuse; below ServiceTime [0].
	RefuseCost time.Duration `json:"refuse_cost_ns,omitempty"`
	// Law: how a replica's throughput depends on the attempts in service
	// (the simulator's capacity_law), with Workers the attempts one
	// replica holds in service at most [1]. With a Law the model's state
	// is the attempts present, in service and queued, and Capacity is
	// derived: the law's throughput with every worker busy, × Replicas.
	// nil: fixed workers, whose state is the queue.
	Law     *scenario.CapacityLaw `json:"capacity_law,omitempty"`
	Workers int                   `json:"workers,omitempty"`
	// ErrorRate e: an attempt the service answers in time fails anyway
	// with this probability (the simulator's error_rate: a transient error
	// the caller retries), so an attempt fails with probability
	// f + (1 − f) e, f the timeout fraction [0].
	ErrorRate float64 `json:"error_rate,omitempty"`
}

// FluidBudget is a retry budget in the fluid model: retries per second ≤
// Ratio × first tries per second + Floor.
type FluidBudget struct {
	Ratio float64 `json:"ratio"`
	Floor float64 `json:"floor_per_s,omitempty"`
}

// DefaultQueueCap is the queue capacity the simulator uses when a scenario
// gives none.
const DefaultQueueCap = 200000

// withDefaults returns p with zero fields set.
func (p Params) withDefaults() Params {
	if p.Attempts == 0 {
		p.Attempts = 3
	}
	if p.Replicas == 0 {
		p.Replicas = 1
	}
	if p.QueueCap == 0 {
		p.QueueCap = DefaultQueueCap * float64(p.Replicas)
	}
	if p.Law != nil {
		p.Workers = max(1, p.Workers)
		if p.lawValid() == nil {
			one := p.replica()
			m := newLawModel(one)
			p.Capacity = float64(p.Replicas) * m.throughput(m.w)
		}
	}
	return p
}

// replica returns the parameters of one replica behind the cache: its
// share of the capacity, the queue and the budget's floor, no replicas
// and no cache. It sees a load of λ × p.share().
func (p Params) replica() Params {
	r := float64(max(1, p.Replicas))
	p.Capacity /= r
	p.QueueCap /= r
	if b := p.Budget; b != nil {
		one := *b
		one.Floor /= r
		p.Budget = &one
	}
	p.Replicas, p.HitRate = 1, 0
	return p
}

// share is the part of the first tries one replica sees: the misses,
// split evenly.
func (p Params) share() float64 { return (1 - p.HitRate) / float64(max(1, p.Replicas)) }

// Validate reports parameters the model cannot use, naming the field.
func (p Params) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("fluid: "+format, a...)) }
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if p.Law == nil && (!(p.Capacity > 0) || !finite(p.Capacity)) {
		bad("capacity %v must be a finite number > 0", p.Capacity)
	}
	if p.ServiceTime < 0 || p.RoundTrip < 0 {
		bad("service time and round trip must not be negative")
	}
	if p.Timeout <= 0 {
		bad("timeout %v must be > 0", p.Timeout)
	}
	if p.Attempts < 0 || p.Attempts > 100 {
		bad("attempts %d is outside [1, 100]", p.Attempts)
	}
	if r := p.RetryProbability; r != nil && !(*r >= 0 && *r <= 1) {
		bad("retry probability %v is outside [0, 1]", *r)
	}
	if p.QueueCap < 0 || !finite(p.QueueCap) {
		bad("queue cap %v must be finite and ≥ 0", p.QueueCap)
	}
	if p.SlowdownQueue < 0 || p.SlowdownFactor < 0 || !finite(p.SlowdownFactor) || !finite(p.SlowdownQueue) {
		bad("slowdown must be finite and ≥ 0")
	}
	if b := p.Budget; b != nil && (b.Ratio < 0 || b.Floor < 0 || !finite(b.Ratio) || !finite(b.Floor)) {
		bad("budget ratio and floor must be finite and ≥ 0")
	}
	if p.Replicas < 0 || p.Replicas > 10_000 {
		bad("replicas %d is outside [1, 10000]", p.Replicas)
	}
	if !(p.ErrorRate >= 0 && p.ErrorRate <= 1) {
		bad("error rate %v is outside [0, 1]", p.ErrorRate)
	}
	if !(p.HitRate >= 0 && p.HitRate < 1) {
		bad("hit rate %v is outside [0, 1)", p.HitRate)
	}
	if p.RefuseCost < 0 || p.RefuseCost > 0 && p.RefuseCost >= p.ServiceTime {
		bad("refuse cost %v must be ≥ 0 and below the service time %v", p.RefuseCost, p.ServiceTime)
	}
	if p.Law != nil {
		if err := p.lawValid(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// slow is the service-time multiplier at queue q.
func (p Params) slow(q float64) float64 {
	if p.SlowdownFactor == 0 || p.SlowdownQueue == 0 {
		return 1
	}
	return 1 + p.SlowdownFactor*min(1, q/p.SlowdownQueue)
}

// mu is the capacity at queue q, attempts per second.
func (p Params) mu(q float64) float64 { return p.Capacity / p.slow(q) }

// logistic12 is the factor that makes a logistic curve with scale σ/1.702
// follow the normal distribution with standard deviation σ to within 0.01.
const logistic12 = 1.702

// TimeoutFraction is f(q): the fraction of the attempts that join a queue
// of q that time out before their answer reaches the caller. Such an
// attempt waits q / μ(q), is served in s(q) and travels RoundTrip; it
// times out when that exceeds Timeout. The number of attempts ahead of it
// spreads around the fluid level q like a Poisson count, with standard
// deviation √(q + 1), so the step is smoothed into a logistic curve:
//
//	m(q) = τ − RoundTrip − s(q) − q / μ(q)     (seconds of margin)
//	σ(q) = √(q + 1) / μ(q)
//	f(q) = 1 / (1 + exp(1.702 × m(q) / σ(q)))
func (p Params) TimeoutFraction(q float64) float64 {
	p = p.withDefaults()
	return p.timeoutFraction(q)
}

// failed is the probability that an attempt fails when a fraction f of
// them time out: f, or answered in time with an error (ErrorRate).
func (p Params) failed(f float64) float64 { return f + (1-f)*p.ErrorRate }

func (p Params) timeoutFraction(q float64) float64 {
	mu := p.mu(q)
	margin := p.Timeout.Seconds() - p.RoundTrip.Seconds() - p.ServiceTime.Seconds()*p.slow(q) - q/mu
	sigma := math.Sqrt(q+1) / mu
	return 1 / (1 + math.Exp(logistic12*margin/sigma))
}

// amplification is A: attempts per first try when each attempt fails with
// probability fail and a failed attempt is retried with probability r, at
// first-try rate lambda: 1 + rF + … + (rF)^(k−1), with the budget's
// retries ≤ Ratio × λ + Floor.
func (p Params) amplification(lambda, fail float64) float64 {
	if r := p.RetryProbability; r != nil {
		fail *= *r
	}
	g := 0.0
	term := 1.0
	for range p.Attempts {
		g += term
		term *= fail
	}
	if p.Budget == nil || lambda <= 0 {
		return g
	}
	return 1 + min(g-1, p.Budget.Ratio+p.Budget.Floor/lambda)
}

// loadFor returns the first-try rate λ at which λ × A(λ, fail) reaches
// offered. λ × A is the smaller of λ × g and λ(1 + r) + floor, both
// increasing in λ, so it reaches offered at the larger of their solutions.
func (p Params) loadFor(offered, fail float64) float64 {
	g := p.amplification(0, fail) // no budget at λ = 0
	l := offered / g
	if b := p.Budget; b != nil {
		l = max(l, (offered-b.Floor)/(1+b.Ratio))
	}
	return max(l, 0)
}

// Equilibrium is a fixed point of the fluid model at one load.
type Equilibrium struct {
	// Queue: attempts waiting, q.
	Queue float64 `json:"queue"`
	// Stable: small disturbances die out. The unstable equilibrium is
	// the tipping point: a backlog above it grows to the full queue.
	Stable bool `json:"stable"`
	// Healthy: goodput is at least 90 % of the load (the simulator's
	// recovery criterion).
	Healthy bool `json:"healthy"`
	// Offered: attempts per second arriving, first tries and retries.
	Offered float64 `json:"offered_per_s"`
	// TimedOut: f(q), the fraction of admitted attempts that time out.
	TimedOut float64 `json:"timed_out"`
	// Shed: the fraction of attempts rejected by the full queue.
	Shed float64 `json:"shed"`
	// Failed: F = Shed + (1 − Shed) × TimedOut, the fraction of attempts
	// that fail.
	Failed float64 `json:"failed"`
	// Goodput: requests per second answered while the caller waits,
	// Offered × (1 − Failed).
	Goodput float64 `json:"goodput_per_s"`
	// Latency of an admitted attempt: q / μ(q) + s(q) + RoundTrip.
	Latency time.Duration `json:"latency_ns"`
	// InService: attempts in service, with a capacity law (Params.Law).
	InService float64 `json:"in_service,omitempty"`
	// Collapsed: the failed state, where the queue is full and sheds, or
	// (with a capacity law) half or more of the attempts time out.
	Collapsed bool `json:"collapsed,omitempty"`
}

// equilibrium fills in the figures of a fixed point at queue q.
func (p Params) equilibrium(lambda, q, offered, shed float64, stable bool) Equilibrium {
	f := p.timeoutFraction(q)
	fail := shed + (1-shed)*p.failed(f)
	e := Equilibrium{Queue: q, Stable: stable, Offered: offered, TimedOut: f, Shed: shed, Failed: fail,
		Goodput: offered * (1 - fail)}
	e.Healthy = e.Goodput >= 0.9*lambda
	lat := q/p.mu(q) + p.ServiceTime.Seconds()*p.slow(q) + p.RoundTrip.Seconds()
	e.Latency = time.Duration(lat * float64(time.Second))
	return e
}

// atCap returns the offered load and the shed fraction when the queue is
// full at load lambda (see capState).
func (p Params) atCap(lambda float64) (offered, shed float64) {
	Q := p.QueueCap
	return p.capState(lambda, p.mu(Q), p.Capacity*p.ServiceTime.Seconds(), p.failed(p.timeoutFraction(Q)))
}

// capState returns the offered load and the shed fraction when the queue
// is full at load lambda: the queue admits what the service completes, the
// rest is shed and fails at once, and its retries join the offered load.
// mu is what the service completes when refusing costs nothing, f the
// timeout fraction at the full queue. Each refusal takes RefuseCost of one
// of servers (workers, or cores) from it. By work conservation the
// completions and the refusals share the servers' time,
// X / μ + (x − X) × κ = 1 with κ = RefuseCost / servers, so with x
// offered it completes
//
//	X = μ (1 − x κ) / (1 − μ κ)     (μ without a cost)
//
// It iterates x ← λ × A(σ + (1 − σ) f), σ = 1 − X(x)/x, from x = λ × A(f);
// the sequence rises and is bounded by λk, so it converges.
func (p Params) capState(lambda, mu, servers, f float64) (offered, shed float64) {
	kappa := 0.0
	if p.RefuseCost > 0 && servers > 0 {
		kappa = p.RefuseCost.Seconds() / servers
	}
	served := func(x float64) float64 {
		if kappa == 0 || x <= mu {
			return mu
		}
		return max(0, mu*(1-x*kappa)/(1-mu*kappa))
	}
	x := lambda * p.amplification(lambda, f)
	for range 200 {
		shed = max(0, 1-served(x)/x)
		next := lambda * p.amplification(lambda, shed+(1-shed)*f)
		if math.Abs(next-x) <= 1e-9*x {
			x = next
			break
		}
		x = next
	}
	return x, max(0, 1-served(x)/x)
}

// Equilibria returns the fixed points of the fluid model at a load of
// lambda first tries per second, by increasing queue:
//
//   - the empty queue, stable, when λ × A(f(0)) < μ(0);
//   - the tipping point, unstable, where λ × A(f(q)) = μ(q) inside
//     (0, QueueCap), when both the others exist;
//   - the full queue, stable, when λ × A(f(Q)) ≥ μ(Q): the collapsed
//     state, where the queue stays full and sheds.
//
// The drift λ × A(f(q)) − μ(q) rises with q (f rises, μ falls), so there
// is at most one point of each kind. With a capacity law the state is the
// attempts present and there may be more (see docs/analyze.md). Replicas
// each take their share of the misses of the cache; the figures are the
// whole service's, and goodput includes the cache's hits. Invalid
// parameters give nil.
func Equilibria(p Params, lambda float64) []Equilibrium {
	p = p.withDefaults()
	if p.Validate() != nil || lambda < 0 {
		return nil
	}
	one := p.replica()
	var eq []Equilibrium
	if one.Law != nil {
		eq = newLawModel(one).equilibria(lambda * p.share())
	} else {
		eq = one.equilibria(lambda * p.share())
	}
	return p.whole(eq, lambda)
}

// whole turns one replica's equilibria at its share of load lambda into
// the service's: R times the queue and the rates, and the cache's hits
// answered besides.
func (p Params) whole(eq []Equilibrium, lambda float64) []Equilibrium {
	r := float64(p.Replicas)
	for i := range eq {
		e := &eq[i]
		e.Queue *= r
		e.InService *= r
		e.Offered *= r
		e.Goodput = e.Goodput*r + lambda*p.HitRate
		e.Healthy = e.Goodput >= 0.9*lambda
	}
	return eq
}

// equilibria are the fixed points of one replica without a cache or a
// capacity law (see Equilibria).
func (p Params) equilibria(lambda float64) []Equilibrium {
	Q := p.QueueCap
	drift := func(q float64) float64 {
		return lambda*p.amplification(lambda, p.failed(p.timeoutFraction(q))) - p.mu(q)
	}
	var out []Equilibrium
	low, high := drift(0) < 0, drift(Q) >= 0
	if low {
		off := lambda * p.amplification(lambda, p.failed(p.timeoutFraction(0)))
		out = append(out, p.equilibrium(lambda, 0, off, 0, true))
	}
	if low && high && Q > 0 {
		a, b := 0.0, Q
		for range 200 {
			m := (a + b) / 2
			if drift(m) < 0 {
				a = m
			} else {
				b = m
			}
			if b-a <= 1e-9*max(1, b) {
				break
			}
		}
		q := (a + b) / 2
		out = append(out, p.equilibrium(lambda, q, p.mu(q), 0, false))
	}
	if high {
		off, shed := p.atCap(lambda)
		e := p.equilibrium(lambda, Q, off, shed, true)
		e.Collapsed = true
		out = append(out, e)
	}
	return out
}

// Thresholds are the loads, in first tries per second, where the
// equilibria appear and vanish.
type Thresholds struct {
	// Collapse: above it the empty-queue equilibrium is gone; the system
	// collapses without any trigger.
	Collapse float64 `json:"collapse_per_s"`
	// Recovery: below it the collapsed equilibrium is gone; a collapsed
	// system recovers by itself.
	Recovery float64 `json:"recovery_per_s"`
}

// StaticThresholds returns the quasi-static thresholds of the model:
//
//	Collapse = the λ where λ × A(f(0)) = μ(0)
//	Recovery = the λ where λ × A(f(Q)) = μ(Q)
//
// Without a budget A(F) = 1 + F + … + F^(k−1), so Collapse ≈ μ and
// Recovery ≈ μ / k when a full queue makes every attempt time out.
//
// With a capacity law they are found numerically (see docs/analyze.md):
// Collapse is the load from which the state an empty service settles in is
// collapsed, Recovery the load from which the state a collapsed one
// settles in still is. Both are first tries per second of the whole
// service, its cache's hits included: one replica's thresholds × R ÷ (1 − h).
func StaticThresholds(p Params) (Thresholds, error) {
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		return Thresholds{}, err
	}
	one := p.replica()
	var th Thresholds
	if one.Law != nil {
		th = newLawModel(one).thresholds()
	} else {
		Q := one.QueueCap
		th = Thresholds{
			Collapse: one.loadFor(one.mu(0), one.failed(one.timeoutFraction(0))),
			Recovery: one.loadFor(one.mu(Q), one.failed(one.timeoutFraction(Q))),
		}
	}
	th.Collapse /= p.share()
	th.Recovery /= p.share()
	return th, nil
}

// Region classifies a load by the equilibria that exist there.
type Region uint8

// The regions, by increasing load.
const (
	// Stable: only the healthy equilibrium; any disturbance dies out.
	Stable Region = iota
	// Vulnerable: healthy now, but a collapsed equilibrium exists too: a
	// trigger that builds a backlog above the tipping point leaves the
	// system collapsed after the trigger ends (a metastable failure).
	Vulnerable
	// Metastable: only the collapsed equilibrium; the system fails by
	// itself and, with retries, stays failed until the load falls below
	// the recovery threshold. Without retries (k = 1) the recovery and
	// collapse thresholds coincide and this is plain overload.
	Metastable
)

var regionNames = [...]string{"stable", "vulnerable", "metastable"}

// String returns the region's name.
func (r Region) String() string {
	if int(r) < len(regionNames) {
		return regionNames[r]
	}
	return fmt.Sprintf("analyze.Region(%d)", uint8(r))
}

// MarshalText implements encoding.TextMarshaler.
func (r Region) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Region) UnmarshalText(b []byte) error {
	for i, n := range regionNames {
		if string(b) == n {
			*r = Region(i)
			return nil
		}
	}
	return fmt.Errorf("analyze: unknown region %q (want stable, vulnerable or metastable)", b)
}

// Classify returns the region of a load of lambda first tries per second:
// Stable below the recovery threshold, Vulnerable from it up to the
// collapse threshold, Metastable from there on.
func (t Thresholds) Classify(lambda float64) Region {
	switch {
	case lambda < t.Recovery:
		return Stable
	case lambda < t.Collapse:
		return Vulnerable
	}
	return Metastable
}

// ScanPoint is one load of a [Scan].
type ScanPoint struct {
	Load       float64       `json:"load_per_s"`
	Region     Region        `json:"region"`
	Equilibria []Equilibrium `json:"equilibria"`
}

// Scan returns the equilibria and the region at every load in loads.
func Scan(p Params, loads []float64) ([]ScanPoint, error) {
	th, err := StaticThresholds(p)
	if err != nil {
		return nil, err
	}
	out := make([]ScanPoint, len(loads))
	for i, l := range loads {
		out[i] = ScanPoint{Load: l, Region: th.Classify(l), Equilibria: Equilibria(p, l)}
	}
	return out, nil
}
