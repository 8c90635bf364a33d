package schema

import (
	"context"
	"errors"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
)

// The values of label try.
const (
	TryFirst = "first"
	TryRetry = "retry"
)

// Tries lists the values of label try, in the order of the indexes
// [ServerSnapshot].Offered uses.
var Tries = [...]string{TryFirst, TryRetry}

// Try returns the value of label try for an attempt number.
func Try(attempt int) string {
	if attempt > 1 {
		return TryRetry
	}
	return TryFirst
}

// Classes lists every retry class: the values of label class (their
// String), in the order of [AttemptSeries].
var Classes = [...]retry.Class{
	retry.Success, retry.Transient, retry.Throttling, retry.Timeout,
	retry.NeverRetry, retry.Canceled, retry.ServiceOverloaded, retry.RetriesExhausted,
}

// Labels are a series' label values beyond target, in the order of its
// Metric's Labels after target.
type Labels []string

// NumAttemptSeries is the number of series of ClientAttempts per target.
const NumAttemptSeries = len(Tries) * len(Classes)

// AttemptSeries returns the label values (try, class) of every series of
// [ClientAttempts], indexed as [AttemptIndex] indexes them.
func AttemptSeries() []Labels {
	s := make([]Labels, 0, NumAttemptSeries)
	for _, try := range Tries {
		for _, c := range Classes {
			s = append(s, Labels{try, c.String()})
		}
	}
	return s
}

// AttemptIndex returns the index in [AttemptSeries] of an attempt of number
// attempt that ended with class c, and false for a class the schema does
// not know.
func AttemptIndex(attempt int, c retry.Class) (int, bool) {
	if int(c) >= len(Classes) {
		return 0, false
	}
	i := int(c)
	if attempt > 1 {
		i += len(Classes)
	}
	return i, true
}

// The values of label outcome on the client.
const (
	OutcomeSuccess = "success"
	OutcomeGaveUp  = "gave-up"
)

// GiveUpReasons are the reasons retrying stops and their values of label
// reason; any other reason is "other".
var GiveUpReasons = [...]struct {
	Err   error
	Label string
}{
	{retry.ErrAttemptsExhausted, "attempts-exhausted"},
	{retry.ErrBudgetExhausted, "budget-exhausted"},
	{retry.ErrDeadline, "deadline"},
	{retry.ErrNotRetryable, "not-retryable"},
	{retry.ErrServerSaidStop, "server-said-stop"},
	{retry.ErrRetriesDisabled, "retries-disabled"},
	{retry.ErrCanceled, "canceled"},
	{retry.ErrRetryDeclined, "retry-declined"},
	{retry.ErrBreakerOpen, "breaker-open"},
}

// ReasonOther is the value of label reason for a give-up reason the schema
// does not know.
const ReasonOther = "other"

// NumRequestSeries is the number of series of ClientRequestDuration per
// target: success, then each give-up reason, then other.
const NumRequestSeries = 1 + len(GiveUpReasons) + 1

// RequestSeries returns the label values (outcome, reason) of every series
// of [ClientRequestDuration], indexed as [RequestIndex] indexes them.
func RequestSeries() []Labels {
	s := make([]Labels, 0, NumRequestSeries)
	s = append(s, Labels{OutcomeSuccess, ""})
	for _, r := range GiveUpReasons {
		s = append(s, Labels{OutcomeGaveUp, r.Label})
	}
	return append(s, Labels{OutcomeGaveUp, ReasonOther})
}

// RequestIndex returns the index in [RequestSeries] of a request that
// ended for reason (nil: success).
func RequestIndex(reason error) int {
	if reason == nil {
		return 0
	}
	for i, r := range GiveUpReasons {
		if reason == r.Err {
			return 1 + i
		}
	}
	for i, r := range GiveUpReasons { // a wrapped reason: the slow path
		if errors.Is(reason, r.Err) {
			return 1 + i
		}
	}
	return NumRequestSeries - 1
}

// GiveUpLabel returns the value of label reason for a give-up reason.
func GiveUpLabel(reason error) string { return RequestSeries()[RequestIndex(reason)][1] }

// ClientRecorder receives a retrier's events as moves of the client's
// series, by index; an exporter supplies the two functions and
// [ClientRecorder.Hooks] does the rest, so that every exporter counts the
// same events the same way.
type ClientRecorder struct {
	// Attempt adds 1 to series i of ClientAttempts ([AttemptSeries]).
	Attempt func(ctx context.Context, i int)
	// Request observes seconds in series i of ClientRequestDuration
	// ([RequestSeries]).
	Request func(ctx context.Context, i int, seconds float64)
}

