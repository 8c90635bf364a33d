// Package backoff computes how long to wait before a retry.
//
// A [Policy] is plain data: it has no state, allocates nothing and is safe to
// share between any number of goroutines or simulated clients. The random
// sample is passed in by the caller (u, uniform in [0, 1)), so the same policy
// gives the same delays in production, where u comes from a fast runtime
// source, and in the simulator, where u comes from a seeded per-client stream.
//
// Retries are numbered from 1: n = 1 is the wait before the first retry
// (the second attempt). With Base = 1 s and no jitter, exponential backoff
// waits 1, 2, 4, 8 s before retries 1..4.
//
//	kind                 delay before retry n (w = min(Cap, Base × Multiplier^(n−1)))
//	none                 0
//	constant             min(Cap, Base)
//	exponential          w
//	full-jitter          u × w                       (mean w/2)
//	equal-jitter         w/2 + u × w/2               (mean 3w/4)
//	decorrelated-jitter  min(Cap, Base + u × (3 × prev − Base)), prev = Base before retry 1
//	proportional         min(Cap, w × (1 + Jitter × (2u − 1)))  (gRPC style, ±Jitter)
//
// Every strategy is capped by Cap.
package backoff

import (
	"fmt"
	"math"
	"time"
)

// Kind names a backoff strategy. The zero Kind is [None].
type Kind uint8

// The strategies. Their text names (used in YAML, JSON and flags) are given
// in the package documentation.
const (
	None Kind = iota
	Constant
	Exponential
	FullJitter
	EqualJitter
	DecorrelatedJitter
	Proportional
)

var kindNames = [...]string{
	None:               "none",
	Constant:           "constant",
	Exponential:        "exponential",
	FullJitter:         "full-jitter",
	EqualJitter:        "equal-jitter",
	DecorrelatedJitter: "decorrelated-jitter",
	Proportional:       "proportional",
}

// String returns the kind's text name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("backoff.Kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= len(kindNames) {
		return nil, fmt.Errorf("backoff: unknown kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	got, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = got
	return nil
}

// ParseKind returns the kind with the given text name.
func ParseKind(s string) (Kind, error) {
	for i, name := range kindNames {
		if s == name {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("backoff: unknown kind %q (want one of none, constant, exponential, full-jitter, equal-jitter, decorrelated-jitter, proportional)", s)
}

// Defaults applied to zero fields of a [Policy].
const (
	DefaultBase       = 50 * time.Millisecond
	DefaultCap        = 20 * time.Second
	DefaultMultiplier = 2.0
	DefaultJitter     = 0.2
)

// Policy is a backoff strategy and its parameters. A zero field takes the
// documented default (DefaultBase, DefaultCap, DefaultMultiplier,
// DefaultJitter); the zero Policy never waits.
type Policy struct {
	Kind       Kind          `json:"kind" yaml:"kind"`
	Base       time.Duration `json:"base,omitempty" yaml:"base,omitempty"`             // first window; default 50 ms
	Cap        time.Duration `json:"cap,omitempty" yaml:"cap,omitempty"`               // upper bound on every delay; default 20 s
	Multiplier float64       `json:"multiplier,omitempty" yaml:"multiplier,omitempty"` // growth per retry; default 2
	Jitter     float64       `json:"jitter,omitempty" yaml:"jitter,omitempty"`         // proportional only: ± fraction; default 0.2
}

// Validate reports a policy that cannot be used.
func (p Policy) Validate() error {
	switch {
	case int(p.Kind) >= len(kindNames):
		return fmt.Errorf("backoff: unknown kind %d", uint8(p.Kind))
	case p.Base < 0:
		return fmt.Errorf("backoff: base %v is negative", p.Base)
	case p.Cap < 0:
		return fmt.Errorf("backoff: cap %v is negative", p.Cap)
	case p.Multiplier < 0 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0):
		return fmt.Errorf("backoff: multiplier %v is not a finite non-negative number", p.Multiplier)
	case p.Multiplier != 0 && p.Multiplier < 1:
		return fmt.Errorf("backoff: multiplier %v is below 1", p.Multiplier)
	case p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter):
		return fmt.Errorf("backoff: jitter %v is outside [0, 1]", p.Jitter)
	}
	return nil
}

// WithDefaults returns p with every zero field set to its default.
func (p Policy) WithDefaults() Policy {
	if p.Base == 0 {
		p.Base = DefaultBase
	}
	if p.Cap == 0 {
		p.Cap = DefaultCap
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultMultiplier
	}
	if p.Jitter == 0 {
		p.Jitter = DefaultJitter
	}
	return p
}

// Random reports whether Delay reads its sample u: true for the jittered
// kinds (full-jitter, equal-jitter, decorrelated-jitter, proportional),
// false for none, constant and exponential, whose delays do not depend on
// it. A caller whose u costs something (a simulator's draw from a seeded
// stream) may skip it when false.
func (p Policy) Random() bool {
	switch p.Kind {
	case None, Constant, Exponential:
		return false
	}
	return true
}

// Window returns w = min(Cap, Base × Multiplier^(n−1)), the un-jittered
// exponential delay before retry n (n ≥ 1; n < 1 is treated as 1).
func (p Policy) Window(n int) time.Duration {
	p = p.WithDefaults()
	return window(p, n)
}

func window(p Policy, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	if p.Base >= p.Cap {
		return p.Cap
	}
	// Float arithmetic cannot overflow; the comparison clamps before converting.
	w := float64(p.Base) * math.Pow(p.Multiplier, float64(n-1))
	if w >= float64(p.Cap) || math.IsNaN(w) {
		return p.Cap
	}
	return time.Duration(w)
}

// Delay returns the wait before retry n (n = 1 for the first retry). prev is
// the delay this method returned for the previous retry of the same request
// (0 before the first); only decorrelated jitter uses it. u is a uniform
// sample in [0, 1); values outside are clamped into it. The result lies in
// [0, Cap].
func (p Policy) Delay(n int, prev time.Duration, u float64) time.Duration {
	if p.Kind == None {
		return 0
	}
	p = p.WithDefaults()
	if !(u >= 0) { // also catches NaN
		u = 0
	} else if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	switch p.Kind {
	case Constant:
		return min(p.Base, p.Cap)
	case Exponential:
		return window(p, n)
	case FullJitter:
		return time.Duration(u * float64(window(p, n)))
	case EqualJitter:
		w := window(p, n)
		half := w / 2
		return half + time.Duration(u*float64(w-half))
	case DecorrelatedJitter:
		if prev < p.Base {
			prev = p.Base
		}
		hi := 3 * float64(prev)
		d := float64(p.Base) + u*(hi-float64(p.Base))
		if d >= float64(p.Cap) {
			return p.Cap
		}
		return time.Duration(d)
	case Proportional:
		d := float64(window(p, n)) * (1 + p.Jitter*(2*u-1))
		if d >= float64(p.Cap) {
			return p.Cap
		}
		return time.Duration(d)
	}
	return 0
}
