package budget

import (
	"errors"
	"sync/atomic"
	"time"
)

// maxBucketTokens bounds a TokenBucket's capacity, so that every amount fits
// a Ticket's int32 of milli-tokens.
const maxBucketTokens = 1_000_000

// TokenBucket is the cost-based retry quota of the AWS SDKs: retries spend
// tokens, first-try successes earn them back, and an empty bucket stops
// retrying while the dependency keeps failing.
//
// The rules, amounts in tokens:
//
//   - the bucket starts full, at its capacity, and its level stays within
//     [0, capacity];
//   - RetryAt prices the retry by its [Cause] (transient, throttling or
//     timeout; an unknown cause is priced as transient). If the level is below
//     the price, the retry is refused and nothing changes; otherwise the price
//     is taken out and recorded on the ticket;
//   - a first attempt that ends in [Success] earns the success reward;
//   - a retry that ends in Success gets its price back, unless refunds are off;
//   - a retry that ends in [Ignore] (abandoned before it started, or ended in a
//     way that says nothing about the dependency) always gets its price back;
//   - [Failure], and Ignore on a first attempt, change nothing.
//
// With the "aws-2026" preset (capacity 500; transient 14, throttling 5,
// timeout 14; reward 1; refunds on):
//
//	call                                     level
//	(new)                                    500
//	RetryAt(Transient)         → granted     486
//	EndAt(Failure, that ticket)              486
//	RetryAt(Throttling)        → granted     481
//	EndAt(Success, that ticket)              486   refund of 5
//	EndAt(Success, first try)                487   reward of 1
//	… 34 more failed transient retries       11
//	RetryAt(Transient)         → refused     11    11 < 14
//	RetryAt(Throttling)        → granted     6
//
// With at most 3 attempts per request, each failing independently with
// probability p, a request changes the level by 1 − p − 14(p² + p³) tokens on
// average: the bucket drains when more than about 21.5 % of attempts fail and
// refills below (REFERENCES.md §1.3).
//
// Amounts are kept in milli-tokens (three decimal places) in one atomic word
// updated by compare-and-swap: a TokenBucket is safe for concurrent use, takes
// no lock and allocates nothing. BeginAt does nothing and the time arguments
// are ignored: the level depends only on outcomes.
//
// The zero TokenBucket has capacity 0 and refuses every retry. Build one with
// [NewTokenBucket] or [Spec.New]. A TokenBucket must not be copied after first
// use.
type TokenBucket struct {
	level    atomic.Int64 // milli-tokens, in [0, capacity]
	capacity int64        // milli-tokens
	reward   int64        // milli-tokens earned by a first-try success
	cost     [3]int32     // milli-tokens, indexed by Cause
	refund   bool         // a retry that succeeds gets its cost back
}

var _ Budget = (*TokenBucket)(nil)

// NewTokenBucket returns a full bucket of capacity tokens. A retry costs
// retryCost tokens after a transient error, throttleCost after throttling and
// timeoutCost after a timeout; a first-try success earns reward tokens; refund
// says whether a retry that succeeds gets its cost back.
//
// The arguments are taken as given, without the defaults of [Spec]. Amounts
// keep three decimal places. NewTokenBucket panics unless capacity is in
// (0, 1e6], every cost in (0, capacity] and reward in [0, capacity]: use
// [Spec.New] to check configuration that comes from outside the program.
func NewTokenBucket(capacity, retryCost, throttleCost, timeoutCost, reward float64, refund bool) *TokenBucket {
	if err := checkTokenBucket(capacity, retryCost, throttleCost, timeoutCost, reward); err != nil {
		panic(err)
	}
	b := &TokenBucket{
		capacity: milli(capacity),
		reward:   milli(reward),
		refund:   refund,
	}
	b.cost[Transient] = int32(milli(retryCost))
	b.cost[Throttling] = int32(milli(throttleCost))
	b.cost[Timeout] = int32(milli(timeoutCost))
	b.level.Store(b.capacity)
	return b
}

// checkTokenBucket reports every invalid argument of NewTokenBucket, naming
// the fields of Spec.
func checkTokenBucket(capacity, retryCost, throttleCost, timeoutCost, reward float64) error {
	if !(capacity > 0 && capacity <= maxBucketTokens && milli(capacity) > 0) {
		return invalid("capacity", "must be in (0, %d] tokens, got %g", maxBucketTokens, capacity)
	}
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"retry_cost", retryCost}, {"throttle_cost", throttleCost}, {"timeout_cost", timeoutCost}} {
		if !(f.v > 0 && milli(f.v) > 0 && milli(f.v) <= milli(capacity)) {
			errs = append(errs, invalid(f.name, "must be in (0, capacity = %g] tokens (a retry that costs more than the capacity could never be allowed), got %g", capacity, f.v))
		}
	}
	if !(reward >= 0 && reward <= capacity) {
		errs = append(errs, invalid("success_reward", "must be in [0, capacity = %g] tokens, got %g", capacity, reward))
	}
	return errors.Join(errs...)
}

// BeginAt does nothing: a first attempt costs nothing.
func (b *TokenBucket) BeginAt(time.Time) {}

// RetryAt takes the price of a retry after cause c out of the bucket, if the
// bucket holds that much. It never blocks; now is ignored.
func (b *TokenBucket) RetryAt(_ time.Time, c Cause) (Ticket, bool) {
	cost := b.cost[Transient]
	if int(c) < len(b.cost) {
		cost = b.cost[c]
	}
	if cost <= 0 { // the zero TokenBucket
		return Ticket{}, false
	}
	for {
		cur := b.level.Load()
		if cur < int64(cost) {
			return Ticket{}, false
		}
		if b.level.CompareAndSwap(cur, cur-int64(cost)) {
			return Ticket{cost: cost, retry: true}, true
		}
	}
}

// EndAt credits the bucket for an attempt that ended with outcome o: the
// success reward for a first-try success, the ticket's price for a retry that
// succeeded (when refunds are on) or ended in [Ignore]. The level never
// exceeds the capacity. now is ignored.
func (b *TokenBucket) EndAt(_ time.Time, o Outcome, t Ticket) {
	switch {
	case o == Success && !t.retry:
		b.add(b.reward)
	case o == Success && b.refund, o == Ignore && t.retry:
		b.add(int64(t.cost))
	}
}

// add puts n milli-tokens back, up to the capacity.
func (b *TokenBucket) add(n int64) {
	if n <= 0 {
		return
	}
	for {
		cur := b.level.Load()
		if cur >= b.capacity {
			return
		}
		next := min(cur+n, b.capacity)
		if b.level.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Level returns the number of tokens in the bucket now, in [0, capacity], to
// three decimal places. It is meant for metrics and tests: the level may have
// changed by the time the caller looks at it.
func (b *TokenBucket) Level() float64 { return tokens(b.level.Load()) }

// Capacity returns the size of the bucket in tokens (0 for the zero
// TokenBucket).
func (b *TokenBucket) Capacity() float64 { return tokens(b.capacity) }

// SetLevel sets the number of tokens in the bucket, clamped to
// [0, capacity] (three decimal places). It is for a bucket that takes the
// place of another — a policy file reloaded with a new budget
// (policyfile.Live) starts its new bucket at the old one's share, so that
// a reload in an incident is not a free burst of retries — not for the
// data path.
func (b *TokenBucket) SetLevel(tokens float64) {
	b.level.Store(min(max(milli(tokens), 0), b.capacity))
}
