package scenario

import (
	"fmt"
	"time"
)

// Humans makes a client's arrivals people rather than programs: each
// arrival is one person's intent, who sends a request (a tap) and, if no
// answer has come within a patience drawn from Patience, or an error came
// back, taps again — a new request, a first try to the server, with no
// backoff and no budget — up to Taps taps in all, while the earlier ones
// still wait. The person succeeds when any tap succeeds; the intent is what
// demand, goodput and the verdict count. Each tap goes through the client's
// policy like any request.
type Humans struct {
	Patience Dist `yaml:"patience" json:"patience"`
	Taps     int  `yaml:"taps" json:"taps"`
}

func (h *Humans) validate() error {
	if h.Taps < 1 || h.Taps > 100 {
		return &FieldError{"taps", fmt.Sprintf("%d is outside [1, 100]", h.Taps)}
	}
	if err := h.Patience.validate(); err != nil {
		var f fieldErrs
		f.wrap(err, "patience")
		return f[0]
	}
	if h.Patience.Average() <= 0 {
		return &FieldError{"patience", "a person's patience must be longer than 0"}
	}
	return nil
}

// Supersede turns on request supersession at a service, in each replica's
// admission core (admit.Config's supersede block): an arriving attempt
// whose idempotency key (a client's idempotency_key) matches an attempt
// still in the core's queue replaces it (the older is answered
// "superseded", which its caller does not retry), and one whose twin has
// been admitted waits for that result instead of running again; the result
// is replayed only if the twin completed for a caller still waiting, else
// the waiters go through admission again. A service without a policy
// file's server block has no queue in its core (its queue is its
// workers'), so there every twin of an admitted attempt joins it. At most
// Max keys [100000],
// each forgotten TTL after it was last seen [1m], and at most MaxWaiters
// attempts waiting for one key's twin in service [16]: one more is refused
// at once and answered shed, as the production gate refuses it (Throttled,
// admit.ShedKeyBusy).
type Supersede struct {
	Max        int           `yaml:"max,omitempty" json:"max,omitempty"`
	TTL        time.Duration `yaml:"ttl,omitempty" json:"ttl_ns,omitempty"`
	MaxWaiters int           `yaml:"max_waiters,omitempty" json:"max_waiters,omitempty"`
}

func (s *Supersede) validate() error {
	if s.Max < 0 || s.Max > 10_000_000 {
		return &FieldError{"max", fmt.Sprintf("%d is outside [0, 1e7]", s.Max)}
	}
	if s.TTL < 0 {
		return &FieldError{"ttl", "must not be negative"}
	}
	if s.MaxWaiters < 0 || s.MaxWaiters > 1024 {
		return &FieldError{"max_waiters", fmt.Sprintf("%d is outside [0, 1024]", s.MaxWaiters)}
	}
	return nil
}
