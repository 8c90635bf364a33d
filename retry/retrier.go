package retry

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/wire"
)

// Retrier applies a [Policy]. It is the deterministic core that both the
// production shells ([Do], [DoValue], httpx, grpcx) and the simulator drive:
// time and the random sample are arguments, it never sleeps, never starts a
// goroutine and never reads the clock.
//
// A Retrier is safe for concurrent use; the per-request state lives in a
// [Call] value owned by the caller. Build one with [New]; the zero Retrier is
// not usable.
type Retrier struct {
	p        Policy
	throttle backoff.Policy
	budget   budget.Budget
	// bucket is budget when it is a *budget.TokenBucket (the presets'
	// kind), nil otherwise: the hot paths call its methods directly,
	// where the compiler can inline them (BeginAt is empty), instead of
	// through the interface.
	bucket *budget.TokenBucket
	// unlimited: budget is budget.Unlimited, whose methods do nothing
	// and grant every retry (with unlimitedTicket): the hot paths skip
	// the calls through the interface. Decided once in New.
	unlimited       bool
	unlimitedTicket budget.Ticket
	// plainEnd: a successful attempt's EndAt has nothing to do but reward
	// bucket (non-nil, no breaker, no hooks) unless it learns the
	// attempt's time. Decided once in New.
	plainEnd bool
	chain    Chain
	unknown  Class // the class of an error nobody knows
	breaker  *breaker.Breaker
	// stopsRetries: breaker stops retries only (breaker.StopsRetries):
	// EndAt asks it before granting a retry. Decided once in New.
	stopsRetries bool
	dials        *killswitch.Dials
	hooks        Hooks
	hasHooks     bool
	rand         func() float64
	// needClock: the success path must read the clock (a time-windowed
	// budget). Decided once in New.
	needClock bool
	// timesAttempts: EndAt takes the attempt's duration (for learning or
	// the hooks). Decided once in New.
	timesAttempts bool
	// deaf: the policy ignores pushback and signals (Pushback.Ignore and
	// IgnoreSignals): EndAt does not look at the Signal. Decided once in
	// New.
	deaf    bool
	learned atomic.Int64 // EWMA of successful attempt latency, ns; 0 = none yet
}

// Hooks observe a retrier. Every field may be nil; unset hooks cost nothing.
// Hooks run on the caller's goroutine and must not block.
type Hooks struct {
	// OnAttempt runs when an attempt ends, with its class and duration
	// (the duration is 0 when the clock was not read).
	OnAttempt func(attempt int, c Class, d time.Duration)
	// OnRetry runs when a retry has been granted, before the wait.
	OnRetry func(attempt int, delay time.Duration)
	// OnGiveUp runs once when a call ends in failure.
	OnGiveUp func(reason error, attempts int, last error)
	// OnEvent is told of every event of a call (see [Event]) with the
	// call's context: the one the shell started it with ([Do], [DoValue],
	// httpx.Transport and grpcx's interceptors start calls with
	// [Retrier.StartContext]), so that it can find the active span of a
	// trace; context.Background() for a call started with StartAt (the
	// simulator). When it is set, the shells read the clock on every call
	// (see [Retrier.NeedsClock]), so that a request's duration is known.
	OnEvent func(ctx context.Context, e Event)
}

// EventKind says what happened in an [Event].
type EventKind uint8

// The event kinds, in the order they happen to a call: attempts, each
// failed one followed by a retry or by the end, then one end.
const (
	// EventAttempt: an attempt ended (Attempt, Class, Took: the
	// attempt's duration).
	EventAttempt EventKind = iota + 1
	// EventRetry: a retry was granted, before the wait (Attempt: the
	// attempt that failed, Delay).
	EventRetry
	// EventSucceeded: the call ended in success (Attempt: the attempts
	// made, Took: the request's duration).
	EventSucceeded
	// EventGaveUp: the call ended in failure (Attempt: the attempts made,
	// Took: the request's duration, Reason, Err: the last attempt's
	// error).
	EventGaveUp
	// EventBreaker: the circuit breaker changed state (From, To) as this
	// call asked it for an attempt (open → half-open) or told it how one
	// ended (Attempt: that attempt). Under concurrent calls the change is
	// told to the call that saw the state move across its own step, which
	// is the one that moved it but for a race with another call's step.
	EventBreaker
)

