// Package budget bounds the retries of a whole client, across all of its
// requests, where an attempt cap bounds only one request.
//
// Every implementation satisfies [Budget], a three-call protocol:
//
//	BeginAt(now)              a request's first attempt starts
//	RetryAt(now, cause)       may a retry start? if ok, it has been paid for
//	EndAt(now, outcome, t)    an attempt ended (t is the ticket RetryAt gave, or the zero Ticket for a first try)
//
// Every BeginAt and every granted RetryAt is followed by exactly one EndAt,
// also when a granted retry is abandoned before it starts (pass [Ignore]).
//
// Time is always an argument (the …At forms), so the simulator drives the
// same code in virtual time. All implementations are safe for concurrent use
// and allocate nothing. Their zero values refuse every retry (except
// [Unlimited], which allows every one): build them with [Spec.New] or their
// New… constructors.
//
// The implementations:
//
//	TokenBucket   retries cost tokens by cause, first-try successes earn them (AWS SDKs)
//	TokenRatio    failures cost a token, successes earn a fraction; retry while more than half full (gRPC)
//	Window        retries ≤ ratio × requests + floor × seconds over a sliding window (SRE, Finagle, Linkerd)
//	Concurrency   retries in flight ≤ max(percent × attempts in flight, min) (Envoy)
//	Unlimited     no budget
package budget

import (
	"fmt"
	"time"
)

// Budget is a retry budget shared by all the requests of one client.
type Budget interface {
	// BeginAt records that a request's first attempt starts.
	BeginAt(now time.Time)
	// RetryAt asks whether a retry may start after an attempt failed with
	// the given cause. When ok, the retry has been charged and the returned
	// ticket must be passed to the EndAt of that retry.
	RetryAt(now time.Time, c Cause) (t Ticket, ok bool)
	// EndAt records how an attempt ended. t is the ticket of the retry, or
	// the zero Ticket for a first attempt.
	EndAt(now time.Time, o Outcome, t Ticket)
}

// Cause is why the failed attempt is being retried; cost-based budgets price
// retries by cause.
type Cause uint8

// The causes of a retry.
const (
	Transient  Cause = iota // connection reset, 500, 502, 503, 504, UNAVAILABLE …
	Throttling              // 429, RESOURCE_EXHAUSTED, SlowDown …: the server asked to slow down
	Timeout                 // the attempt timed out
)

// String returns the cause's name in lower case.
func (c Cause) String() string {
	switch c {
	case Transient:
		return "transient"
	case Throttling:
		return "throttling"
	case Timeout:
		return "timeout"
	}
	return fmt.Sprintf("budget.Cause(%d)", uint8(c))
}

// Outcome is how an attempt ended, as far as a budget is concerned.
type Outcome uint8

// The outcomes of an attempt.
const (
	// Success: the attempt succeeded.
	Success Outcome = iota
	// Failure: the attempt failed with an error that counts against the
	// dependency (a retryable error, a timeout, throttling).
	Failure
	// Ignore: the attempt ended in a way that says nothing about the
	// dependency (the caller cancelled, a non-retryable error, or a granted
	// retry that was abandoned before it started).
	Ignore
)

// String returns the outcome's name in lower case.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	}
	return fmt.Sprintf("budget.Outcome(%d)", uint8(o))
}

// Ticket is the receipt of a granted retry. The zero Ticket stands for a
// first attempt. It is a small value; copy it freely. A ticket belongs to the
// budget that issued it: pass it to that budget's EndAt only.
type Ticket struct {
	// cost is what the issuing budget needs to undo the grant: the charge in
	// milli-tokens for [TokenBucket], the number of the slot that counted the
	// retry for [Window] (modulo 2³²), 0 elsewhere.
	cost  int32
	retry bool
}

// Retry reports whether the ticket belongs to a retry (not a first attempt).
func (t Ticket) Retry() bool { return t.retry }

// NewTicket returns a retry's ticket that carries data, for budgets built
// outside this package (a fleet budget, a simulator's model): a cost in
// milli-tokens, or any other number the issuing budget needs to undo the
// grant. Only the budget that issued a ticket reads its data.
func NewTicket(data int32) Ticket { return Ticket{cost: data, retry: true} }

// Data returns the number the issuing budget stored in the ticket (for a
// [TokenBucket], the charge in milli-tokens).
func (t Ticket) Data() int32 { return t.cost }

// Unlimited is the budget that always allows retries. Use it to mean "no
// budget" without a nil check on the hot path. It has no state: the zero value
// is the only value, it is safe for concurrent use and it costs nothing.
type Unlimited struct{}

// BeginAt does nothing.
func (Unlimited) BeginAt(time.Time) {}

// RetryAt always grants the retry.
func (Unlimited) RetryAt(time.Time, Cause) (Ticket, bool) { return Ticket{retry: true}, true }

// EndAt does nothing.
func (Unlimited) EndAt(time.Time, Outcome, Ticket) {}

var _ Budget = Unlimited{}
