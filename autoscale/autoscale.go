// Package autoscale is the decision rule of a replica autoscaler, written
// once as a deterministic core: a real controller calls it with the metrics
// it reads, and stormguard's simulator calls it with the metrics of a
// simulated service, so a user can see before an incident whether their
// autoscaler saves them or sinks them.
//
// The rule is that of Kubernetes' Horizontal Pod Autoscaler (the
// autoscaling/v2 API with its behavior field), with Kubernetes' defaults.
// At every evaluation (every Interval [15s], the controller's sync period):
//
//  1. Replicas outside [Min, Max] are brought to the nearer bound at once,
//     without the steps below. At zero replicas the autoscaler does
//     nothing (Kubernetes: scaling is disabled while a target is at zero).
//  2. The metric proposes a count. ratio = observed / Target, observed
//     being the metric of the ready replicas (see [Observation]). No
//     change while |ratio − 1| ≤ Tolerance [0.1]. Otherwise the proposal is
//     ceil(ratio × ready). When the ratio is above 1 and some replicas are
//     not ready (starting, or not yet past their readiness delay), those
//     count as idle: the ratio becomes ratio × ready / replicas, and if
//     that is within the tolerance or below 1 nothing changes — the
//     replicas already coming are enough for the load measured.
//  3. Stabilization: the proposal is kept at least as high as every
//     proposal of the last ScaleDown.StabilizationWindow [300s] and at most
//     as high as every proposal of the last ScaleUp.StabilizationWindow
//     [0s]. The first evaluation counts the replicas it found as a
//     proposal, so with the defaults nothing scales down in the first
//     five minutes.
//  4. Rate policies: in each direction, each policy allows a change of
//     Value replicas (pods) or Value % of the replicas (percent) per Period,
//     counted from the replicas at the start of that period (the changes
//     made within the last Period taken back); SelectPolicy max takes the
//     policy that allows the largest change, min the smallest, disabled
//     forbids changes that way. Defaults: scale-up 4 replicas or 100 % per
//     15 s, whichever is more; scale-down 100 % per 15 s.
//  5. Clamped to [Min, Max].
//  6. Two bounds of this package's own, kept for older scenarios and off
//     by default: MaxStep bounds a change to that many replicas per
//     evaluation either way — the same as a pods policy of MaxStep per
//     Interval in both directions, applied after the rate policies, so the
//     tighter of the two wins — and Cooldown refuses any change within
//     that long of the last one (Kubernetes' "forbidden windows" before
//     version 1.12, which stabilization replaced).
//
// Sources (facts, in this package's words): Kubernetes'
// pkg/controller/podautoscaler (horizontal.go: stabilization, rate
// limits, bounds; replica_calculator.go: tolerance, ready and unready
// pods), pkg/apis/autoscaling/v2/defaults.go (the behavior defaults),
// pkg/apis/autoscaling/validation (stabilization ≤ 3600 s, periods in
// (0, 1800 s], values > 0, at least one policy), and the controller
// manager's defaults (sync period 15 s, tolerance 0.1, downscale
// stabilization 5 min, CPU initialization period 5 min).
//
// The metric matters as much as the rule. CPU utilisation is the busy time
// of the replicas' capacity: a tier whose workers wait on a downstream
// call is busy without using CPU, so a CPU-keyed autoscaler sees an idle
// tier while its requests time out (Slack, January 2021). In-flight
// concurrency and queue delay see that overload; the request rate sees
// the load, retries included.
//
// An Autoscaler holds its recent proposals and changes. Its methods never
// read the clock: now is an argument. It is not safe for concurrent use.
package autoscale

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Metric names what the autoscaler keeps at its target.
type Metric string

// The metrics.
const (
	// CPU: the busy fraction of a replica's capacity, in [0, 1].
	CPU Metric = "cpu"
	// Concurrency: attempts in service per replica (holding a worker,
	// busy or waiting on a call).
	Concurrency Metric = "concurrency"
	// QueueDelay: how long attempts waited in the queue before service,
	// seconds (the service's mean over the interval).
	QueueDelay Metric = "queue-delay"
	// Rate: attempts arriving per second per replica.
	Rate Metric = "rate"
)

