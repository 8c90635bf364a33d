package budget

import (
	"errors"
	"fmt"
	"time"
)

// Kind names a budget implementation in configuration. The empty Kind means
// [KindNone]. Decoding a Kind from text (JSON, YAML) fails on a name not in
// [Kinds].
type Kind string

// The budget kinds.
const (
	KindNone        Kind = "none"         // no budget: retries are limited only by the attempt cap
	KindTokenBucket Kind = "token-bucket" // cost-based token bucket (AWS SDKs)
	KindTokenRatio  Kind = "token-ratio"  // gRPC retry throttling (gRFC A6)
	KindWindow      Kind = "window"       // retries ≤ ratio × requests + floor over a sliding window (SRE, Finagle, Linkerd, per-minute cap)
	KindConcurrency Kind = "concurrency"  // retries in flight ≤ max(percent × active, min) (Envoy)
)

// Kinds lists the valid kinds. Treat it as read-only.
var Kinds = []Kind{KindNone, KindTokenBucket, KindTokenRatio, KindWindow, KindConcurrency}

// ErrInvalidSpec is the error that [Spec.Validate], [Spec.New] and
// [Kind.UnmarshalText] wrap when configuration is invalid; the message names
// the field (by its configuration name) and the allowed values.
var ErrInvalidSpec = errors.New("budget: invalid spec")

// invalid returns ErrInvalidSpec wrapped with a message about field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s "+format, append([]any{ErrInvalidSpec, field}, args...)...)
}

// UnmarshalText sets k from its name, failing with an error that lists the
// valid kinds when the name is unknown. The empty name means [KindNone].
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
	case "", KindNone, KindTokenBucket, KindTokenRatio, KindWindow, KindConcurrency:
		return nil
	}
	return invalid("kind", "%q is unknown (want one of %v)", string(k), Kinds)
}

// Spec describes a budget as plain data, so that scenario files, presets and
// production code share it. Only the fields of the chosen Kind are read; a
// zero field takes the default of that kind, given in brackets.
//
// The zero Spec means no budget ([KindNone]). Use [Preset] for the budgets of
// real clients, [Spec.Validate] to check one read from a file and [Spec.New]
// to build it. A Spec is plain data: copy it and share it freely.
type Spec struct {
	Kind Kind `json:"kind" yaml:"kind"` // which budget; empty means none

	// Amounts of tokens keep three decimal places, ratios six.

	// token-bucket
	Capacity      float64 `json:"capacity,omitempty" yaml:"capacity,omitempty"`             // tokens, also the start level [500]
	RetryCost     float64 `json:"retry_cost,omitempty" yaml:"retry_cost,omitempty"`         // retry after a transient error [5]
	ThrottleCost  float64 `json:"throttle_cost,omitempty" yaml:"throttle_cost,omitempty"`   // retry after throttling [RetryCost]
	TimeoutCost   float64 `json:"timeout_cost,omitempty" yaml:"timeout_cost,omitempty"`     // retry after a timeout [RetryCost]
	SuccessReward float64 `json:"success_reward,omitempty" yaml:"success_reward,omitempty"` // earned by a first-try success [1]
	NoRefund      bool    `json:"no_refund,omitempty" yaml:"no_refund,omitempty"`           // a retry that succeeds keeps its cost

	// token-ratio
	MaxTokens  float64 `json:"max_tokens,omitempty" yaml:"max_tokens,omitempty"`   // in (0, 1000] [10]
	TokenRatio float64 `json:"token_ratio,omitempty" yaml:"token_ratio,omitempty"` // earned per success, > 0 [0.1]

	// window
	Window time.Duration `json:"window,omitempty" yaml:"window,omitempty"` // sliding window length [10s]
	Ratio  float64       `json:"ratio,omitempty" yaml:"ratio,omitempty"`   // retries allowed per request in the window, in [0, 1000] [0]
	Floor  float64       `json:"floor,omitempty" yaml:"floor,omitempty"`   // retries per second always allowed [0]; ratio or floor must be > 0

	// concurrency
	Percent        float64 `json:"percent,omitempty" yaml:"percent,omitempty"`                 // share of active attempts that may be retries, a fraction in [0, 1] [0.2]
	MinConcurrency int     `json:"min_concurrency,omitempty" yaml:"min_concurrency,omitempty"` // retries in flight always allowed [3]
}

// Presets lists the names [Preset] accepts. Treat it as read-only.
var Presets = []string{"none", "aws-standard", "aws-2026", "grpc", "sre", "finagle", "linkerd", "envoy", "per-minute"}

