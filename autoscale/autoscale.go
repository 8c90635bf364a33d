// Package autoscale is the decision rule of a replica autoscaler, written
// once as a deterministic core: a real controller calls it with the metrics
// it reads, and stormguard's simulator calls it with the metrics of a
// simulated service, so a user can see before an incident whether their
// autoscaler saves them or sinks them.
//
// The rule is the proportional one of Kubernetes' Horizontal Pod
// Autoscaler, with the knobs that decide how it behaves in a storm:
//
//	desired = ceil(current × observed / target)
//
// where observed is the metric averaged over the last evaluation interval
// (per replica for cpu, concurrency and rate; the service's queue delay for
// queue-delay), then
//
//  1. no change while |observed / target − 1| ≤ Tolerance [0.1];
//  2. a change of at most MaxStep replicas at once, up or down [no bound];
//  3. clamped to [Min, Max];
//  4. no change before Cooldown has passed since the last change [0].
//
// The metric matters as much as the rule. CPU utilisation is the busy time
// of the replicas' capacity: a tier whose workers wait on a downstream
// call is busy without using CPU, so a CPU-keyed autoscaler sees an idle
// tier while its requests time out (Slack, January 2021). In-flight
// concurrency and queue delay see that overload; the request rate sees
// the load, retries included.
//
// An Autoscaler holds the time of its last change. Its methods never read
// the clock: now is an argument. It is not safe for concurrent use.
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
// takes the default in brackets.
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
	// Cooldown: no change before this long after the last one [0].
	Cooldown time.Duration `json:"cooldown,omitempty" yaml:"cooldown,omitempty"`
	// MaxStep bounds the replicas added or removed at once; 0: no bound.
	MaxStep int `json:"max_step,omitempty" yaml:"max_step,omitempty"`
	// Tolerance: no change while observed / target is within 1 ± this
	// [0.1]; a negative value means none.
	Tolerance float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"`
}

// Defaults of the zero fields.
const (
	DefaultInterval  = 15 * time.Second
	DefaultTolerance = 0.1
	// MaxReplicas bounds Max.
	MaxReplicas = 100_000
)

// WithDefaults returns p with its zero fields set.
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
	return p
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
	if p.MaxStep < 0 {
		bad("max_step", "%d is negative", p.MaxStep)
	}
	if math.IsNaN(p.Tolerance) || p.Tolerance >= 1 {
		bad("tolerance", "%v must be below 1", p.Tolerance)
	}
	return errors.Join(errs...)
}

// FieldError is a problem of one field of a Policy, named as in YAML and
// JSON (Name), so that a loader can point at its line.
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
	changed time.Time // the last change; zero: never
}

// New validates p and returns an Autoscaler for it, with its defaults.
func New(p Policy) (*Autoscaler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Autoscaler{p: p.WithDefaults()}, nil
}

// Policy returns the policy with its defaults filled in.
func (a *Autoscaler) Policy() Policy { return a.p }

// Decision is what [Autoscaler.DecideAt] concluded.
type Decision struct {
	// Replicas wanted; equal to current when nothing changes.
	Replicas int
	// Why, in a few words: "within tolerance", "cooling down", "scale up"…
	Why string
}

// DecideAt returns how many replicas to run, given the current count and
// the metric observed over the last interval. A change is recorded at now
// (for the cooldown); the caller carries it out (a new replica serving
// UpDelay later).
func (a *Autoscaler) DecideAt(now time.Time, current int, observed float64) Decision {
	p := &a.p
	current = max(current, 0)
	if math.IsNaN(observed) || observed < 0 {
		return Decision{current, "no valid metric"}
	}
	desired := current
	why := "within tolerance"
	ratio := observed / p.Target
	if math.Abs(ratio-1) > p.Tolerance {
		want := math.Ceil(float64(max(current, 1)) * ratio)
		desired = int(min(want, float64(MaxReplicas)))
		why = "proportional"
	}
	if p.MaxStep > 0 {
		desired = min(max(desired, current-p.MaxStep), current+p.MaxStep)
	}
	desired = min(max(desired, p.Min), p.Max)
	if desired == current {
		return Decision{current, why}
	}
	if !a.changed.IsZero() && now.Sub(a.changed) < p.Cooldown {
		return Decision{current, "cooling down"}
	}
	a.changed = now
	if desired > current {
		return Decision{desired, "scale up"}
	}
	return Decision{desired, "scale down"}
}
