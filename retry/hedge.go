package retry

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/wire"
)

// HedgePolicy is a hedging policy as plain data, with the semantics of gRPC's
// hedgingPolicy (gRFC A6): instead of waiting for an attempt to fail, the
// client sends the same request again after Delay without an answer, up to
// MaxAttempts copies in flight, and takes the first success.
//
// The rules, as [Retrier.HedgeStartAt], [Retrier.HedgeAt] and
// [Retrier.HedgeEndAt] apply them:
//
//   - attempt 1 is sent at once; attempt n + 1 is due Delay after attempt n
//     was sent (Delay 0: all at once), and is sent only if the kill switch
//     allows retries, the caller's deadline leaves at least the policy's
//     minimum attempt time, the retry budget grants it (a hedge is charged
//     as a retry, after a timeout when it is sent because the others are
//     slow, after the failure's cause when a failure made it due) and the
//     circuit breaker, if any, allows it (a breaker that stops retries
//     refuses hedges while it is open, and always lets the first attempt
//     through). A hedge refused for any of these reasons stops hedging: no
//     later hedge is sent;
//   - the first success ends the call: the attempts still in flight are
//     cancelled;
//   - a failure of a retryable class (Transient, Throttling, Timeout: A6's
//     non-fatal status codes, which the classifier chain decides) makes the
//     next hedge due at once, or after the server's pushback (clamped as for
//     retries, from 0) when it sent one; a pushback that says not to retry,
//     or a signal that the service is overloaded or that retries are
//     exhausted below, stops hedging (unless the policy ignores signals);
//   - a failure of any other class (fatal) ends the call at once: the rest
//     are cancelled;
//   - once no more hedges may be sent and none is in flight, the call has
//     failed, for the reason hedging stopped.
//
// Every attempt carries its number (the attempt header and metadata), so
// that servers shed hedges before first tries. In the budget, an attempt
// ends as a retry does (success, failure or ignore by its class), except that
// an attempt cancelled because the call ended ends as a failure when it was a
// hedge, so that its charge stands (it was sent and loaded the server), and
// as ignore when it was the first. The breaker records each attempt's class
// as for retries; a cancelled attempt is ignored. MaxAttempts, Backoff and
// RetryProbability of the enclosing [Policy] do not apply to a hedged call.
type HedgePolicy struct {
	// MaxAttempts bounds the attempts of one call, the first included, in
	// [1, 5] (gRFC A6 caps it at 5) [2]; 1 means no hedging.
	MaxAttempts int `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`
	// Delay is the hedging delay, ≥ 0 [0: every attempt at once].
	Delay time.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
}

// MaxHedgeAttempts is the largest HedgePolicy.MaxAttempts (gRFC A6).
const MaxHedgeAttempts = 5

// DefaultHedgeAttempts is the default HedgePolicy.MaxAttempts.
const DefaultHedgeAttempts = 2

// Validate reports a hedging policy that cannot be used, naming the field.
func (h HedgePolicy) Validate() error {
	switch {
	case h.MaxAttempts < 0 || h.MaxAttempts > MaxHedgeAttempts:
		return fmt.Errorf("retry: hedge.max_attempts %d is outside [1, %d] (gRFC A6 caps hedging at %d)", h.MaxAttempts, MaxHedgeAttempts, MaxHedgeAttempts)
	case h.Delay < 0:
		return fmt.Errorf("retry: hedge.delay %v is negative", h.Delay)
	}
	return nil
}

// Hedge is the state of one hedged call. Get one from
// [Retrier.HedgeStartAt]; it is a value owned by one goroutine (the shell's
// loop, which receives the attempts' results), not safe for concurrent use.
type Hedge struct {
	sent     int
	inFlight int
	next     time.Time // when the next hedge is due
	cause    budget.Cause
	stopped  error // why no more hedges are sent; nil while they may be
	deadline time.Time
	running  [MaxHedgeAttempts]bool
	started  [MaxHedgeAttempts]time.Time
	tickets  [MaxHedgeAttempts]budget.Ticket
	permits  [MaxHedgeAttempts]breaker.Permit
}

// Sent returns the number of attempts sent so far.
func (h *Hedge) Sent() int { return h.sent }

