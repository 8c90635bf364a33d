package breaker

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Mode says what opens a closed breaker.
type Mode string

// The modes. The empty Mode means [Consecutive].
const (
	// Consecutive opens after Failures failures in a row.
	Consecutive Mode = "consecutive"
	// Rate opens when, over a sliding window of time, at least MinCalls
	// calls ended and at least FailureRate of them failed.
	Rate Mode = "rate"
)

// Scope says what an open breaker stops.
type Scope string

// The scopes. The empty Scope means [StopsCalls].
const (
	// StopsCalls: an open breaker refuses every call, first tries and
	// retries alike, and closes through half-open probes. This is the
	// circuit breaker of Nygard's "Release It!" and of the libraries.
	StopsCalls Scope = "calls"
	// StopsRetries: an open breaker refuses retries only, as Brooker
	// proposed in "Fixing retries with token buckets and circuit
	// breakers" (2022): first tries go through whatever the failure rate,
	// so a partial failure costs the share that fails and no more, and
	// the outcomes of those first tries tell the breaker when to close.
	// It has no half-open state.
	StopsRetries Scope = "retries"
)

// Spec describes a breaker as plain data, so that scenario files, presets
// and production code share it. A zero field takes the default in brackets;
// only the fields of the chosen Mode are read. The zero Spec is a
// consecutive-failure breaker with the defaults.
type Spec struct {
	// Mode is consecutive or rate [consecutive].
	Mode Mode `json:"mode,omitempty" yaml:"mode,omitempty"`
	// Stops is what an open breaker refuses: calls (every attempt) or
	// retries (retries and hedges; first tries always go through)
	// [calls]. See [Breaker] for how each learns and closes.
	Stops Scope `json:"stops,omitempty" yaml:"stops,omitempty"`

	// Failures (consecutive mode): the failures in a row that open the
	// breaker, in [1, 1e6] [5].
	Failures int `json:"failures,omitempty" yaml:"failures,omitempty"`

	// FailureRate (rate mode): the fraction of the window's calls that
	// must have failed to open the breaker, in (0, 1] [0.5]. Kept to six
	// decimal places.
	FailureRate float64 `json:"failure_rate,omitempty" yaml:"failure_rate,omitempty"`
	// MinCalls (rate mode): the calls the window must hold before the
	// rate may open the breaker, in [1, 1e6] [20].
	MinCalls int `json:"min_calls,omitempty" yaml:"min_calls,omitempty"`
	// Window (rate mode): how far back calls count [10s]. At least one
	// nanosecond per bucket.
	Window time.Duration `json:"window,omitempty" yaml:"window,omitempty"`
	// Buckets (rate mode): the window is a ring of this many buckets,
	// each Window/Buckets long, in [1, 1000] [10].
	Buckets int `json:"buckets,omitempty" yaml:"buckets,omitempty"`

	// Delay is how long the breaker stays open before it lets probes
	// through (half-open), before jitter, > 0 [5s].
	Delay time.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	// Jitter spreads each open period uniformly over
	// Delay × [1 − Jitter, 1 + Jitter), so that the breakers of a fleet
	// that opened together do not probe together; in [0, 1) [0.2]. Set
	// it to 0 explicitly for no jitter.
	Jitter *float64 `json:"jitter,omitempty" yaml:"jitter,omitempty"`
	// Probes is the number of calls a half-open breaker lets through at
	// a time, in [1, 1e6] [1]. A breaker that stops retries has no
	// half-open state and does not read it.
	Probes int `json:"probes,omitempty" yaml:"probes,omitempty"`
	// Successes is the number of successful probes that close a
	// half-open breaker, in [1, 1e6] [Probes]. For a breaker that stops
	// retries in consecutive mode, the attempts in a row that must have
	// succeeded, at or after the end of the open period, to close it.
	Successes int `json:"successes,omitempty" yaml:"successes,omitempty"`
}

// Defaults for zero Spec fields.
const (
	DefaultFailures    = 5
	DefaultFailureRate = 0.5
	DefaultMinCalls    = 20
	DefaultWindow      = 10 * time.Second
	DefaultBuckets     = 10
	DefaultDelay       = 5 * time.Second
	DefaultJitter      = 0.2
	DefaultProbes      = 1
)

// Bounds of the counts in a Spec.
const (
	maxCount   = 1_000_000
	maxBuckets = 1000
)

// ErrInvalidSpec is wrapped by the errors of [Spec.Validate] and [New]; the
// message names the field by its configuration name.
var ErrInvalidSpec = errors.New("breaker: invalid spec")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s "+format, append([]any{ErrInvalidSpec, field}, args...)...)
}

