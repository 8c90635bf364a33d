package shed

import (
	"errors"
	"fmt"
	"time"
)

// Config describes a [Queue] as plain data, so that scenario files, presets
// and production code share it. A zero field takes the default in brackets;
// the zero Config is a first-tries-first FIFO queue of 1000 items.
type Config struct {
	// Capacity is the most items the queue holds [1000]. At most
	// [MaxCapacity].
	Capacity int `json:"capacity,omitempty" yaml:"capacity,omitempty"`
	// Order chooses the item to serve within the best priority class
	// [fifo].
	Order Order `json:"order,omitempty" yaml:"order,omitempty"`
	// Priority chooses how items are ranked into classes [first-tries].
	Priority Priority `json:"priority,omitempty" yaml:"priority,omitempty"`
	// CoDelTarget is how long an item may wait while its class is
	// overloaded, with Order adaptive-lifo [5ms]. At most CoDelInterval.
	CoDelTarget time.Duration `json:"codel_target,omitempty" yaml:"codel_target,omitempty"`
	// CoDelInterval is how long a priority class (for adaptive LIFO) or
	// the whole queue (for [Queue.Overloaded]) must stay non-empty to count
	// as overloaded [100ms].
	CoDelInterval time.Duration `json:"codel_interval,omitempty" yaml:"codel_interval,omitempty"`
	// MinRemaining is the least time before its deadline an item must have
	// to start: an item with MinRemaining or less left is dropped as
	// Expired [0, so an item is dropped once its deadline is reached].
	// Set it to about the service time, so that no work starts that cannot
	// finish in time.
	MinRemaining time.Duration `json:"min_remaining,omitempty" yaml:"min_remaining,omitempty"`
}

// Defaults for zero Config fields, and the largest capacity.
const (
	DefaultCapacity      = 1000
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond
	MaxCapacity          = 1 << 20
)

// Order names how a queue chooses among the items of its best priority
// class. The empty Order means [FIFO]. Decoding an Order from text (JSON,
// YAML) fails on a name not listed here.
type Order string

// The orders.
const (
	// FIFO serves the oldest item first.
	FIFO Order = "fifo"
	// LIFO serves the newest item first.
	LIFO Order = "lifo"
	// AdaptiveLIFO serves the oldest first normally and the newest first
	// while the item's class is overloaded, and times queued items out, as
	// the package documentation describes (Facebook's adaptive LIFO with
	// CoDel).
	AdaptiveLIFO Order = "adaptive-lifo"
)

// Priority names how a queue ranks items into classes; a better class is
// always served first and shed last. The empty Priority means [FirstTries].
// Decoding a Priority from text fails on a name not listed here.
type Priority string

// The priorities.
const (
	// FirstTries puts first tries (attempt 1) before retries.
	FirstTries Priority = "first-tries"
	// ByCriticality ranks by criticality first (critical-plus, critical,
	// sheddable-plus, sheddable) and, within a criticality, first tries
	// before retries: eight classes.
	ByCriticality Priority = "criticality"
	// NoPriority puts every item in one class.
	NoPriority Priority = "none"
)

// ErrInvalidConfig is the error that [Config.Validate], [New] and the
// UnmarshalText methods wrap when configuration is invalid; the message names
// the field by its configuration name.
var ErrInvalidConfig = errors.New("shed: invalid config")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s "+format, append([]any{ErrInvalidConfig, field}, args...)...)
}

// UnmarshalText sets o from its name; the empty name means FIFO.
func (o *Order) UnmarshalText(text []byte) error {
	v := Order(text)
	if err := v.check(); err != nil {
		return err
	}
	*o = v
	return nil
}

func (o Order) check() error {
	switch o {
	case "", FIFO, LIFO, AdaptiveLIFO:
		return nil
	}
	return invalid("order", "%q is unknown (want fifo, lifo or adaptive-lifo)", string(o))
}

// UnmarshalText sets p from its name; the empty name means FirstTries.
func (p *Priority) UnmarshalText(text []byte) error {
	v := Priority(text)
	if err := v.check(); err != nil {
		return err
	}
	*p = v
	return nil
}

func (p Priority) check() error {
	switch p {
	case "", FirstTries, ByCriticality, NoPriority:
		return nil
	}
	return invalid("priority", "%q is unknown (want first-tries, criticality or none)", string(p))
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity
	}
	if c.Order == "" {
		c.Order = FIFO
	}
	if c.Priority == "" {
		c.Priority = FirstTries
	}
	if c.CoDelTarget == 0 {
		c.CoDelTarget = DefaultCoDelTarget
	}
	if c.CoDelInterval == 0 {
		c.CoDelInterval = DefaultCoDelInterval
	}
	return c
}

// Validate reports a configuration that cannot be used, naming the field.
// Defaults are applied first, so a zero field is valid.
func (c Config) Validate() error {
	if err := c.Order.check(); err != nil {
		return err
	}
	if err := c.Priority.check(); err != nil {
		return err
	}
	d := c.WithDefaults()
	switch {
	case d.Capacity < 0 || d.Capacity > MaxCapacity:
		return invalid("capacity", "%d is outside [1, %d]", c.Capacity, MaxCapacity)
	case d.CoDelTarget < 0:
		return invalid("codel_target", "%v is negative", c.CoDelTarget)
	case d.CoDelInterval < 0:
		return invalid("codel_interval", "%v is negative", c.CoDelInterval)
	case d.CoDelTarget > d.CoDelInterval:
		return invalid("codel_target", "%v exceeds codel_interval %v", d.CoDelTarget, d.CoDelInterval)
	case d.MinRemaining < 0:
		return invalid("min_remaining", "%v is negative", c.MinRemaining)
	}
	return nil
}