// InFlight returns the number of attempts sent that have not ended.
func (h *Hedge) InFlight() int { return h.inFlight }

// Running reports whether attempt n (1-based) is in flight.
func (h *Hedge) Running(n int) bool { return n >= 1 && n <= h.sent && h.running[n-1] }

// Next returns when the next hedge is due, and false when no more will be
// sent.
func (h *Hedge) Next() (time.Time, bool) { return h.next, h.stopped == nil }

// HedgeDecision is what a hedged call does after an event.
type HedgeDecision struct {
	// Done: the call is over. With a nil Reason it succeeded; otherwise it
	// failed for Reason (one of the Err… reasons). Either way, cancel the
	// attempts still in flight and report each with HedgeCancelAt.
	Done   bool
	Reason error
}

// HedgeStartAt begins a hedged call whose first attempt is sent at now,
// under the retrier's hedging policy (Policy.Hedge, which must be set).
// deadline is the caller's, or the zero Time. ok is false when the circuit
// breaker refused the first attempt: nothing is to be sent and the call
// gives up with ErrBreakerOpen (HedgeGiveUp).
func (r *Retrier) HedgeStartAt(now, deadline time.Time) (h Hedge, ok bool) {
	h.deadline = deadline
	r.budget.BeginAt(now)
	if r.breaker != nil {
		p, ok := r.breaker.AllowFirstAt(now)
		if !ok {
			r.budget.EndAt(now, budget.Ignore, budget.Ticket{})
			h.stopped = ErrBreakerOpen
			return h, false
		}
		h.permits[0] = p
	}
	h.sent, h.inFlight = 1, 1
	h.running[0], h.started[0] = true, now
	h.next = now.Add(r.p.Hedge.Delay)
	h.cause = budget.Timeout
	r.maybeStop(h.sentAll(r), &h)
	return h, true
}

func (h *Hedge) sentAll(r *Retrier) bool { return h.sent >= r.p.Hedge.MaxAttempts }

func (r *Retrier) maybeStop(all bool, h *Hedge) {
	if all && h.stopped == nil {
		h.stopped = ErrAttemptsExhausted
	}
}

// HedgeAt sends the next hedge, which is due (now is at or after Next): it
// returns the new attempt's number, or 0 when the hedge may not be sent (the
// policy's rules above), after which no more are sent; then d says whether
// the call is over (nothing left in flight).
func (r *Retrier) HedgeAt(now time.Time, h *Hedge) (n int, d HedgeDecision) {
	if h.stopped == nil {
		h.stopped = r.hedgeRefusal(now, h)
	}
	if h.stopped != nil {
		return 0, h.over()
	}
	i := h.sent
	h.sent++
	h.inFlight++
	h.running[i], h.started[i] = true, now
	h.next = now.Add(r.p.Hedge.Delay)
	h.cause = budget.Timeout
	r.maybeStop(h.sentAll(r), h)
	if r.hasHooks && r.hooks.OnRetry != nil {
		r.hooks.OnRetry(i, 0)
	}
	return i + 1, HedgeDecision{}
}

// hedgeRefusal says why the next hedge may not be sent, or nil; when nil,
// the hedge has been charged and allowed.
func (r *Retrier) hedgeRefusal(now time.Time, h *Hedge) error {
	if h.sentAll(r) {
		return ErrAttemptsExhausted
	}
	if r.dials.RetriesDisabled() {
		return ErrRetriesDisabled
	}
	if !h.deadline.IsZero() && h.deadline.Sub(now) < max(r.minAttemptTime(), 1) {
		return ErrDeadline
	}
	t, ok := r.budget.RetryAt(now, h.cause)
	if !ok {
		return ErrBudgetExhausted
	}
	if r.breaker != nil {
		p, ok := r.breaker.AllowAt(now)
		if !ok {
			r.budget.EndAt(now, budget.Ignore, t)
			return ErrBreakerOpen
		}
		h.permits[h.sent] = p
	}
	h.tickets[h.sent] = t
	return nil
}