// Preset returns the budget of a real client by name:
//
//	none          no budget
//	aws-standard  token bucket 500; retry 5, timeout retry 10; +1 per first-try success; refund on retry success
//	aws-2026      token bucket 500; retry after transient error 14, after throttling 5; +1; refund
//	grpc          token ratio, maxTokens 10, tokenRatio 0.1
//	sre           retries ≤ 10 % of requests over 10 s
//	finagle       retries ≤ 20 % of requests over 10 s, plus 10 retries/s
//	linkerd       the same as finagle
//	envoy         retries in flight ≤ max(20 % of active attempts, 3)
//	per-minute    at most 60 retries in any minute (the SRE book's per-process cap)
func Preset(name string) (Spec, error) {
	switch name {
	case "none", "":
		return Spec{Kind: KindNone}, nil
	case "aws-standard":
		return Spec{Kind: KindTokenBucket, Capacity: 500, RetryCost: 5, ThrottleCost: 5, TimeoutCost: 10, SuccessReward: 1}, nil
	case "aws-2026":
		return Spec{Kind: KindTokenBucket, Capacity: 500, RetryCost: 14, ThrottleCost: 5, TimeoutCost: 14, SuccessReward: 1}, nil
	case "grpc":
		return Spec{Kind: KindTokenRatio, MaxTokens: 10, TokenRatio: 0.1}, nil
	case "sre":
		return Spec{Kind: KindWindow, Window: 10 * time.Second, Ratio: 0.1}, nil
	case "finagle", "linkerd":
		return Spec{Kind: KindWindow, Window: 10 * time.Second, Ratio: 0.2, Floor: 10}, nil
	case "envoy":
		return Spec{Kind: KindConcurrency, Percent: 0.2, MinConcurrency: 3}, nil
	case "per-minute":
		return Spec{Kind: KindWindow, Window: time.Minute, Floor: 1}, nil
	}
	return Spec{}, fmt.Errorf("budget: unknown preset %q (want one of %v)", name, Presets)
}

// Defaults for the zero fields of a Spec.
const (
	defaultCapacity       = 500
	defaultRetryCost      = 5
	defaultSuccessReward  = 1
	defaultMaxTokens      = 10
	defaultTokenRatio     = 0.1
	defaultWindow         = 10 * time.Second
	defaultPercent        = 0.2
	defaultMinConcurrency = 3
)

// WithDefaults returns s with the zero fields of its kind set to their
// defaults. Fields of other kinds are left alone.
func (s Spec) WithDefaults() Spec {
	switch s.Kind {
	case KindTokenBucket:
		s.Capacity = orDefault(s.Capacity, defaultCapacity)
		s.RetryCost = orDefault(s.RetryCost, defaultRetryCost)
		s.ThrottleCost = orDefault(s.ThrottleCost, s.RetryCost)
		s.TimeoutCost = orDefault(s.TimeoutCost, s.RetryCost)
		s.SuccessReward = orDefault(s.SuccessReward, defaultSuccessReward)
	case KindTokenRatio:
		s.MaxTokens = orDefault(s.MaxTokens, defaultMaxTokens)
		s.TokenRatio = orDefault(s.TokenRatio, defaultTokenRatio)
	case KindWindow:
		if s.Window == 0 {
			s.Window = defaultWindow
		}
	case KindConcurrency:
		s.Percent = orDefault(s.Percent, defaultPercent)
		if s.MinConcurrency == 0 {
			s.MinConcurrency = defaultMinConcurrency
		}
	}
	return s
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// Validate reports whether s describes a budget that [Spec.New] can build,
// after the zero fields of its kind take their defaults. The error wraps
// [ErrInvalidSpec] and names every invalid field by its configuration name,
// with the allowed range, for example
//
//	budget: invalid spec: max_tokens must be in (0, 1000] with at most 3 decimal places, got 2000
//
// The fields of other kinds are not looked at.
func (s Spec) Validate() error {
	if err := s.Kind.check(); err != nil {
		return err
	}
	s = s.WithDefaults()
	switch s.Kind {
	case KindTokenBucket:
		return checkTokenBucket(s.Capacity, s.RetryCost, s.ThrottleCost, s.TimeoutCost, s.SuccessReward)
	case KindTokenRatio:
		return checkTokenRatio(s.MaxTokens, s.TokenRatio)
	case KindWindow:
		return checkWindow(s.Window, s.Ratio, s.Floor)
	case KindConcurrency:
		return checkConcurrency(s.Percent, s.MinConcurrency)
	}
	return nil
}

// New validates s (see [Spec.Validate]) and builds a fresh budget of its kind,
// with the defaults for zero fields:
//
//	none, ""       Unlimited{}
//	token-bucket   *TokenBucket, full
//	token-ratio    *TokenRatio, full
//	window         *Window, empty
//	concurrency    *Concurrency, nothing in flight
//
// Every call returns a new budget with its own state: share one budget among
// the requests of a client, not one per request.
func (s Spec) New() (Budget, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.WithDefaults()
	switch s.Kind {
	case KindTokenBucket:
		return NewTokenBucket(s.Capacity, s.RetryCost, s.ThrottleCost, s.TimeoutCost, s.SuccessReward, !s.NoRefund), nil
	case KindTokenRatio:
		return NewTokenRatio(s.MaxTokens, s.TokenRatio), nil
	case KindWindow:
		return NewWindow(s.Window, s.Ratio, s.Floor), nil
	case KindConcurrency:
		return NewConcurrency(s.Percent, s.MinConcurrency), nil
	}
	return Unlimited{}, nil
}
