package admit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// Config describes a [Gate]. The first fields are plain data (they decode
// from JSON or YAML, and a zero field takes the default in brackets); the
// last ones are runtime parts that only code can supply. httpx.ServerConfig
// and grpcx.ServerConfig have the same fields under the same configuration
// names, so one YAML block configures either server.
type Config struct {
	// MaxTimeout bounds the deadline of every request [30s]: a request's
	// deadline is at most arrival + MaxTimeout. A caller can shorten the
	// server's deadline, never extend it.
	MaxTimeout time.Duration `json:"max_timeout,omitempty" yaml:"max_timeout,omitempty"`
	// MinRemaining is the least time before its deadline a request must
	// have to start [Queue.MinRemaining, itself 0]: one with MinRemaining or
	// less left, on arrival or after waiting in the queue, is dropped as
	// [Expired] and never runs. Set it to about the handler's service time.
	// If both this and Queue.MinRemaining are set they must agree.
	MinRemaining time.Duration `json:"min_remaining,omitempty" yaml:"min_remaining,omitempty"`
	// RetryAfter is the delay to suggest to the callers refused as
	// [InstanceOverloaded] or [Throttled] [1s], at most [wire.MaxPushback].
	// The shells send it rounded up to their wire's unit.
	RetryAfter time.Duration `json:"retry_after,omitempty" yaml:"retry_after,omitempty"`
	// Limit chooses the concurrency-limit algorithm [vegas, Netflix's
	// defaults]; use kind "fixed" for a constant limit. It is ignored when
	// Limiter is set.
	Limit limit.Spec `json:"limit,omitzero" yaml:"limit,omitempty"`
	// Queue shapes the queue where requests wait while the limit is
	// reached: capacity, order (fifo, lifo, adaptive-lifo with CoDel) and
	// priority (first tries before retries by default, or by criticality).
	Queue shed.Config `json:"queue,omitzero" yaml:"queue,omitempty"`
	// MaxCriticality is the highest criticality the gate takes from a
	// caller's word [critical]: a request that claims more (critical-plus)
	// is ranked, bound to its context and propagated downstream as
	// MaxCriticality, unless the shell vouches for its caller
	// ([Request].TrustedCriticality, set by the servers' TrustCriticality
	// hooks). A claim below it (sheddable, sheddable-plus) is always taken:
	// a caller may lower its own priority, which costs nobody else.
	//
	// The criticality is the caller's say-so, not a credential: with
	// Queue.Priority "criticality", a request that claims critical-plus is
	// served before, and evicts from a full queue, the queued requests of
	// every other caller. Hence the default: nobody is believed above
	// critical, the level of a request that says nothing, so that no
	// caller can buy priority over callers that stay silent, while the
	// levels below keep their meaning. Raise it to critical-plus only when
	// every caller that reaches the server is inside your network and
	// trusted (behind an authenticating proxy, say); otherwise trust
	// callers one by one with the servers' TrustCriticality hooks. Set it
	// to sheddable to rank every request alike (they then run, and
	// propagate, as sheddable).
	MaxCriticality wire.Criticality `json:"max_criticality,omitempty" yaml:"max_criticality,omitempty"`
	// RejectAtLimit refuses a request that finds the concurrency limit
	// reached at once, as InstanceOverloaded (reason queue-full: there is no
	// queue), instead of queueing it; Queue is then not used [false]. A
	// server whose own worker pool queues (the simulator's services without
	// a policy file's server block) or whose callers prefer to try another
	// instance at once sets it.
	RejectAtLimit bool `json:"reject_at_limit,omitempty" yaml:"reject_at_limit,omitempty"`
	// Supersede turns request supersession on for requests that carry an
	// idempotency key (see the package documentation); nil, the default,
	// leaves it off and the gate ignores keys. An empty block
	// (supersede: {}) turns it on with the defaults.
	Supersede *SupersedeConfig `json:"supersede,omitempty" yaml:"supersede,omitempty"`

	// Limiter, when set, is used instead of building one from Limit (to
	// use an algorithm configured in code, say). Build it with
	// limit.WithDials to honour the dials' limit override. Do not share it
	// with another Gate: a slot freed elsewhere does not wake this Gate's
	// waiters. To share a limit between handlers, or between unary and
	// streaming calls, put them all behind one Gate (one server).
	Limiter *limit.Limiter `json:"-" yaml:"-"`
	// Dials are the runtime kill switches: the shed fraction sheds that
	// share of requests, chosen at random, as [ServiceOverloaded]; the
	// limit override pins the concurrency limit (when the Gate builds its
	// Limiter). Nil means no dials.
	Dials *killswitch.Dials `json:"-" yaml:"-"`
	// ServiceSaturated, when set, is asked on every refusal of an
	// overloaded instance whether the whole service (not only this
	// instance) is out of capacity: a fleet-wide view, say every instance
	// shedding. If it answers true the refusal is [ServiceOverloaded] (no
	// layer retries) instead of [InstanceOverloaded]. It is not itself a
	// reason to refuse, and is not called for requests that are admitted.
	// It must be fast and safe for concurrent use.
	ServiceSaturated func() bool `json:"-" yaml:"-"`
	// OnQueueWait, when set, is told how long each admitted request waited
	// for its slot: 0 for those admitted at once. It runs in
	// [Gate.Admit], on the request's goroutine, before the work starts, and
	// must not block (a histogram from metrics.QueueWait fits).
	OnQueueWait func(wait time.Duration) `json:"-" yaml:"-"`
	// OnRefuse, when set, is told of every request the gate does not
	// admit (shed, expired, canceled, superseded or joined) with the
	// request's context, its attempt number and the decision, once it has
	// been counted. It runs in [Gate.Admit], on the request's goroutine,
	// before Admit returns, and must not block (a span event from otelx
	// fits).
	OnRefuse func(ctx context.Context, attempt int, d Decision) `json:"-" yaml:"-"`
}