var eventKindNames = [...]string{EventAttempt: "attempt", EventRetry: "retry", EventSucceeded: "succeeded", EventGaveUp: "gave-up", EventBreaker: "breaker"}

// String returns the kind's name, such as "attempt".
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("retry.EventKind(%d)", uint8(k))
}

// Event is one thing that happened to a call, as [Hooks].OnEvent sees it.
// Every call ends in exactly one EventSucceeded or EventGaveUp (a call
// driven by a shell; the simulator, which drives the core without one,
// never gives up through [Retrier.GiveUp] and so has no EventGaveUp).
type Event struct {
	Kind EventKind
	// Attempt is the attempt number for EventAttempt and EventRetry, the
	// attempts made (first try included) for the ends.
	Attempt int
	// Class is how the attempt ended (EventAttempt).
	Class Class
	// Took is the attempt's duration (EventAttempt) or the request's, from
	// the start of its first attempt to its outcome (the ends); 0 when the
	// clock was not read.
	Took time.Duration
	// Delay is the wait before the retry (EventRetry).
	Delay time.Duration
	// Reason is why retrying stopped, one of the Err… reasons
	// (EventGaveUp).
	Reason error
	// Err is the last attempt's error (EventGaveUp).
	Err error
	// From and To are the circuit breaker's states before and after the
	// change (EventBreaker).
	From, To breaker.State
}

// Option configures [New].
type Option func(*Retrier)

// WithBudget shares an existing budget (between retriers, or one a fleet
// shares) instead of building the one the policy describes.
func WithBudget(b budget.Budget) Option { return func(r *Retrier) { r.budget = b } }

// WithClassifiers puts classifiers ahead of the defaults; the first definite
// answer wins.
func WithClassifiers(c ...Classifier) Option {
	return func(r *Retrier) { r.chain = append(r.chain, c...) }
}

// WithRetryUnknown retries errors that no classifier knows (the chain of
// [WithClassifiers], then [Default]): they are [Transient] instead of
// [NeverRetry]. This is failsafe-go's default, where every error is
// retried; stormguard's is not to retry an error it cannot tell is
// transient (a validation error from errors.New, say). The budget, the
// attempt cap and the breaker still apply, and the breaker counts such
// errors as failures.
func WithRetryUnknown() Option { return func(r *Retrier) { r.unknown = Transient } }

// WithBreaker puts a circuit breaker in front of the attempts; share one
// breaker per dependency. Before an attempt is sent the shells ask
// [Retrier.AllowAt]; an attempt the breaker refuses is not sent and the
// call gives up with [ErrBreakerOpen] (after a refused retry, the
// *GiveUpError keeps the previous attempt's error; after a refused first
// try it has no Last and Attempts is 0). What an open breaker refuses is
// its spec's Stops:
//
//   - calls (the default): every attempt, first try and retries alike;
//   - retries (Brooker 2022): retries and hedges only. The first try of
//     every request is sent (breaker.Breaker.AllowFirstAt), and EndAt asks
//     the breaker before it grants a retry: while it is open the call gives
//     up at once with ErrBreakerOpen, after the attempts made, with no
//     wait and no budget charge. A retry granted before the breaker opened
//     is asked again when it is sent. The first tries are how the breaker
//     learns that the dependency is healthy again, and closes.
//
// Every attempt's class is recorded in the breaker with the same classifier
// chain that decides retries:
//
//	class                                        breaker outcome
//	Success                                      success
//	Transient, Throttling, Timeout,
//	ServiceOverloaded, RetriesExhausted          failure
//	NeverRetry, Canceled                         ignored (says nothing about the dependency's health)
//
// So a classifier installed with [WithClassifiers] changes what the breaker
// counts as it changes what is retried.
func WithBreaker(b *breaker.Breaker) Option { return func(r *Retrier) { r.breaker = b } }

// WithDials reads retries-off from shared runtime dials (the kill switch).
func WithDials(d *killswitch.Dials) Option { return func(r *Retrier) { r.dials = d } }

// WithHooks installs observation hooks.
func WithHooks(h Hooks) Option {
	return func(r *Retrier) {
		r.hooks = h
		r.hasHooks = h.OnAttempt != nil || h.OnRetry != nil || h.OnGiveUp != nil || h.OnEvent != nil
	}
}

// WithRand sets the source of uniform samples in [0, 1) used for jitter by
// the shells. The default is math/rand/v2's Float64, which is safe for
// concurrent use and has no global state to seed. The core methods take the
// sample as an argument and never call it.
func WithRand(f func() float64) Option { return func(r *Retrier) { r.rand = f } }