// Hooks returns the retry hooks that feed rec: every attempt that ends
// moves one series of ClientAttempts, every request that ends (succeeded or
// gave up) one series of ClientRequestDuration. They allocate nothing.
func (rec ClientRecorder) Hooks() retry.Hooks {
	return retry.Hooks{OnEvent: func(ctx context.Context, e retry.Event) {
		switch e.Kind {
		case retry.EventAttempt:
			if i, ok := AttemptIndex(e.Attempt, e.Class); ok {
				rec.Attempt(ctx, i)
			}
		case retry.EventSucceeded:
			rec.Request(ctx, 0, e.Took.Seconds())
		case retry.EventGaveUp:
			rec.Request(ctx, RequestIndex(e.Reason), e.Took.Seconds())
		}
	}}
}

// BudgetReaders returns the functions that read a retry budget's gauges:
// its level (ClientBudgetTokens) and capacity (ClientBudgetCapacity) for
// the budgets that have them — budget.TokenBucket (Level, Capacity),
// budget.TokenRatio (Level, MaxTokens), or any budget with those methods —
// and whether it has fallen back (ClientBudgetFallback) for a budget shared
// by a fleet (a Fallback() bool method, as fleet.Budget has). Each is nil
// when b has no such reading.
func BudgetReaders(b budget.Budget) (level, capacity func() float64, fallback func() bool) {
	if fb, ok := b.(interface{ Fallback() bool }); ok {
		fallback = fb.Fallback
	}
	lv, ok := b.(interface{ Level() float64 })
	if !ok {
		return nil, nil, fallback
	}
	level = lv.Level
	switch c := b.(type) {
	case interface{ Capacity() float64 }:
		capacity = c.Capacity
	case interface{ MaxTokens() float64 }:
		capacity = c.MaxTokens
	}
	return level, capacity, fallback
}

// The values of label outcome on the server, and the reasons that go with
// them.
const (
	OutcomeGoodput  = "goodput"  // succeeded while the caller was waiting
	OutcomeFailed   = "failed"   // failed while the caller was waiting, or panicked
	OutcomeWasted   = "wasted"   // returned after the deadline passed or the caller left: work nobody waited for
	OutcomeShed     = "shed"     // refused for overload before it started
	OutcomeExpired  = "expired"  // dropped before it started: its deadline had passed or left too little
	OutcomeCanceled = "canceled" // its caller left while it was queued, or waited for its twin
	// OutcomeSuperseded: collapsed with a twin of the same idempotency key
	// (admit.Config.Supersede) without running: replaced in the queue by a
	// newer twin, or answered with the result of a twin in service.
	OutcomeSuperseded = "superseded"

	ReasonDeadline   = "deadline"    // wasted: the work outlived its deadline
	ReasonCallerLeft = "caller-left" // wasted: the caller went away before the deadline
	ReasonOnArrival  = "on-arrival"  // expired: too little time left when it arrived
	ReasonInQueue    = "in-queue"    // expired: its time ran out while it waited in the queue
	ReasonReplaced   = "replaced"    // superseded: a newer twin took its place in the queue (HTTP 409, ALREADY_EXISTS)
	ReasonJoined     = "joined"      // superseded: it waited for its twin in service and got its result
)

// NumServerOutcomes is the number of series of ServerRequests per target.
const NumServerOutcomes = 1 + 1 + 2 + int(admit.NumShedReasons) + 2 + 1 + 2

// ServerOutcomes returns the label values (outcome, reason) of every series
// of [ServerRequests], in the order of [ServerSnapshot].Requests: goodput,
// failed, wasted by reason, shed by reason (the admit.ShedReason names:
// queue-full, evicted, queue-timeout, kill-switch, throttled, key-busy),
// expired by reason, canceled, superseded by reason (replaced, joined).
func ServerOutcomes() []Labels {
	s := make([]Labels, 0, NumServerOutcomes)
	s = append(s, Labels{OutcomeGoodput, ""}, Labels{OutcomeFailed, ""},
		Labels{OutcomeWasted, ReasonDeadline}, Labels{OutcomeWasted, ReasonCallerLeft})
	for r := range admit.ShedReason(admit.NumShedReasons) {
		s = append(s, Labels{OutcomeShed, r.String()})
	}
	return append(s, Labels{OutcomeExpired, ReasonOnArrival}, Labels{OutcomeExpired, ReasonInQueue},
		Labels{OutcomeCanceled, ""}, Labels{OutcomeSuperseded, ReasonReplaced}, Labels{OutcomeSuperseded, ReasonJoined})
}

// ServerSnapshot is a server's counters read into the schema's series.
type ServerSnapshot struct {
	// Offered is ServerOffered by try, as [Tries] orders them.
	Offered [len(Tries)]uint64
	// Requests is ServerRequests, as [ServerOutcomes] orders them.
	Requests [NumServerOutcomes]uint64
	// Limit, InFlight and Queued are the gauges ServerConcurrencyLimit,
	// ServerInFlight and ServerQueued.
	Limit, InFlight, Queued int
}