// Defaults for zero [Config] fields.
const (
	DefaultMaxTimeout = 30 * time.Second
	DefaultRetryAfter = time.Second
)

// ErrInvalidConfig is wrapped by the error [New] and [Config.Validate]
// return for an invalid configuration; the message names the field by its
// configuration name.
var ErrInvalidConfig = errors.New("admit: invalid config")

// WithDefaults returns c with every zero field of its own set to its
// default (the queue's and the limit's are theirs to fill) and MinRemaining
// resolved against Queue.MinRemaining.
func (c Config) WithDefaults() Config {
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.MinRemaining == 0 {
		c.MinRemaining = c.Queue.MinRemaining
	}
	c.Queue.MinRemaining = c.MinRemaining
	return c
}

// Validate reports a configuration that [New] cannot use, naming the field.
// Defaults are applied first, so a zero field is valid.
func (c Config) Validate() error {
	if c.MinRemaining != 0 && c.Queue.MinRemaining != 0 && c.MinRemaining != c.Queue.MinRemaining {
		return fmt.Errorf("%w: min_remaining %v and queue.min_remaining %v disagree; set one", ErrInvalidConfig, c.MinRemaining, c.Queue.MinRemaining)
	}
	d := c.WithDefaults()
	switch {
	case d.MaxTimeout < 0:
		return fmt.Errorf("%w: max_timeout %v is negative", ErrInvalidConfig, c.MaxTimeout)
	case d.RetryAfter < 0:
		return fmt.Errorf("%w: retry_after %v is negative", ErrInvalidConfig, c.RetryAfter)
	case d.RetryAfter > wire.MaxPushback:
		return fmt.Errorf("%w: retry_after %v is more than %v", ErrInvalidConfig, c.RetryAfter, wire.MaxPushback)
	case d.MinRemaining < 0:
		return fmt.Errorf("%w: min_remaining %v is negative", ErrInvalidConfig, d.MinRemaining)
	case c.MaxCriticality < wire.Sheddable || c.MaxCriticality > wire.CriticalPlus:
		return fmt.Errorf("%w: max_criticality %v is not a criticality (want sheddable, sheddable-plus, critical or critical-plus)", ErrInvalidConfig, c.MaxCriticality)
	case d.MinRemaining >= d.MaxTimeout:
		return fmt.Errorf("%w: min_remaining %v is not below max_timeout %v: every request would be dropped", ErrInvalidConfig, d.MinRemaining, d.MaxTimeout)
	}
	if err := c.Supersede.validate(); err != nil {
		return fmt.Errorf("%w: supersede: %w", ErrInvalidConfig, err)
	}
	if err := d.Queue.Validate(); err != nil {
		return fmt.Errorf("%w: queue: %w", ErrInvalidConfig, err)
	}
	if c.Limiter == nil {
		if err := c.Limit.Validate(); err != nil {
			return fmt.Errorf("%w: limit: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}