// Policy is an autoscaler's configuration, as plain data. A zero field
// takes the default in brackets; a nil pointer too, so that an explicit
// zero (a stabilization window of 0s) can be told from a missing value.
type Policy struct {
	Metric Metric  `json:"metric" yaml:"metric"`
	Target float64 `json:"target" yaml:"target"` // the metric's value to keep, per replica (queue-delay: seconds)
	Min    int     `json:"min" yaml:"min"`       // replicas, at least 1 [1]
	Max    int     `json:"max" yaml:"max"`       // replicas, at least Min
	// Interval between evaluations [15s]; the metric is averaged over it.
	Interval time.Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	// UpDelay: how long a new replica takes to serve after it is asked
	// for [0]. The caller applies it; it is here so one value configures
	// the whole autoscaler.
	UpDelay time.Duration `json:"up_delay,omitempty" yaml:"up_delay,omitempty"`
	// Tolerance: no change while observed / target is within 1 ± this
	// [0.1]; a negative value means none.
	Tolerance float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"`
	// ReadinessDelay: with the cpu metric, a serving replica's sample
	// counts once it has served this long [Interval: one whole metric
	// window, as Kubernetes requires of a pod in its CPU initialization
	// period]; until then it is not ready (see [Policy.Counts]). Other
	// metrics count a replica as soon as it serves, as Kubernetes does
	// for pod metrics.
	ReadinessDelay *time.Duration `json:"readiness_delay,omitempty" yaml:"readiness_delay,omitempty"`
	// ScaleUp and ScaleDown: stabilization and rate policies, each way
	// (Kubernetes' behavior.scaleUp and behavior.scaleDown). A missing
	// field of either takes Kubernetes' default (see [Rules]).
	ScaleUp   *Rules `json:"scale_up,omitempty" yaml:"scale_up,omitempty"`
	ScaleDown *Rules `json:"scale_down,omitempty" yaml:"scale_down,omitempty"`
	// MaxStep bounds the replicas added or removed at one evaluation; 0:
	// no bound beyond the rate policies.
	MaxStep int `json:"max_step,omitempty" yaml:"max_step,omitempty"`
	// Cooldown: no change before this long after the last one [0].
	Cooldown time.Duration `json:"cooldown,omitempty" yaml:"cooldown,omitempty"`
}

// Defaults of the zero fields.
const (
	DefaultInterval  = 15 * time.Second
	DefaultTolerance = 0.1
	// MaxReplicas bounds Max.
	MaxReplicas = 100_000
)

// WithDefaults returns p with its zero fields set, ScaleUp and ScaleDown
// complete (copies: p's are not changed).
func (p Policy) WithDefaults() Policy {
	if p.Min == 0 {
		p.Min = 1
	}
	if p.Interval == 0 {
		p.Interval = DefaultInterval
	}
	if p.Tolerance == 0 {
		p.Tolerance = DefaultTolerance
	}
	if p.Tolerance < 0 {
		p.Tolerance = 0
	}
	if p.ReadinessDelay == nil {
		d := p.Interval
		p.ReadinessDelay = &d
	} else {
		d := *p.ReadinessDelay
		p.ReadinessDelay = &d
	}
	up, down := p.ScaleUp.withDefaults(defaultScaleUp()), p.ScaleDown.withDefaults(defaultScaleDown())
	p.ScaleUp, p.ScaleDown = &up, &down
	return p
}

// Counts reports whether the sample of a replica that has been serving
// for servedFor counts in the metric: with cpu, once it has served the
// readiness delay; with the other metrics, always.
func (p Policy) Counts(servedFor time.Duration) bool {
	if p.Metric != CPU {
		return true
	}
	d := p.Interval
	if d == 0 {
		d = DefaultInterval
	}
	if p.ReadinessDelay != nil {
		d = *p.ReadinessDelay
	}
	return servedFor >= d
}

// Validate reports a policy that cannot be used, naming the field.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Name: field, Msg: fmt.Sprintf(format, a...)})
	}
	switch p.Metric {
	case CPU:
		if !(p.Target > 0 && p.Target <= 1) {
			bad("target", "%v: a cpu target is a utilisation in (0, 1]", p.Target)
		}
	case Concurrency, QueueDelay, Rate:
		if !(p.Target > 0) || math.IsInf(p.Target, 0) {
			bad("target", "%v must be a finite number > 0", p.Target)
		}
	default:
		bad("metric", "%q is not one of cpu, concurrency, queue-delay, rate", p.Metric)
	}
	if p.Min < 0 || p.Max < max(1, p.Min) || p.Max > MaxReplicas {
		field := "max"
		if p.Min < 0 {
			field = "min"
		}
		bad(field, "min %d and max %d must satisfy 1 ≤ min ≤ max ≤ %d", p.Min, p.Max, MaxReplicas)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"interval", p.Interval}, {"up_delay", p.UpDelay}, {"cooldown", p.Cooldown}} {
		if d.v < 0 {
			bad(d.field, "%v must not be negative", d.v)
		}
	}
	if d := p.ReadinessDelay; d != nil && (*d < 0 || *d > maxWindow) {
		bad("readiness_delay", "%v is outside [0s, %v]", *d, maxWindow)
	}
	if p.MaxStep < 0 {
		bad("max_step", "%d is negative", p.MaxStep)
	}
	if math.IsNaN(p.Tolerance) || p.Tolerance >= 1 {
		bad("tolerance", "%v must be below 1", p.Tolerance)
	}
	errs = append(errs, p.ScaleUp.validate("scale_up")...)
	errs = append(errs, p.ScaleDown.validate("scale_down")...)
	return errors.Join(errs...)
}

