package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/budget"
)

func defaultRand() float64 { return rand.Float64() }

// Do calls fn until it succeeds or the retrier gives up, waiting between
// attempts as the policy says. It returns nil or a *[GiveUpError] that wraps
// fn's last error and says why retrying stopped: errors.Is(err,
// ErrAttemptsExhausted), ErrBudgetExhausted, ErrDeadline, ErrNotRetryable,
// ErrServerSaidStop, ErrRetriesDisabled, ErrCanceled, ErrRetryDeclined or
// ErrBreakerOpen; errors.Is and errors.As also see fn's last error.
//
// What is retried, by default (the retrier's classifiers, [WithClassifiers],
// are asked first and may say otherwise):
//
//   - retried: errors of class Transient, Throttling or Timeout: connection
//     refused, reset or aborted, broken pipe, EOF and unexpected EOF,
//     net.ErrClosed and other *net.OpError; a net.Error whose Timeout() is
//     true; an error with HTTPStatus() 408, 429, 500, 502, 503 or 504 (what
//     httpx produces); an error with GRPCCode() UNAVAILABLE, ABORTED,
//     RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED (what grpcx produces); an
//     error whose RetryClass() says so; an attempt that ran past the
//     policy's AttemptTimeout;
//   - not retried: everything else, and in particular an error no
//     classifier knows, such as a plain errors.New("…"): it is NeverRetry.
//     [WithRetryUnknown] retries those too (failsafe-go's default):
//     retry.MustNew(p, retry.WithRetryUnknown());
//   - never retried: the caller's own cancellation or deadline (ctx done),
//     and a failure the server said not to retry (see [Default]).
//
// fn receives ctx, or a child of it bounded by the policy's AttemptTimeout.
// When ctx is done, Do stops at once: the caller's own cancellation and
// deadline are never retried. With a circuit breaker ([WithBreaker]) every
// attempt is asked of it first; one it refuses is not made. On the success
// path Do allocates nothing and reads the clock only if the budget, the
// breaker or the learned attempt time needs it.
func Do(ctx context.Context, r *Retrier, fn func(context.Context) error) error {
	return r.do(ctx, fn)
}

// DoValue is [Do] for a function that returns a value: the value of the
// successful attempt, or the zero value with the give-up error.
func DoValue[T any](ctx context.Context, r *Retrier, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := r.do(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// do is Do's and DoValue's loop. It is not generic, so that Do calls fn
// directly, not through DoValue's adapter and a generic instance's
// dictionary: one indirect call fewer on the success path.
func (r *Retrier) do(ctx context.Context, fn func(context.Context) error) error {
	timed := r.needClock || r.breaker != nil && r.breaker.NeedsClock()
	if r.p.LearnAttemptTime {
		if _, ok := ctx.Deadline(); ok {
			timed = true
		}
	}
	var now time.Time
	if timed {
		now = time.Now()
	}
	r.begin(now)
	if r.breaker == nil {
		// The first attempt, without a breaker to ask, needs no Call: a
		// first attempt that succeeds and has nothing to teach is over
		// once the bucket is rewarded (the ticket of a first attempt is
		// the zero Ticket). The Call is built when something reads it.
		err := r.try(ctx, fn)
		if err == nil && r.plainEnd && (!timed || !r.p.LearnAttemptTime) {
			r.bucket.EndAt(time.Time{}, budget.Success, budget.Ticket{})
			return nil
		}
		var c Call
		c.attempt, c.started, c.first, c.ctx = 1, now, now, ctx
		return r.loop(ctx, fn, &c, now, timed, err, true)
	}
	// The Call is StartContext's without a deadline, filled in place, field
	// by field: built by StartContext and copied, its 128 bytes were read
	// back with 16-byte loads from 8-byte stores just made, which the CPU
	// cannot forward (28 % of the success path's CPU profile samples on
	// amd64).
	var c Call
	c.attempt, c.started, c.first, c.ctx = 1, now, now, ctx
	return r.loop(ctx, fn, &c, now, timed, nil, false)
}

// try makes one attempt: fn, bounded by the policy's AttemptTimeout if it
// has one.
func (r *Retrier) try(ctx context.Context, fn func(context.Context) error) error {
	if r.p.AttemptTimeout <= 0 {
		return fn(ctx) // attempt's case without a timeout, without its call
	}
	return attempt(ctx, r.p.AttemptTimeout, fn)
}

// loop is do from the Call's current attempt on: it makes the attempt
// (unless tried: the attempt was made and ended with err), then ends it and
// retries as the policy says, until the call succeeds or gives up.
func (r *Retrier) loop(ctx context.Context, fn func(context.Context) error, c *Call, now time.Time, timed bool, err error, tried bool) error {
	var last error // the previous attempt's error
	for {
		if !tried {
			if r.breaker != nil && !r.AllowAt(now, c) {
				return r.GiveUp(c, ErrBreakerOpen, last)
			}
			err = r.try(ctx, fn)
		}
		tried = false
		if err == nil {
			var end time.Time
			if timed {
				end = time.Now()
			}
			if r.plainEnd && (!timed || !r.p.LearnAttemptTime) {
				// All EndAt would do: reward the bucket (nothing
				// to learn from an attempt that was not timed).
				r.bucket.EndAt(end, budget.Success, c.ticket)
			} else {
				r.EndAt(end, c, Success, Signal{}, 0)
			}
			return nil
		}
		// Failure: the slow path; read the clock and the deadline.
		end := time.Now()
		cls := r.ClassifyAttempt(ctx, err)
		if dl, ok := ctx.Deadline(); ok {
			c.deadline = dl
		}
		d := r.EndAt(end, c, cls, signalOf(err), r.rand())
		if !d.Retry {
			return r.GiveUp(c, d.Reason, err)
		}
		if !wait(ctx, d.Delay) {
			r.AbandonAt(time.Now(), c)
			return r.GiveUp(c, ErrCanceled, fmt.Errorf("%w; then, waiting to retry: %w", err, context.Cause(ctx)))
		}
		now = time.Now()
		r.NextAt(now, c)
		last = err
	}
}

// attempt makes one attempt: fn with ctx, or with a child of it bounded by
// timeout when timeout > 0.
func attempt(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	if timeout <= 0 {
		return fn(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(actx)
}

// wait sleeps for d or until ctx is done; it reports whether the full wait
// passed with ctx still live.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return ctx.Err() == nil
	}
}
