package retry

import (
	"fmt"
	"sort"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
)

// Policy is a retry policy as plain data: scenario files, presets and
// production code share it. A zero field takes the default in brackets.
//
// A Policy is only configuration; [New] builds the [Retrier] that applies it
// and holds its state (the budget, the learned attempt time).
type Policy struct {
	// MaxAttempts bounds the attempts of one request, the first try
	// included; 1 means never retry [3].
	MaxAttempts int `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`
	// Backoff is the wait before a retry of a transient error or timeout.
	Backoff backoff.Policy `json:"backoff" yaml:"backoff"`
	// ThrottleBackoff is the wait before a retry of a throttling error
	// [Backoff].
	ThrottleBackoff *backoff.Policy `json:"throttle_backoff,omitempty" yaml:"throttle_backoff,omitempty"`
	// Budget bounds the retries of all requests together [none].
	Budget budget.Spec `json:"budget" yaml:"budget"`
	// Pushback says how server hints (Retry-After …) are honoured.
	Pushback Pushback `json:"pushback" yaml:"pushback"`
	// IgnoreSignals makes the retrier deaf to the overload and
	// retries-exhausted signals, as clients that predate them are. Only
	// presets that model such clients set it. It does not silence a bad
	// pushback hint: see [Pushback].
	IgnoreSignals bool `json:"ignore_signals,omitempty" yaml:"ignore_signals,omitempty"`
	// AttemptTimeout bounds each attempt; 0 means only the caller's
	// deadline bounds it [0].
	AttemptTimeout time.Duration `json:"attempt_timeout,omitempty" yaml:"attempt_timeout,omitempty"`
	// MinAttemptTime: a retry is not started unless the caller's deadline
	// leaves at least delay + MinAttemptTime [0].
	MinAttemptTime time.Duration `json:"min_attempt_time,omitempty" yaml:"min_attempt_time,omitempty"`
	// RetryProbability, when set, retries a failed attempt that every other
	// rule would retry only with this probability, in [0, 1] (clients
	// that retry only some of their failures); a declined retry gives up
	// with ErrRetryDeclined and costs no budget [nil: always].
	RetryProbability *float64 `json:"retry_probability,omitempty" yaml:"retry_probability,omitempty"`
	// LearnAttemptTime raises MinAttemptTime to a moving average of
	// observed successful attempt latencies. It costs two clock reads per
	// attempt, and only when the caller's context has a deadline.
	LearnAttemptTime bool `json:"learn_attempt_time,omitempty" yaml:"learn_attempt_time,omitempty"`
	// Hedge, when set with MaxAttempts above 1, makes the shells (httpx,
	// grpcx) hedge the requests they can (idempotent HTTP requests with a
	// replayable body; unary gRPC calls) instead of retrying them; see
	// [HedgePolicy]. gRFC A6: a call is retried or hedged, never both [nil].
	Hedge *HedgePolicy `json:"hedge,omitempty" yaml:"hedge,omitempty"`
}

// Pushback says how a server's requested delay moves the computed backoff.
// The hint is clamped into [backoff, backoff + MaxExtra] and never past Max;
// the sum saturates, so a MaxExtra as large as a Duration holds means no
// bound but Max. A malformed, negative or repeated hint ([Signal].BadPushback)
// means "do not retry" (gRFC A6) unless Ignore is set, whatever
// [Policy].IgnoreSignals says.
type Pushback struct {
	// Ignore drops every hint (clients that predate them).
	Ignore bool `json:"ignore,omitempty" yaml:"ignore,omitempty"`
	// MaxExtra is how far past the computed backoff a hint may push [5s].
	MaxExtra time.Duration `json:"max_extra,omitempty" yaml:"max_extra,omitempty"`
	// Max is the hard upper bound on any delay a hint produces [1m].
	Max time.Duration `json:"max,omitempty" yaml:"max,omitempty"`
}

// Defaults for zero Policy fields.
const (
	DefaultMaxAttempts      = 3
	DefaultPushbackMaxExtra = 5 * time.Second
	DefaultPushbackMax      = time.Minute
	// MaxAttemptsLimit bounds MaxAttempts; more is a storm generator, not a policy.
	MaxAttemptsLimit = 100
)

// WithDefaults returns p with every zero field set to its default.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Budget.Kind == "" {
		p.Budget.Kind = budget.KindNone
	}
	if p.Pushback.MaxExtra == 0 {
		p.Pushback.MaxExtra = DefaultPushbackMaxExtra
	}
	if p.Pushback.Max == 0 {
		p.Pushback.Max = DefaultPushbackMax
	}
	if p.Hedge != nil {
		h := *p.Hedge // never write through the caller's pointer
		if h.MaxAttempts == 0 {
			h.MaxAttempts = DefaultHedgeAttempts
		}
		p.Hedge = &h
	}
	return p
}