// ServerValues reads a server's snapshot st (httpx.Server.Stats,
// grpcx.Server.Stats, admit.Gate.Stats) into the schema's series. Each
// request that ended is in exactly one element of Requests.
func ServerValues(st admit.Stats) ServerSnapshot {
	s := ServerSnapshot{Limit: st.Limit, InFlight: st.InFlight, Queued: st.Queued}
	s.Offered[0] = st.Arrived - min(st.Retries, st.Arrived)
	s.Offered[1] = st.Retries
	late := min(st.WastedLate, st.Wasted)
	queued := min(st.ExpiredQueued, st.Expired)
	i := 0
	for _, v := range []uint64{st.Goodput, st.Failed, late, st.Wasted - late} {
		s.Requests[i] = v
		i++
	}
	for _, v := range st.Shed {
		s.Requests[i] = v
		i++
	}
	s.Requests[i], s.Requests[i+1], s.Requests[i+2] = st.Expired-queued, queued, st.Canceled
	s.Requests[i+3], s.Requests[i+4] = st.Superseded, st.Joined
	return s
}

// Span events: the names and attributes the OpenTelemetry exporter puts on
// the active span, listed here so that the documentation and any other
// tracer share them.
const (
	// SpanAttempt: an attempt ended (client). Attributes: target, attempt,
	// try, class, duration.
	SpanAttempt = "stormguard.attempt"
	// SpanRetry: a retry was granted (client). Attributes: target,
	// attempt (the one that failed), delay.
	SpanRetry = "stormguard.retry"
	// SpanGaveUp: a request ended in failure (client). Attributes: target,
	// attempts, reason, duration, error.
	SpanGaveUp = "stormguard.gave_up"
	// SpanShed, SpanExpired, SpanCanceled: the server refused a request
	// before its handler ran. Attributes: target, attempt, try, outcome,
	// reason, answer.
	SpanShed     = "stormguard.shed"
	SpanExpired  = "stormguard.expired"
	SpanCanceled = "stormguard.canceled"
	// SpanSuperseded: the server collapsed the request with a twin of the
	// same idempotency key (reason replaced or joined). Attributes: those
	// of SpanShed.
	SpanSuperseded = "stormguard.superseded"
	// SpanBreakerTransition: a circuit breaker changed state. Attributes:
	// target, from, to.
	SpanBreakerTransition = "stormguard.breaker.transition"

	AttrTarget   = "stormguard.target"
	AttrAttempt  = "stormguard.attempt"  // int: the attempt number; on SpanGaveUp the attempts made
	AttrTry      = "stormguard.try"      // first or retry
	AttrClass    = "stormguard.class"    // a retry class
	AttrDuration = "stormguard.duration" // float64, seconds: the attempt's, or the request's
	AttrDelay    = "stormguard.delay"    // float64, seconds: the wait before the retry
	AttrOutcome  = "stormguard.outcome"  // a server outcome
	AttrReason   = "stormguard.reason"   // a give-up reason, or the server outcome's reason
	AttrAnswer   = "stormguard.answer"   // the admit.Answer the server sent
	AttrError    = "stormguard.error"    // the last attempt's error
	AttrFrom     = "stormguard.from"     // a breaker's state before
	AttrTo       = "stormguard.to"       // and after
)

// Refusal returns the outcome and reason of a request a server did not
// admit (admit.Config.OnRefuse's decision), and the span event that tells
// of it.
func Refusal(d admit.Decision) (outcome, reason, event string) {
	switch d.Answer {
	case admit.Expired:
		return OutcomeExpired, "", SpanExpired
	case admit.Canceled:
		return OutcomeCanceled, "", SpanCanceled
	case admit.Superseded:
		return OutcomeSuperseded, ReasonReplaced, SpanSuperseded
	case admit.Joined:
		return OutcomeSuperseded, ReasonJoined, SpanSuperseded
	default:
		return OutcomeShed, d.Reason.String(), SpanShed
	}
}

// The values of label origin (killswitch.Origin's names).
var Origins = [...]string{"none", "local", "fleet"}

// DialsSnapshot is a Dials' state read into the schema's series.
type DialsSnapshot struct {
	// RetriesOff, ShedRatio and LimitOverride are the gauges
	// DialsRetriesOff (0 or 1), DialsShedRatio and DialsLimitOverride.
	RetriesOff, ShedRatio, LimitOverride float64
	// ChangedAt is DialsLastChange: Unix seconds, 0 if never changed;
	// Origin its label.
	ChangedAt float64
	Origin    string
}

// DialsValues reads the dials d into the schema's series.
func DialsValues(d *killswitch.Dials) DialsSnapshot {
	var s DialsSnapshot
	if d.RetriesDisabled() {
		s.RetriesOff = 1
	}
	s.ShedRatio = d.ShedFraction()
	if l, ok := d.LimitOverride(); ok {
		s.LimitOverride = float64(l)
	}
	c := d.LastChange()
	s.Origin = c.Origin.String()
	if !c.At.IsZero() {
		s.ChangedAt = float64(c.At.UnixNano()) / 1e9
	}
	return s
}