// New validates p, fills its defaults and builds a Retrier.
func New(p Policy, opts ...Option) (*Retrier, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	r := &Retrier{p: p, throttle: p.Backoff, unknown: NeverRetry}
	if p.ThrottleBackoff != nil {
		r.throttle = *p.ThrottleBackoff
	}
	for _, o := range opts {
		o(r)
	}
	if r.budget == nil {
		b, err := p.Budget.New()
		if err != nil {
			return nil, err
		}
		r.budget = b
	}
	r.bucket, _ = r.budget.(*budget.TokenBucket)
	if u, ok := r.budget.(budget.Unlimited); ok {
		r.unlimited = true
		r.unlimitedTicket, _ = u.RetryAt(time.Time{}, budget.Transient)
	}
	r.plainEnd = r.bucket != nil && r.breaker == nil && !r.hasHooks
	r.stopsRetries = r.breaker != nil && r.breaker.Spec().Stops == breaker.StopsRetries
	if r.dials == nil {
		r.dials = new(killswitch.Dials)
	}
	if r.rand == nil {
		r.rand = defaultRand
	}
	r.timesAttempts = r.p.LearnAttemptTime || r.hasHooks
	r.deaf = r.p.Pushback.Ignore && r.p.IgnoreSignals
	r.needClock = needsClock(r.budget) || r.hooks.OnEvent != nil || r.breaker != nil && r.breaker.Spec().Mode == breaker.Rate
	return r, nil
}