// Validate reports a policy that cannot be used, naming the field.
func (p Policy) Validate() error {
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxAttemptsLimit {
		return fmt.Errorf("retry: max_attempts %d is outside [1, %d]", p.MaxAttempts, MaxAttemptsLimit)
	}
	if err := p.Backoff.Validate(); err != nil {
		return fmt.Errorf("retry: backoff: %w", err)
	}
	if p.ThrottleBackoff != nil {
		if err := p.ThrottleBackoff.Validate(); err != nil {
			return fmt.Errorf("retry: throttle_backoff: %w", err)
		}
	}
	if err := p.Budget.Validate(); err != nil {
		return fmt.Errorf("retry: budget: %w", err)
	}
	if p.Hedge != nil {
		if err := p.Hedge.Validate(); err != nil {
			return err
		}
	}
	switch {
	case p.Pushback.MaxExtra < 0:
		return fmt.Errorf("retry: pushback.max_extra %v is negative", p.Pushback.MaxExtra)
	case p.Pushback.Max < 0:
		return fmt.Errorf("retry: pushback.max %v is negative", p.Pushback.Max)
	case p.AttemptTimeout < 0:
		return fmt.Errorf("retry: attempt_timeout %v is negative", p.AttemptTimeout)
	case p.MinAttemptTime < 0:
		return fmt.Errorf("retry: min_attempt_time %v is negative", p.MinAttemptTime)
	case p.RetryProbability != nil && !(*p.RetryProbability >= 0 && *p.RetryProbability <= 1):
		return fmt.Errorf("retry: retry_probability %v is outside [0, 1]", *p.RetryProbability)
	}
	return nil
}