// over is the decision after an event that did not end the call by
// itself: it is over when no more hedges will be sent and none is in flight.
func (h *Hedge) over() HedgeDecision {
	if h.inFlight == 0 && h.stopped != nil {
		return HedgeDecision{Done: true, Reason: h.stopped}
	}
	return HedgeDecision{}
}

// HedgeStopAt stops hedging for reason (a hedge the shell could not send,
// a body it could not replay): no more hedges are sent.
func (r *Retrier) HedgeStopAt(now time.Time, h *Hedge, reason error) HedgeDecision {
	if h.stopped == nil {
		h.stopped = reason
	}
	return h.over()
}

// HedgeEndAt records that attempt n ended at now with class cls and the
// server's signal sig, and decides what the call does next.
func (r *Retrier) HedgeEndAt(now time.Time, h *Hedge, n int, cls Class, sig Signal) HedgeDecision {
	if !h.Running(n) {
		return h.over()
	}
	i := n - 1
	h.running[i] = false
	h.inFlight--
	r.endHedgeAttempt(now, h, i, cls, budgetOutcome(cls), breakerOutcome(cls))
	if cls == Success {
		return HedgeDecision{Done: true}
	}
	stop := sig.BadPushback && !r.p.Pushback.Ignore ||
		!r.p.IgnoreSignals && (sig.Overload == wire.OverloadService || sig.Exhausted)
	switch cls {
	case Canceled:
		return HedgeDecision{Done: true, Reason: ErrCanceled}
	case NeverRetry:
		return HedgeDecision{Done: true, Reason: ErrNotRetryable}
	case ServiceOverloaded, RetriesExhausted:
		if !r.p.IgnoreSignals {
			return HedgeDecision{Done: true, Reason: ErrServerSaidStop}
		}
		cls = Transient
	}
	// Non-fatal: the next hedge is due now, or after the pushback.
	switch {
	case stop:
		if h.stopped == nil || h.stopped == ErrAttemptsExhausted {
			h.stopped = ErrServerSaidStop
		}
	case h.stopped == nil:
		next := now
		if sig.HasPushback && !r.p.Pushback.Ignore {
			next = now.Add(r.clampPushback(0, sig.Pushback))
		}
		h.next = next
		h.cause = cls.cause()
	}
	return h.over()
}

// HedgeCancelAt records that attempt n, still in flight when the call
// ended, was cancelled.
func (r *Retrier) HedgeCancelAt(now time.Time, h *Hedge, n int) {
	if !h.Running(n) {
		return
	}
	i := n - 1
	h.running[i] = false
	h.inFlight--
	o := budget.Failure // a hedge's charge stands
	if i == 0 {
		o = budget.Ignore
	}
	r.endHedgeAttempt(now, h, i, Canceled, o, breaker.Ignore)
}

func (r *Retrier) endHedgeAttempt(now time.Time, h *Hedge, i int, cls Class, o budget.Outcome, bo breaker.Outcome) {
	if r.breaker != nil {
		r.breaker.EndAt(now, h.permits[i], bo)
	}
	r.budget.EndAt(now, o, h.tickets[i])
	if cls == Success && i == 0 && r.p.LearnAttemptTime {
		if took := now.Sub(h.started[i]); took > 0 && !h.started[i].IsZero() {
			r.learn(took)
		}
	}
	if r.hasHooks && r.hooks.OnAttempt != nil {
		var took time.Duration
		if !h.started[i].IsZero() && !now.IsZero() {
			took = now.Sub(h.started[i])
		}
		r.hooks.OnAttempt(i+1, cls, took)
	}
}

func budgetOutcome(cls Class) budget.Outcome {
	switch {
	case cls == Success:
		return budget.Success
	case cls.Retryable():
		return budget.Failure
	}
	return budget.Ignore
}

// HedgeGiveUp builds the error a shell returns when the hedged call h
// fails, for reason with the last attempt's error (nil if none was sent),
// and runs the OnGiveUp hook; Attempts is the number of attempts sent.
func (r *Retrier) HedgeGiveUp(h *Hedge, reason, last error) error {
	if r.hasHooks && r.hooks.OnGiveUp != nil {
		r.hooks.OnGiveUp(reason, h.sent, last)
	}
	return &GiveUpError{Reason: reason, Last: last, Attempts: h.sent}
}
