package budget

import (
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// maxMinConcurrency bounds Concurrency's floor, so that counts fit 32 bits.
const maxMinConcurrency = math.MaxInt32

// Concurrency is Envoy's retry budget: it bounds the retries in flight by a
// share of all the attempts in flight,
//
//	a retry is granted when  retries in flight + 1 ≤ max(⌊percent × attempts in flight⌋, min)
//
// where attempts in flight count first tries (from BeginAt) and granted
// retries (from RetryAt) until their EndAt, whatever the outcome. Expected
// limits with the "envoy" preset (percent 0.2, min 3):
//
//	attempts in flight   retries in flight allowed
//	0 … 19               3
//	20 … 24              4
//	50                   10
//	100                  20
//
// Unlike the other budgets, it has no memory: once attempts end, their share
// is gone. It bounds the burst of retries a client can throw at a dependency
// at one moment, not their rate.
//
// Both counts live in one atomic word (32 bits each) updated by
// compare-and-swap, so the check and the count are one step: Concurrency is
// safe for concurrent use, takes no lock and allocates nothing. The time
// arguments are ignored. Percent keeps six decimal places. Extra EndAt calls
// (a protocol violation) cannot take a count below zero.
//
// The zero Concurrency has percent 0 and min 0 and refuses every retry. Build
// one with [NewConcurrency] or [Spec.New]. A Concurrency must not be copied
// after first use.
type Concurrency struct {
	state   atomic.Uint64 // attempts in flight << 32 | retries in flight
	percent uint64        // millionths
	min     uint64
}

const lowMask = 1<<32 - 1

var _ Budget = (*Concurrency)(nil)

// NewConcurrency returns a Concurrency budget with nothing in flight. percent
// is a fraction (0.2 means 20 %); minRetries is the number of retries in
// flight always allowed. The arguments are taken as given, without the
// defaults of [Spec]. NewConcurrency panics unless percent is in [0, 1],
// minRetries is in
// [0, 2³¹ − 1] and they are not both 0: use [Spec.New] to check configuration
// that comes from outside the program.
func NewConcurrency(percent float64, minRetries int) *Concurrency {
	if err := checkConcurrency(percent, minRetries); err != nil {
		panic(err)
	}
	return &Concurrency{percent: uint64(micro(percent)), min: uint64(minRetries)}
}

// checkConcurrency reports every invalid argument of NewConcurrency, naming
// the fields of Spec.
func checkConcurrency(percent float64, minRetries int) error {
	var errs []error
	if !(percent >= 0 && percent <= 1) {
		errs = append(errs, invalid("percent", "must be a fraction in [0, 1] (0.2 means 20 %%), got %g", percent))
	}
	if minRetries < 0 || minRetries > maxMinConcurrency {
		errs = append(errs, invalid("min_concurrency", "must be in [0, %d], got %d", maxMinConcurrency, minRetries))
	}
	if len(errs) == 0 && micro(percent) == 0 && minRetries == 0 {
		errs = append(errs, invalid("percent", "and min_concurrency are both 0: no retry could ever be allowed"))
	}
	return errors.Join(errs...)
}

// BeginAt counts a first attempt in flight.
func (c *Concurrency) BeginAt(time.Time) {
	c.state.Add(1 << 32)
}

// RetryAt grants a retry if the retries in flight, plus this one, stay within
// max(⌊percent × attempts in flight⌋, min), and counts it in flight both as a
// retry and as an attempt. now and cause are ignored.
func (c *Concurrency) RetryAt(time.Time, Cause) (Ticket, bool) {
	for {
		s := c.state.Load()
		active, retries := s>>32, s&lowMask
		limit := max(active*c.percent/microPerUnit, c.min)
		if retries+1 > limit || active == lowMask {
			return Ticket{}, false
		}
		if c.state.CompareAndSwap(s, s+1<<32+1) {
			return Ticket{retry: true}, true
		}
	}
}

// EndAt takes an attempt out of flight, and a retry too when t is a retry's
// ticket, whatever the outcome. now is ignored.
func (c *Concurrency) EndAt(_ time.Time, _ Outcome, t Ticket) {
	for {
		s := c.state.Load()
		active, retries := s>>32, s&lowMask
		if active > 0 {
			active--
		}
		if t.retry && retries > 0 {
			retries--
		}
		if c.state.CompareAndSwap(s, active<<32|retries) {
			return
		}
	}
}

// InFlight returns the attempts (first tries and retries) and the retries in
// flight now. It is meant for metrics and tests.
func (c *Concurrency) InFlight() (attempts, retries int) {
	s := c.state.Load()
	return int(s >> 32), int(s & lowMask)
}