var presets = map[string]func() Policy{
	// naive: what a quick hand-written loop does. Budget: none; nothing
	// bounds the retries but the attempt cap (up to 2 per request).
	"naive": func() Policy {
		return Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.None},
			Budget: budget.Spec{Kind: budget.KindNone}, Pushback: Pushback{Ignore: true}, IgnoreSignals: true}
	},
	// aws-legacy: the v1 SDKs' default retryer: 4 attempts (3 retries),
	// delay 2^(n−1) × U[30 ms, 60 ms) (equal jitter over a 60 ms window;
	// throttling U[500 ms, 1 s)), capped at 300 s, no quota. Budget: none;
	// nothing bounds the retries but the attempt cap (up to 3 per request).
	"aws-legacy": func() Policy {
		return Policy{MaxAttempts: 4,
			Backoff:         backoff.Policy{Kind: backoff.EqualJitter, Base: 60 * time.Millisecond, Cap: 300 * time.Second},
			ThrottleBackoff: &backoff.Policy{Kind: backoff.EqualJitter, Base: time.Second, Cap: 300 * time.Second},
			Budget:          budget.Spec{Kind: budget.KindNone}, Pushback: Pushback{Ignore: true}, IgnoreSignals: true}
	},
	// aws-standard: standard mode before November 2026: 3 attempts, full
	// jitter from 1 s capped at 20 s, quota 500/5/10/+1 with refunds.
	// Budget: failed retries ≤ (500 + first-try successes) / 5; a retry
	// that succeeds is refunded, so retries that succeed are not bounded.
	"aws-standard": func() Policy {
		return Policy{MaxAttempts: 3,
			Backoff: backoff.Policy{Kind: backoff.FullJitter, Base: time.Second, Cap: 20 * time.Second},
			Budget:  mustBudget("aws-standard"), Pushback: Pushback{Ignore: true}, IgnoreSignals: true}
	},
	// aws-2026: the SDKs' retry behaviour from November 2026: transient
	// errors back off from 50 ms, throttling from 1 s, full jitter capped at
	// 20 s; quota 500, retry 14 (5 after throttling), +1, refunds;
	// x-amz-retry-after clamped to [backoff, backoff + 5 s]. Budget: failed
	// retries ≤ (500 + first-try successes) / 14 (/ 5 after throttling); a
	// retry that succeeds is refunded, so retries that succeed are not
	// bounded.
	"aws-2026": func() Policy {
		return Policy{MaxAttempts: 3,
			Backoff:         backoff.Policy{Kind: backoff.FullJitter, Base: 50 * time.Millisecond, Cap: 20 * time.Second},
			ThrottleBackoff: &backoff.Policy{Kind: backoff.FullJitter, Base: time.Second, Cap: 20 * time.Second},
			Budget:          mustBudget("aws-2026"), Pushback: Pushback{MaxExtra: 5 * time.Second}, IgnoreSignals: true}
	},
	// grpc: a gRFC A6 service config: 4 attempts, backoff 0.1 s × 2^(n−1)
	// up to 1 s with ±20 % jitter, retry throttling maxTokens 10 ratio 0.1,
	// grpc-retry-pushback-ms honoured. Budget: failed attempts ≤ 10 % of
	// successful ones (a failure costs a token, a success earns 0.1, no
	// retry at or below half of 10 tokens), whatever the try.
	"grpc": func() Policy {
		return Policy{MaxAttempts: 4,
			Backoff: backoff.Policy{Kind: backoff.Proportional, Base: 100 * time.Millisecond, Cap: time.Second, Multiplier: 2, Jitter: 0.2},
			Budget:  mustBudget("grpc"), Pushback: Pushback{MaxExtra: time.Minute}, IgnoreSignals: true}
	},
	// sre: the Google SRE book: 3 attempts, randomised exponential backoff,
	// retries ≤ 10 % of requests. Budget: retries ≤ 10 % of the requests
	// started in the last 10 s, whether they succeed or not.
	"sre": func() Policy {
		return Policy{MaxAttempts: 3,
			Backoff: backoff.Policy{Kind: backoff.FullJitter, Base: 100 * time.Millisecond, Cap: 10 * time.Second},
			Budget:  mustBudget("sre")}
	},
	// envoy: an Envoy route: 2 attempts (num_retries 1), full jitter from
	// 25 ms capped at 250 ms, retry budget 20 % of active requests, min 3.
	// Budget: retries in flight ≤ max(20 % of the attempts in flight, 3):
	// it bounds concurrency, not a rate, so a client with few requests in
	// flight retries every failure.
	"envoy": func() Policy {
		return Policy{MaxAttempts: 2,
			Backoff: backoff.Policy{Kind: backoff.FullJitter, Base: 25 * time.Millisecond, Cap: 250 * time.Millisecond},
			Budget:  mustBudget("envoy"), IgnoreSignals: true}
	},
	// stormguard: the recommended default: 3 attempts; full jitter from
	// 50 ms (1 s after throttling) capped at 10 s; a 10 % budget kept as a
	// token bucket (a retry costs 10, a first-try success earns 1, nothing
	// is refunded, 100 tokens = a burst of 10 retries), which needs no
	// clock on the success path; pushback clamped to [backoff, backoff +
	// 5 s], never past 30 s; deadline-aware with a learned attempt time;
	// honours every server signal. Budget: retries ≤ a tenth of the first
	// tries that succeeded, plus a burst of 10: once the burst is spent, at
	// most 10 % of the attempts sent (1/11), whether the retries succeed or
	// not (seed 000's rule, as a ceiling).
	"stormguard": func() Policy {
		return Policy{MaxAttempts: 3,
			Backoff:          backoff.Policy{Kind: backoff.FullJitter, Base: 50 * time.Millisecond, Cap: 10 * time.Second},
			ThrottleBackoff:  &backoff.Policy{Kind: backoff.FullJitter, Base: time.Second, Cap: 10 * time.Second},
			Budget:           budget.Spec{Kind: budget.KindTokenBucket, Capacity: 100, RetryCost: 10, ThrottleCost: 10, TimeoutCost: 10, SuccessReward: 1, NoRefund: true},
			Pushback:         Pushback{MaxExtra: 5 * time.Second, Max: 30 * time.Second},
			LearnAttemptTime: true}
	},
}

func mustBudget(name string) budget.Spec {
	s, err := budget.Preset(name)
	if err != nil {
		panic(err)
	}
	return s
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

// Preset returns the policy of a real client by name: naive, aws-legacy,
// aws-standard, aws-2026, grpc, sre, envoy or stormguard. Each is described
// where it is defined and in the README; the simulator runs exactly these.
// What each one's retry budget bounds, and the share of the attempts that
// are retries at 50 % failures (independent; alternating, so that every
// retry succeeds), as TestPresetRetryShare measures it:
//
//	naive         nothing but the attempt cap                              43 %, 50 %
//	aws-legacy    nothing but the attempt cap                              47 %, 50 %
//	aws-standard  failed retries ≤ (500 + first-try successes) / 5         18 %, 50 %
//	aws-2026      failed retries ≤ (500 + first-try successes) / 14         7 %, 50 %
//	grpc          failed attempts ≤ 10 % of successful ones                 0 %,  0 %
//	sre           retries ≤ 10 % of the requests of the last 10 s           9 %,  9 %
//	envoy         retries in flight ≤ max(20 % of attempts in flight, 3)   33 %, 50 % (one request at a time)
//	stormguard    retries ≤ first-try successes / 10, plus a burst of 10    5 %,  5 %
//
// A budget whose retries are refunded when they succeed (the AWS ones)
// bounds only the retries that fail.
func Preset(name string) (Policy, error) {
	f, ok := presets[name]
	if !ok {
		return Policy{}, fmt.Errorf("retry: unknown preset %q (want one of %v)", name, Presets())
	}
	return f(), nil
}
