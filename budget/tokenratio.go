package budget

import (
	"errors"
	"sync/atomic"
	"time"
)

// maxRatioTokens is the largest maxTokens gRFC A6 accepts.
const maxRatioTokens = 1000

// TokenRatio is gRPC's retry throttling (gRFC A6): a client-wide count of
// tokens that failures spend and successes earn back, and retries stop while
// the count is at or below half its maximum.
//
// The rules, with maxTokens in (0, 1000] and tokenRatio > 0:
//
//   - the count starts at maxTokens;
//   - every attempt that ends in [Failure] (first try or retry) takes 1 token,
//     never going below 0;
//   - every attempt that ends in [Success] adds tokenRatio, never going above
//     maxTokens;
//   - [Ignore] changes nothing;
//   - RetryAt grants a retry only while the count is above maxTokens / 2. It
//     does not charge anything: the failure that led to the retry has already
//     been counted by EndAt.
//
// Expected values with the "grpc" preset (maxTokens 10, tokenRatio 0.1):
//
//	calls, in order                 tokens   RetryAt
//	(new)                           10       granted
//	4 × EndAt(Failure)              6        granted
//	1 × EndAt(Failure)              5        refused   5 is not above 5
//	1 × EndAt(Success)              5.1      granted
//	1 × EndAt(Failure)              4.1      refused
//	10 × EndAt(Success)             5.1      granted
//	60 × EndAt(Failure)             0        refused   never below 0
//	150 × EndAt(Success)            10       granted   never above maxTokens
//
// Like grpc-go, TokenRatio keeps three decimal places of tokenRatio (further
// digits are dropped) and counts in milli-tokens, in one atomic word updated
// by compare-and-swap: it is safe for concurrent use, takes no lock and
// allocates nothing. BeginAt does nothing and the time arguments are ignored.
//
// The zero TokenRatio has maxTokens 0 and refuses every retry. Build one with
// [NewTokenRatio] or [Spec.New]. A TokenRatio must not be copied after first
// use.
type TokenRatio struct {
	tokens atomic.Int64 // milli-tokens, in [0, max]
	max    int64        // milli-tokens
	ratio  int64        // milli-tokens earned by a success
}

var _ Budget = (*TokenRatio)(nil)

// NewTokenRatio returns a full TokenRatio budget. The arguments are taken as
// given, without the defaults of [Spec]; both keep three decimal places.
// NewTokenRatio panics unless maxTokens is in (0, 1000] and tokenRatio is at
// least 0.001 and at most maxTokens: use [Spec.New] to check configuration
// that comes from outside the program.
func NewTokenRatio(maxTokens, tokenRatio float64) *TokenRatio {
	if err := checkTokenRatio(maxTokens, tokenRatio); err != nil {
		panic(err)
	}
	r := &TokenRatio{max: milli(maxTokens), ratio: milli(tokenRatio)}
	r.tokens.Store(r.max)
	return r
}

// checkTokenRatio reports every invalid argument of NewTokenRatio, naming the
// fields of Spec.
func checkTokenRatio(maxTokens, tokenRatio float64) error {
	var errs []error
	if !(maxTokens > 0 && maxTokens <= maxRatioTokens && milli(maxTokens) > 0) {
		errs = append(errs, invalid("max_tokens", "must be in (0, %d] with at most 3 decimal places, got %g", maxRatioTokens, maxTokens))
	}
	if !(tokenRatio > 0 && milli(tokenRatio) > 0 && tokenRatio <= maxRatioTokens) {
		errs = append(errs, invalid("token_ratio", "must be > 0 with at most 3 decimal places (at least 0.001) and at most %d, got %g", maxRatioTokens, tokenRatio))
	}
	return errors.Join(errs...)
}

// BeginAt does nothing: only the end of an attempt moves the count.
func (r *TokenRatio) BeginAt(time.Time) {}

// RetryAt grants a retry while the count is above maxTokens / 2. It charges
// nothing. now and c are ignored.
func (r *TokenRatio) RetryAt(time.Time, Cause) (Ticket, bool) {
	if 2*r.tokens.Load() > r.max {
		return Ticket{retry: true}, true
	}
	return Ticket{}, false
}

// EndAt takes one token for a [Failure] and adds tokenRatio for a [Success],
// keeping the count within [0, maxTokens]. [Ignore] changes nothing. now and t
// are ignored: first tries and retries count alike.
func (r *TokenRatio) EndAt(_ time.Time, o Outcome, _ Ticket) {
	switch o {
	case Failure:
		for {
			cur := r.tokens.Load()
			if cur <= 0 {
				return
			}
			if r.tokens.CompareAndSwap(cur, max(cur-milliPerToken, 0)) {
				return
			}
		}
	case Success:
		for {
			cur := r.tokens.Load()
			if cur >= r.max {
				return
			}
			if r.tokens.CompareAndSwap(cur, min(cur+r.ratio, r.max)) {
				return
			}
		}
	}
}

// Level returns the token count now, in [0, maxTokens], to three decimal
// places. It is meant for metrics and tests: the count may have changed by
// the time the caller looks at it.
func (r *TokenRatio) Level() float64 { return tokens(r.tokens.Load()) }

// MaxTokens returns the largest token count (0 for the zero TokenRatio).
func (r *TokenRatio) MaxTokens() float64 { return tokens(r.max) }