// FieldError is a problem of one field of a Policy, named as in YAML and
// JSON (Name, dotted below the policy: "scale_down.policies.0.period"), so
// that a loader can point at its line.
type FieldError struct {
	Name string
	Msg  string
}

func (e *FieldError) Error() string { return "autoscale: " + e.Name + ": " + e.Msg }

// Field is the name of the field at fault.
func (e *FieldError) Field() string { return e.Name }

// Reason is what is wrong with it, without the field's name.
func (e *FieldError) Reason() string { return e.Msg }

// Autoscaler applies a Policy. Build one with [New].
type Autoscaler struct {
	p       Policy
	started bool          // the first evaluation has been made
	recs    []proposal    // the metric's proposals within the longest stabilization window
	ups     []change      // scale-ups within the longest rate period
	downs   []change      // scale-downs, likewise
	changed time.Time     // the last change (for the cooldown); zero: never
	window  time.Duration // the longest stabilization window
	period  time.Duration // the longest rate period
}

// proposal is a count the metric proposed at a time.
type proposal struct {
	at time.Time
	n  int
}

// change is a scaling event: n replicas added (ups) or removed (downs).
type change struct {
	at time.Time
	n  int
}

// New validates p and returns an Autoscaler for it, with its defaults.
func New(p Policy) (*Autoscaler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &Autoscaler{p: p.WithDefaults()}
	a.window = max(*a.p.ScaleUp.StabilizationWindow, *a.p.ScaleDown.StabilizationWindow)
	a.period = max(a.p.ScaleUp.longestPeriod(), a.p.ScaleDown.longestPeriod())
	return a, nil
}

// Policy returns the policy with its defaults filled in (a copy).
func (a *Autoscaler) Policy() Policy { return a.p.WithDefaults() }

// Observation is what the autoscaler reads at an evaluation.
type Observation struct {
	// Replicas the target runs: serving, starting or restarting, not those
	// being removed (Kubernetes' scale.spec.replicas).
	Replicas int
	// Ready: the replicas whose metric counts — serving and, with cpu,
	// past the readiness delay ([Policy.Counts]). The others (Replicas −
	// Ready) are not ready.
	Ready int
	// Value: the metric over the last interval — per replica, averaged
	// over the ready ones (cpu, concurrency, rate); for queue-delay the
	// service's mean wait. NaN or negative: no valid metric.
	Value float64
}

// Decision is what [Autoscaler.DecideAt] concluded.
type Decision struct {
	// Replicas wanted; equal to the observation's when nothing changes.
	Replicas int
	// Proposed: what the metric alone asked for (step 2), before
	// stabilization and limits; the observation's Replicas when it asked
	// nothing (within tolerance, no metric, out of bounds).
	Proposed int
	// Why, in a few words: "within tolerance", "stabilized", "scale up",
	// "scale-up limit", "cooling down"…
	Why string
}