// WithDefaults returns s with every zero field set to its default.
func (s Spec) WithDefaults() Spec {
	if s.Mode == "" {
		s.Mode = Consecutive
	}
	if s.Stops == "" {
		s.Stops = StopsCalls
	}
	if s.Failures == 0 {
		s.Failures = DefaultFailures
	}
	if s.FailureRate == 0 {
		s.FailureRate = DefaultFailureRate
	}
	if s.MinCalls == 0 {
		s.MinCalls = DefaultMinCalls
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.Buckets == 0 {
		s.Buckets = DefaultBuckets
	}
	if s.Delay == 0 {
		s.Delay = DefaultDelay
	}
	if s.Jitter == nil {
		j := DefaultJitter
		s.Jitter = &j
	}
	if s.Probes == 0 {
		s.Probes = DefaultProbes
	}
	if s.Successes == 0 {
		s.Successes = s.Probes
	}
	return s
}

// Validate reports every field of s that cannot be used, naming it.
func (s Spec) Validate() error {
	var errs []error
	switch s.Mode {
	case "", Consecutive, Rate:
	default:
		errs = append(errs, invalid("mode", "%q is unknown (want consecutive or rate)", string(s.Mode)))
	}
	switch s.Stops {
	case "", StopsCalls, StopsRetries:
	default:
		errs = append(errs, invalid("stops", "%q is unknown (want calls or retries)", string(s.Stops)))
	}
	count := func(name string, v int) {
		if v < 0 || v > maxCount {
			errs = append(errs, invalid(name, "%d is outside [1, %d]", v, maxCount))
		}
	}
	count("failures", s.Failures)
	count("min_calls", s.MinCalls)
	count("probes", s.Probes)
	count("successes", s.Successes)
	if !(s.FailureRate >= 0 && s.FailureRate <= 1) {
		errs = append(errs, invalid("failure_rate", "%v is outside (0, 1]", s.FailureRate))
	}
	if s.Buckets < 0 || s.Buckets > maxBuckets {
		errs = append(errs, invalid("buckets", "%d is outside [1, %d]", s.Buckets, maxBuckets))
	}
	if s.Window < 0 {
		errs = append(errs, invalid("window", "%v is negative", s.Window))
	} else if d := s.WithDefaults(); s.Buckets >= 0 && s.Buckets <= maxBuckets && d.Window < time.Duration(d.Buckets) {
		errs = append(errs, invalid("window", "%v is shorter than one nanosecond per bucket (%d buckets)", s.Window, d.Buckets))
	}
	if s.Delay < 0 {
		errs = append(errs, invalid("delay", "%v is negative", s.Delay))
	}
	if s.Jitter != nil && !(*s.Jitter >= 0 && *s.Jitter < 1) {
		errs = append(errs, invalid("jitter", "%v is outside [0, 1)", *s.Jitter))
	}
	return errors.Join(errs...)
}

func jitter(j float64) *float64 { return &j }

var presets = map[string]func() Spec{
	// failsafe: failsafe-go's circuitbreaker.NewWithDefaults: opens on one
	// failure, stays open 1 minute, no jitter, one probe whose success
	// closes it.
	"failsafe": func() Spec {
		return Spec{Mode: Consecutive, Failures: 1, Delay: time.Minute, Jitter: jitter(0), Probes: 1, Successes: 1}
	},
	// gobreaker: sony/gobreaker's defaults: opens when more than 5
	// failures come in a row (the 6th), open 60 s (Timeout), one probe
	// (MaxRequests) whose success closes it, no jitter.
	"gobreaker": func() Spec {
		return Spec{Mode: Consecutive, Failures: 6, Delay: 60 * time.Second, Jitter: jitter(0), Probes: 1, Successes: 1}
	},
	// rate: a failure-rate breaker of the shape resilience4j and Hystrix
	// made common: opens when half of at least 20 calls over the last
	// 10 s failed; open 5 s ± 20 %; 3 probes at a time, 3 successes close.
	"rate": func() Spec {
		return Spec{Mode: Rate, FailureRate: 0.5, MinCalls: 20, Window: 10 * time.Second, Buckets: 10,
			Delay: 5 * time.Second, Jitter: jitter(0.2), Probes: 3, Successes: 3}
	},
	// stormguard: the recommended breaker: consecutive failures, so that
	// the closed path needs no clock (5 in a row open it); open 5 s ± 20 %
	// so that a fleet does not probe in step; one probe at a time, 2
	// successes in a row close it.
	"stormguard": func() Spec {
		return Spec{Mode: Consecutive, Failures: 5, Delay: 5 * time.Second, Jitter: jitter(0.2), Probes: 1, Successes: 2}
	},
}

// Presets returns the names [Preset] accepts, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns a breaker shape by name: failsafe, gobreaker, rate or
// stormguard. Each is described where it is defined and in the package
// documentation.
func Preset(name string) (Spec, error) {
	f, ok := presets[name]
	if !ok {
		return Spec{}, fmt.Errorf("breaker: unknown preset %q (want one of %v)", name, Presets())
	}
	return f(), nil
}
