package limit

import (
	"errors"
	"fmt"
)

// Kind names an algorithm in configuration. The empty Kind means
// [KindVegas], the default of Netflix's library. Decoding a Kind from text
// (JSON, YAML) fails on a name not in [Kinds].
type Kind string

// The algorithm kinds.
const (
	KindFixed     Kind = "fixed"     // Fixed: a constant limit
	KindAIMD      Kind = "aimd"      // AIMD: additive increase, multiplicative decrease
	KindVegas     Kind = "vegas"     // Vegas: queue estimate from the minimum RTT
	KindGradient2 Kind = "gradient2" // Gradient2: long-term vs current RTT
)

// Kinds lists the valid kinds. Treat it as read-only.
var Kinds = []Kind{KindFixed, KindAIMD, KindVegas, KindGradient2}

// ErrInvalidConfig is the error that [Spec.New], [Spec.Validate], the
// Validate methods of the configs, the New… constructors and
// [Kind.UnmarshalText] wrap when configuration is invalid; the message names
// the field by its configuration name, with the allowed values.
var ErrInvalidConfig = errors.New("limit: invalid config")

// invalid returns ErrInvalidConfig wrapped with a message about field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s "+format, append([]any{ErrInvalidConfig, field}, args...)...)
}

// UnmarshalText sets k from its name, failing with an error that lists the
// valid kinds when the name is unknown. The empty name means [KindVegas].
func (k *Kind) UnmarshalText(text []byte) error {
	v := Kind(text)
	if err := v.check(); err != nil {
		return err
	}
	*k = v
	return nil
}

// check reports whether k is a known kind (or empty).
func (k Kind) check() error {
	switch k {
	case "", KindFixed, KindAIMD, KindVegas, KindGradient2:
		return nil
	}
	return invalid("kind", "%q is unknown (want one of %v)", string(k), Kinds)
}

// Spec describes a concurrency-limit algorithm as plain data, so that
// scenario files, presets and production code share it, for example in YAML
//
//	kind: gradient2
//	gradient2: {min: 1, max: 100}
//
// Only the field of the chosen Kind is read: Limit for "fixed", AIMD for
// "aimd", and so on; its zero fields take their defaults. The zero Spec is
// Vegas with Netflix's defaults. A Spec is plain data: copy it and share it
// freely.
type Spec struct {
	Kind      Kind            `json:"kind" yaml:"kind"`                              // which algorithm; empty means vegas
	Limit     int             `json:"limit,omitempty" yaml:"limit,omitempty"`        // fixed: the limit, in [1, 2³⁰] (required)
	AIMD      AIMDConfig      `json:"aimd,omitzero" yaml:"aimd,omitempty"`           // aimd
	Vegas     VegasConfig     `json:"vegas,omitzero" yaml:"vegas,omitempty"`         // vegas
	Gradient2 Gradient2Config `json:"gradient2,omitzero" yaml:"gradient2,omitempty"` // gradient2
}

// Validate reports whether s describes an algorithm that [Spec.New] can
// build. The error wraps [ErrInvalidConfig] and names every invalid field,
// for example
//
//	limit: invalid config: backoff_ratio must be in (0, 1), got 1.5
//
// The fields of other kinds are not looked at.
func (s Spec) Validate() error {
	if err := s.Kind.check(); err != nil {
		return err
	}
	switch s.Kind {
	case KindFixed:
		if s.Limit < 1 || s.Limit > maxLimit {
			return invalid("limit", "must be in [1, %d] for kind %q, got %d", maxLimit, KindFixed, s.Limit)
		}
		return nil
	case KindAIMD:
		return s.AIMD.Validate()
	case KindGradient2:
		return s.Gradient2.Validate()
	}
	return s.Vegas.Validate()
}

// New validates s (see [Spec.Validate]) and builds a fresh algorithm of its
// kind at its initial limit:
//
//	fixed          Fixed
//	aimd           *AIMD
//	vegas, ""      *Vegas
//	gradient2      *Gradient2
//
// Every call returns a new algorithm with its own state: one per server (or
// per simulated server), wrapped in a [Limiter] where it is shared by
// goroutines.
func (s Spec) New() (Algorithm, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch s.Kind {
	case KindFixed:
		return Fixed{N: s.Limit}, nil
	case KindAIMD:
		return NewAIMD(s.AIMD)
	case KindGradient2:
		return NewGradient2(s.Gradient2)
	}
	return NewVegas(s.Vegas)
}

// maxLimit bounds every limit, so that the arithmetic on limits cannot
// overflow.
const maxLimit = 1 << 30

// checkBounds reports invalid initial, min and max limits.
func checkBounds(initial, lo, hi int) error {
	var errs []error
	if lo < 1 {
		errs = append(errs, invalid("min", "must be at least 1, got %d", lo))
	}
	if hi < lo {
		errs = append(errs, invalid("max", "must be at least min (%d), got %d", lo, hi))
	}
	if hi > maxLimit {
		errs = append(errs, invalid("max", "must be at most %d, got %d", maxLimit, hi))
	}
	if initial < lo || initial > hi {
		errs = append(errs, invalid("initial", "must be in [min, max] = [%d, %d], got %d", lo, hi, initial))
	}
	return errors.Join(errs...)
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}