// DecideAt returns how many replicas to run, given what was observed over
// the last interval. A change is recorded at now (for the rate policies
// and the cooldown), and so is the metric's proposal (for the
// stabilization windows); the caller carries the change out (a new
// replica serving UpDelay later). Calls must come in the order of now.
func (a *Autoscaler) DecideAt(now time.Time, o Observation) Decision {
	p := &a.p
	cur := max(o.Replicas, 0)
	if !a.started {
		// The count found is the first proposal (Kubernetes records the
		// current replicas at its first look at a target).
		a.started = true
		a.recs = append(a.recs, proposal{now, cur})
	}
	var d Decision
	switch {
	case cur == 0:
		return Decision{0, 0, "scaling disabled at zero replicas"}
	case cur > p.Max:
		d = Decision{p.Max, cur, "above max"}
	case cur < p.Min:
		d = Decision{p.Min, cur, "below min"}
	default:
		n, why, ok := a.propose(cur, o)
		if !ok {
			return Decision{cur, cur, why}
		}
		d = a.normalize(now, cur, n)
		switch {
		case d.Why != "":
		case why != "":
			d.Why = why
		case d.Replicas > cur:
			d.Why = "scale up"
		case d.Replicas < cur:
			d.Why = "scale down"
		default:
			d.Why = "no change"
		}
		if p.MaxStep > 0 && (d.Replicas > cur+p.MaxStep || d.Replicas < cur-p.MaxStep) {
			d.Replicas = min(max(d.Replicas, cur-p.MaxStep), cur+p.MaxStep)
			d.Why = "max step"
		}
	}
	if d.Replicas == cur {
		return d
	}
	if !a.changed.IsZero() && now.Sub(a.changed) < p.Cooldown {
		return Decision{cur, d.Proposed, "cooling down"}
	}
	a.changed = now
	a.record(now, cur, d.Replicas)
	return d
}

// propose is the metric's count (step 2): ok false when there is nothing
// to go by.
func (a *Autoscaler) propose(cur int, o Observation) (n int, why string, ok bool) {
	p := &a.p
	if math.IsNaN(o.Value) || math.IsInf(o.Value, 0) || o.Value < 0 {
		return cur, "no valid metric", false
	}
	ready := min(max(o.Ready, 0), cur)
	if ready == 0 {
		return cur, "no ready replica", false
	}
	ratio := o.Value / p.Target
	if ready < cur && ratio > 1 {
		// Scaling up with replicas not ready: they count as idle.
		r := ratio * float64(ready) / float64(cur)
		if r <= 1+p.Tolerance {
			return cur, "replicas coming are enough", true
		}
		return ceilCount(r * float64(cur)), "", true
	}
	if math.Abs(ratio-1) <= p.Tolerance {
		return cur, "within tolerance", true
	}
	return ceilCount(ratio * float64(ready)), "", true
}

// ceilCount is ceil(x) as a replica count, at most MaxReplicas.
func ceilCount(x float64) int {
	return int(min(math.Ceil(x), MaxReplicas))
}

// normalize applies the stabilization windows, the rate policies and the
// bounds to the proposal n (steps 3 to 5), and records n.
func (a *Autoscaler) normalize(now time.Time, cur, n int) Decision {
	p := &a.p
	// Stabilization: at most the lowest proposal of the scale-up window,
	// at least the highest of the scale-down window.
	lo, hi := n, n
	upCut, downCut := now.Add(-*p.ScaleUp.StabilizationWindow), now.Add(-*p.ScaleDown.StabilizationWindow)
	keep := a.recs[:0]
	for _, r := range a.recs {
		if r.at.After(upCut) {
			lo = min(lo, r.n)
		}
		if r.at.After(downCut) {
			hi = max(hi, r.n)
		}
		if r.at.After(now.Add(-a.window)) {
			keep = append(keep, r)
		}
	}
	a.recs = append(keep, proposal{now, n})
	want := min(max(cur, lo), hi)
	d := Decision{Replicas: want, Proposed: n}
	if want != n {
		d.Why = "stabilized"
	}
	// Rate policies and bounds.
	switch {
	case want > cur:
		limit := max(a.limit(now, p.ScaleUp, cur, true), cur)
		top := min(p.Max, limit)
		if want > top {
			d.Replicas = top
			d.Why = "at max"
			if limit < p.Max {
				d.Why = "scale-up limit"
			}
		}
	case want < cur:
		limit := min(a.limit(now, p.ScaleDown, cur, false), cur)
		bottom := max(p.Min, limit)
		if want < bottom {
			d.Replicas = bottom
			d.Why = "at min"
			if limit > p.Min {
				d.Why = "scale-down limit"
			}
		}
	}
	return d
}

// record notes a change from cur to n at now, and forgets the changes
// older than every rate period.
func (a *Autoscaler) record(now time.Time, cur, n int) {
	cut := now.Add(-a.period)
	prune := func(cs []change) []change {
		keep := cs[:0]
		for _, c := range cs {
			if c.at.After(cut) {
				keep = append(keep, c)
			}
		}
		return keep
	}
	a.ups, a.downs = prune(a.ups), prune(a.downs)
	if n > cur {
		a.ups = append(a.ups, change{now, n - cur})
	} else {
		a.downs = append(a.downs, change{now, cur - n})
	}
}