// MustNew is New for policies known to be valid (presets, literals in
// tests); it panics on error.
func MustNew(p Policy, opts ...Option) *Retrier {
	r, err := New(p, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// Policy returns the policy with its defaults filled in.
func (r *Retrier) Policy() Policy { return r.p }

// AttemptTimeout is the policy's AttemptTimeout: [Retrier.Policy] without
// copying the whole policy, for shells that ask on every attempt.
func (r *Retrier) AttemptTimeout() time.Duration { return r.p.AttemptTimeout }

// Hedges reports whether the policy hedges (its Hedge allows more than one
// attempt): [Retrier.Policy] without copying the whole policy, for shells
// that ask on every call.
func (r *Retrier) Hedges() bool { return r.p.Hedge != nil && r.p.Hedge.MaxAttempts > 1 }

// Budget returns the budget the retrier charges.
func (r *Retrier) Budget() budget.Budget { return r.budget }

// Breaker returns the circuit breaker the retrier asks, or nil.
func (r *Retrier) Breaker() *breaker.Breaker { return r.breaker }

// Dials returns the runtime dials the retrier reads.
func (r *Retrier) Dials() *killswitch.Dials { return r.dials }

// Call is the state of one request across its attempts. The zero Call is
// not started; get one from [Retrier.StartAt]. A Call is a small value owned
// by one caller; it is not safe for concurrent use.
type Call struct {
	attempt  int           // attempts started so far
	prev     time.Duration // previous delay
	deadline time.Time     // zero: none
	started  time.Time     // start of the current attempt; zero when not timed
	first    time.Time     // start of the first attempt; zero when not timed
	took     time.Duration // from first to the end of the last attempt; 0 when not timed
	ticket   budget.Ticket // of the current attempt
	permit   breaker.Permit
	// ctx is the context of the request the call makes, for Hooks.OnEvent
	// only: nil when started with StartAt. A Call lives exactly as long as
	// its request, as an http.Request does, which is why it may hold the
	// request's context.
	ctx context.Context
}

// Attempt returns the number of the current attempt (1 for the first try).
func (c *Call) Attempt() int { return c.attempt }

// Decision is what to do after an attempt ended.
type Decision struct {
	// Retry: wait Delay, then call [Retrier.NextAt] and make the next attempt.
	Retry bool
	Delay time.Duration
	// Reason, when the call is over in failure: one of the Err… reasons.
	// Nil with Retry false means the call succeeded.
	Reason error
}

// StartAt begins a request whose first attempt starts now. deadline is the
// caller's deadline, or the zero Time for none. now may be the zero Time
// when the caller did not read the clock (the shells skip it on the fast path
// when neither the budget nor learning needs it); attempt latency is then
// not measured.
func (r *Retrier) StartAt(now, deadline time.Time) Call {
	r.budget.BeginAt(now) // not r.begin: StartAt must stay small enough to inline
	return Call{attempt: 1, deadline: deadline, started: now, first: now}
}

// StartInto is [Retrier.StartAt] for a Call the caller keeps in place (in
// a record of its own, say): it sets *c to the Call StartAt would return,
// without returning 128 bytes for the caller to copy.
func (r *Retrier) StartInto(c *Call, now, deadline time.Time) {
	if !r.unlimited {
		r.budget.BeginAt(now) // not r.begin: StartInto must stay small enough to inline
	}
	*c = Call{attempt: 1, deadline: deadline, started: now, first: now}
}

// StartContext is StartAt for a shell that has the request's context: the
// call's events reach [Hooks].OnEvent with ctx. The production shells
// start their calls with it.
func (r *Retrier) StartContext(ctx context.Context, now, deadline time.Time) Call {
	r.budget.BeginAt(now)
	return Call{attempt: 1, deadline: deadline, started: now, first: now, ctx: ctx}
}

// begin is r.budget.BeginAt(now), directly for a token bucket.
func (r *Retrier) begin(now time.Time) {
	if r.bucket != nil {
		r.bucket.BeginAt(now)
		return
	}
	r.budget.BeginAt(now)
}

// event runs the OnEvent hook, if any, with the call's context.
func (r *Retrier) event(c *Call, e Event) {
	if !r.hasHooks || r.hooks.OnEvent == nil {
		return
	}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	r.hooks.OnEvent(ctx, e)
}

// ended records the end of the current attempt at now: the request's
// duration so far, for the hooks (only they read it).
func (c *Call) ended(now time.Time) {
	if !c.first.IsZero() && !now.IsZero() {
		c.took = now.Sub(c.first)
	}
}

// AllowAt asks the retrier's circuit breaker, if any, whether the current
// attempt of c (the first try after StartAt, a retry after NextAt) may be
// sent at now: the first try with breaker.Breaker.AllowFirstAt, which a
// breaker that stops retries only always grants, a retry with AllowAt.
// Without a breaker it is always true. When the breaker refuses, the attempt is taken back (c.Attempt() counts only the attempts
// sent, and a retry's budget charge is given back) and the call is over:
// the shell returns GiveUp(c, ErrBreakerOpen, the previous attempt's error
// or nil). now may be the zero Time unless [Retrier.NeedsClock] says
// otherwise.
func (r *Retrier) AllowAt(now time.Time, c *Call) bool {
	if r.breaker == nil {
		return true
	}
	var from breaker.State
	watch := r.hasHooks && r.hooks.OnEvent != nil
	if watch {
		from = r.breaker.State()
	}
	var p breaker.Permit
	var ok bool
	if c.attempt == 1 {
		p, ok = r.breaker.AllowFirstAt(now)
	} else {
		p, ok = r.breaker.AllowAt(now)
	}
	if watch {
		r.breakerMoved(c, from)
	}
	if ok {
		c.permit = p
		return true
	}
	r.budget.EndAt(now, budget.Ignore, c.ticket)
	c.ticket = budget.Ticket{}
	c.attempt--
	return false
}

// breakerEnd tells the breaker how c's attempt ended, and OnEvent of the
// change of state it made, if any (the states are read only when OnEvent
// is set: the hot path pays nothing).
func (r *Retrier) breakerEnd(now time.Time, c *Call, cls Class) {
	if !r.hasHooks || r.hooks.OnEvent == nil {
		r.breaker.EndAt(now, c.permit, breakerOutcome(cls))
		c.permit = breaker.Permit{}
		return
	}
	from := r.breaker.State()
	r.breaker.EndAt(now, c.permit, breakerOutcome(cls))
	c.permit = breaker.Permit{}
	r.breakerMoved(c, from)
}

// breakerMoved tells OnEvent that the breaker left state from, if it did.
func (r *Retrier) breakerMoved(c *Call, from breaker.State) {
	if to := r.breaker.State(); to != from {
		r.event(c, Event{Kind: EventBreaker, Attempt: c.attempt, From: from, To: to})
	}
}

// breakerOutcome maps a class to what the breaker records.
func breakerOutcome(cls Class) breaker.Outcome {
	switch cls {
	case Success:
		return breaker.Success
	case NeverRetry, Canceled:
		return breaker.Ignore
	}
	return breaker.Failure
}

// EndAt records the end of the current attempt, with its class and the
// server's signal, and decides what comes next. u is a uniform sample in
// [0, 1) for the jitter. If the decision is to retry, the retry has been
// charged to the budget; the caller must then call NextAt when it starts, or
// AbandonAt if it never does.
func (r *Retrier) EndAt(now time.Time, c *Call, cls Class, sig Signal, u float64) Decision {
	if r.breaker != nil {
		r.breakerEnd(now, c, cls)
	}
	if !r.unlimited {
		// Tell the budget how the attempt ended.
		o := outcomeOf(cls)
		if r.bucket != nil {
			r.bucket.EndAt(now, o, c.ticket) // a direct call, not through the interface
		} else {
			r.budget.EndAt(now, o, c.ticket)
		}
	}
	// The attempt's duration is read only by learning and the hooks;
	// time.Time.Sub is not free, so it is not taken without them.
	var took time.Duration
	// now first: a shell that did not read the clock passes the zero Time,
	// and c.started, just written, is then not read back.
	if r.timesAttempts && !now.IsZero() && !c.started.IsZero() {
		took = now.Sub(c.started)
	}
	if cls == Success {
		if r.p.LearnAttemptTime && took > 0 {
			r.learn(took)
		}
		if r.hasHooks {
			c.ended(now)
			r.attempted(c, cls, took)
			r.event(c, Event{Kind: EventSucceeded, Attempt: c.attempt, Took: c.took})
		}
		return Decision{}
	}
	if r.hasHooks {
		c.ended(now)
		r.attempted(c, cls, took)
	}
	// Whether to retry, and after what delay: the first reason not to, in
	// this order, ends the call. (Written here, not in a function of its
	// own: a call more on every failed attempt, with eleven words of
	// arguments.)
	//
	// A negative, malformed or repeated hint means "do not retry" to every
	// client that honours hints at all: it is part of the hint's contract
	// (gRFC A6's grpc-retry-pushback-ms), not one of stormguard's signals,
	// so IgnoreSignals does not silence it. The grpcx kill switch relies on
	// it to stop A6 clients.
	if !r.deaf {
		if sig.BadPushback && !r.p.Pushback.Ignore {
			return Decision{Reason: ErrServerSaidStop}
		}
		if !r.p.IgnoreSignals && (sig.Overload == wire.OverloadService || sig.Exhausted) {
			return Decision{Reason: ErrServerSaidStop}
		}
	}
	switch cls {
	case Canceled:
		return Decision{Reason: ErrCanceled}
	case ServiceOverloaded, RetriesExhausted:
		if !r.p.IgnoreSignals {
			return Decision{Reason: ErrServerSaidStop}
		}
		// A deaf client treats them as plain transient failures.
		cls = Transient
	case NeverRetry:
		return Decision{Reason: ErrNotRetryable}
	}
	if r.dials.RetriesDisabled() {
		return Decision{Reason: ErrRetriesDisabled}
	}
	if c.attempt >= r.p.MaxAttempts {
		return Decision{Reason: ErrAttemptsExhausted}
	}
	if p := r.p.RetryProbability; p != nil && *p < 1 {
		// One sample decides and jitters: given u < p, u/p is again
		// uniform on [0, 1).
		if !(u < *p) {
			return Decision{Reason: ErrRetryDeclined}
		}
		u /= *p
	}
	bo := &r.p.Backoff
	if cls == Throttling {
		bo = &r.throttle
	}
	var d time.Duration // backoff.None's delay, without the call
	if bo.Kind != backoff.None {
		d = bo.Delay(c.attempt, c.prev, u)
	}
	if !r.deaf && sig.HasPushback && !r.p.Pushback.Ignore {
		d = r.clampPushback(d, sig.Pushback)
	}
	if !c.deadline.IsZero() {
		need := addSat(d, r.minAttemptTime())
		if c.deadline.Sub(now) < need {
			return Decision{Reason: ErrDeadline}
		}
	}
	if r.stopsRetries {
		// A breaker that stops retries decides now, so that a refused
		// retry costs the caller no wait and the budget no charge.
		if _, ok := r.breaker.AllowAt(now); !ok {
			return Decision{Reason: ErrBreakerOpen}
		}
	}
	t := r.unlimitedTicket
	if !r.unlimited {
		var ok bool
		if t, ok = r.budget.RetryAt(now, cls.cause()); !ok {
			return Decision{Reason: ErrBudgetExhausted}
		}
	}
	c.ticket = t
	c.prev = d
	if r.hasHooks {
		if r.hooks.OnRetry != nil {
			r.hooks.OnRetry(c.attempt, d)
		}
		r.event(c, Event{Kind: EventRetry, Attempt: c.attempt, Delay: d})
	}
	return Decision{Retry: true, Delay: d}
}

// clampPushback moves the computed backoff d (≥ 0) toward the server's
// hint h, within [d, d + MaxExtra] and never past Max (nor below d). The
// sum saturates at the largest Duration, so a MaxExtra near it means "no
// bound but Max" rather than overflowing into a negative delay.
func (r *Retrier) clampPushback(d, h time.Duration) time.Duration {
	hi := addSat(d, r.p.Pushback.MaxExtra)
	if h < d {
		h = d
	}
	if h > hi {
		h = hi
	}
	if h > r.p.Pushback.Max {
		h = max(d, r.p.Pushback.Max)
	}
	return h
}

// addSat returns a + b for non-negative a and b, saturating at the largest
// Duration instead of wrapping around to a negative one.
func addSat(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// outcomeOf is what the budget learns of an attempt that ended in cls: a
// success, a failure worth retrying, or nothing (Ignore).
func outcomeOf(cls Class) budget.Outcome {
	switch {
	case cls == Success:
		return budget.Success
	case cls.Retryable():
		return budget.Failure
	}
	return budget.Ignore
}

// FinishAt records the end of the current attempt when the caller will not
// retry whatever happened (a request body that cannot be replayed, say):
// the budget learns the outcome, the OnAttempt hook runs, and no retry is
// asked for or charged.
func (r *Retrier) FinishAt(now time.Time, c *Call, cls Class) {
	if r.breaker != nil {
		r.breakerEnd(now, c, cls)
	}
	o := outcomeOf(cls)
	if r.bucket != nil {
		r.bucket.EndAt(now, o, c.ticket) // a direct call, not through the interface
	} else {
		r.budget.EndAt(now, o, c.ticket)
	}
	c.ticket = budget.Ticket{}
	if r.hasHooks {
		c.ended(now)
		var took time.Duration
		if !c.started.IsZero() && !now.IsZero() {
			took = now.Sub(c.started)
		}
		r.attempted(c, cls, took)
		if cls == Success {
			r.event(c, Event{Kind: EventSucceeded, Attempt: c.attempt, Took: c.took})
		}
	}
}

// attempted runs the hooks of an attempt that ended.
func (r *Retrier) attempted(c *Call, cls Class, took time.Duration) {
	if r.hooks.OnAttempt != nil {
		r.hooks.OnAttempt(c.attempt, cls, took)
	}
	r.event(c, Event{Kind: EventAttempt, Attempt: c.attempt, Class: cls, Took: took})
}

// NextAt starts the retry granted by the last EndAt.
func (r *Retrier) NextAt(now time.Time, c *Call) {
	c.attempt++
	c.started = now
}

// AbandonAt gives back a granted retry that will never start (the caller
// went away during the wait). It returns ErrCanceled.
func (r *Retrier) AbandonAt(now time.Time, c *Call) {
	r.budget.EndAt(now, budget.Ignore, c.ticket)
	c.ticket = budget.Ticket{}
	if r.hasHooks {
		c.ended(now)
	}
}

// minAttemptTime is the configured minimum, raised to the learned average
// attempt latency when learning is on.
func (r *Retrier) minAttemptTime() time.Duration {
	m := r.p.MinAttemptTime
	if r.p.LearnAttemptTime {
		if l := time.Duration(r.learned.Load()); l > m {
			m = l
		}
	}
	return m
}

// learn folds one latency into the moving average (weight 1/8), without a
// lock; concurrent updates may lose a sample, which a moving average
// tolerates.
func (r *Retrier) learn(d time.Duration) {
	old := r.learned.Load()
	if old == 0 {
		r.learned.Store(int64(d))
		return
	}
	r.learned.Store(old + (int64(d)-old)/8)
}

// LearnedAttemptTime returns the moving average of successful attempt
// latency, or 0 before the first sample.
func (r *Retrier) LearnedAttemptTime() time.Duration { return time.Duration(r.learned.Load()) }

// Classify gives err's class with this retrier's classifier chain, then the
// defaults; an error nobody knows is NeverRetry ([Transient] with
// [WithRetryUnknown]).
func (r *Retrier) Classify(err error) Class { return classify(r.chain, err, r.unknown) }

// ClassifyAttempt is the class of an attempt that failed with err (non-nil),
// made for a caller whose context is ctx. It is the one statement of the
// cancellation rule that [Do] and the shells of httpx and grpcx follow:
//
//   - ctx is done: [Canceled], whatever err says. The caller's own
//     cancellation or deadline is never retried, and tells the breaker
//     nothing;
//   - otherwise err's class by [Retrier.Classify], except that Canceled
//     becomes [Timeout]: a deadline or cancellation the caller did not
//     cause is the attempt's own timeout, or a server that gave up on it.
func (r *Retrier) ClassifyAttempt(ctx context.Context, err error) Class {
	if ctx.Err() != nil {
		return Canceled
	}
	if c := r.Classify(err); c != Canceled {
		return c
	}
	return Timeout
}

// Samples reports whether EndAt reads its sample u: when the backoff or
// the throttling backoff is jittered ([backoff.Policy.Random]) or the
// policy retries by chance (RetryProbability below 1). Otherwise EndAt
// ignores u, and a caller whose sample costs a draw from a stream of its
// own (the simulator's) may pass 0 without drawing.
func (r *Retrier) Samples() bool {
	p := r.p.RetryProbability
	return r.p.Backoff.Random() || r.throttle.Random() || p != nil && *p < 1
}

// Sample returns a uniform sample in [0, 1) from the retrier's source
// (see [WithRand]), for shells to pass to EndAt.
func (r *Retrier) Sample() float64 { return r.rand() }

// NeedsClock reports whether the success path must read the clock (the
// budget is time-windowed, [Hooks].OnEvent is set and wants the request's
// duration, or the breaker counts over a window of time or is not closed);
// shells may pass the zero Time otherwise.
func (r *Retrier) NeedsClock() bool {
	return r.needClock || r.breaker != nil && r.breaker.NeedsClock()
}

// SkipsCall reports whether a shell may make a request's first attempt
// before starting its Call and, if that attempt succeeds, end the request
// with [Retrier.SucceededFirstAt] instead of StartContext, AllowAt and
// EndAt, as Do does: the retrier has no circuit breaker to ask and no hooks
// to tell, and its budget is a token bucket. If the attempt fails, the
// shell starts the Call then, with the time the attempt started, and goes
// on as usual.
func (r *Retrier) SkipsCall() bool { return r.plainEnd }

// SucceededFirstAt ends a request whose first attempt, made without a Call
// as [Retrier.SkipsCall] allows, started at start and succeeded at end: all
// EndAt would do, learn the attempt's time (when the policy learns it and
// both times were read; either may be the zero Time when the shell did not
// read the clock, as NeedsClock allows) and reward the budget.
func (r *Retrier) SucceededFirstAt(start, end time.Time) {
	if end != (time.Time{}) && r.p.LearnAttemptTime { // not end.IsZero(): this inlines
		r.learnFrom(start, end)
	}
	r.bucket.EndAt(end, budget.Success, budget.Ticket{})
}

// learnFrom learns the time of an attempt that started at start (the zero
// Time: unknown) and succeeded at end.
func (r *Retrier) learnFrom(start, end time.Time) {
	if took := end.Sub(start); !start.IsZero() && took > 0 {
		r.learn(took)
	}
}

// GiveUp builds the error a shell returns when the call ends in failure,
// after the attempt c, for reason (a Decision's Reason) with the last
// attempt's error, and runs the OnGiveUp hook and OnEvent's EventGaveUp
// (whose Took runs to the end of the last attempt, or to AbandonAt).
func (r *Retrier) GiveUp(c *Call, reason, last error) error {
	if r.hasHooks {
		if r.hooks.OnGiveUp != nil {
			r.hooks.OnGiveUp(reason, c.attempt, last)
		}
		r.event(c, Event{Kind: EventGaveUp, Attempt: c.attempt, Took: c.took, Reason: reason, Err: last})
	}
	return &GiveUpError{Reason: reason, Last: last, Attempts: c.attempt}
}

// needsClock reports whether a budget reads the time it is given: budgets
// may say so with a NeedsClock method; a budget that does not is assumed to.
func needsClock(b budget.Budget) bool {
	if n, ok := b.(interface{ NeedsClock() bool }); ok {
		return n.NeedsClock()
	}
	return true
}
