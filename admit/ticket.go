package admit

import (
	"context"
	"time"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/wire"
)

// Ticket is an admitted request's hold on a [Gate]'s slot, and what the gate
// decided about it: its deadline, attempt number and criticality. Release it
// with [Ticket.Release] exactly once, when the work ends; releasing one twice
// corrupts the counts. The zero Ticket (of a refused request) holds nothing
// and releasing it does nothing.
//
// A Ticket is a small value; pass it by value. It is meant to be released
// once, by one goroutine.
type Ticket struct {
	g        *Gate
	permit   limit.Permit
	deadline time.Time
	attempt  int
	crit     wire.Criticality
	ref      Ref // the core's reference to a request whose key the supersession table may hold
}

// Deadline returns the request's deadline: the earliest of arrival +
// MaxTimeout, arrival + the caller's timeout and its context's deadline.
func (t Ticket) Deadline() time.Time { return t.deadline }

// Attempt returns the request's attempt number, 1 or more.
func (t Ticket) Attempt() int { return t.attempt }

// Criticality returns the request's criticality.
func (t Ticket) Criticality() wire.Criticality { return t.crit }

// Bind returns the context to run the request's work with: parent with the
// request's deadline, attempt number and criticality, as [deadline.Bind]
// makes it (the [deadline] package's accessors read them, and a client
// shell that sends with it propagates them). Call cancel when the work
// ends.
func (t Ticket) Bind(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	return deadline.Bind(parent, t.deadline, t.attempt, t.crit)
}

// Outcome is how the work of an admitted request ended, as the shell sees
// it; see the package documentation for how each is counted and what the
// concurrency limit learns from it.
type Outcome uint8

// The outcomes.
const (
	// Succeeded: the work succeeded (on HTTP a status below 500; on gRPC a
	// code that maps to one). Its time is an RTT sample.
	Succeeded Outcome = iota
	// SucceededUntimed: the work succeeded but its time says nothing about
	// load (an HTTP connection hijacked, which lives on).
	SucceededUntimed
	// FailedOverload: the work failed because a call it made was refused
	// or timed out downstream (503 or 504; UNAVAILABLE or
	// DEADLINE_EXCEEDED): a sign of overload.
	FailedOverload
	// Failed: the work failed for another reason, such as a bug (another
	// status of 500 or more; UNKNOWN, INTERNAL, …): it says nothing about
	// load.
	Failed
	// Panicked: the work panicked (and the panic goes on).
	Panicked
)

// Joinable reports whether requests may join this one while it runs: it
// carries an idempotency key the gate tracks (Config.Supersede is set). Its
// shell then keeps a replayable copy of the response and passes it to
// [Ticket.ReleaseWith], so that those requests are answered with it.
func (t Ticket) Joinable() bool { return t.ref.Keyed() }

// Release ends the request's hold on its slot at now, the time its work
// ended, counts it and, if requests are waiting, hands the slot on. ctx is
// the request's own context, the one passed to [Gate.Admit]: if it has
// ended, the caller went away. The request is counted, and its permit
// released, as the package documentation's table says: a panic first, then
// a deadline that passed, then a caller that left, then o.
func (t Ticket) Release(ctx context.Context, now time.Time, o Outcome) {
	t.ReleaseWith(ctx, now, o, nil)
}

// ReleaseWith is [Ticket.Release] for a request that others may have
// joined ([Ticket.Joinable]): they are answered with result, the shell's
// record of the response, as their [Decision].Result (Joined), only when
// the request completed for a caller that was still waiting (see
// [Core.EndAt]): result not nil, the work did not panic, its deadline had
// not passed and its context had not ended. Otherwise they go through the
// gate again (the first of them runs, the others join it): a response its
// own caller did not wait for (an empty 200 of a handler that returned
// when its context ended, a 499, a 408, a gRPC CANCELED) is never replayed.
// For a request nobody may join, result is ignored.
func (t Ticket) ReleaseWith(ctx context.Context, now time.Time, o Outcome, result any) {
	g := t.g
	if g == nil {
		return
	}
	gone := ctx.Err() != nil
	if t.ref.Keyed() {
		g.mu.Lock()
		_, acts := g.core.EndAt(now, t.ref, &t.permit, t.deadline, gone, o, result)
		g.execLocked(acts, nil)
		g.mu.Unlock()
		return
	}
	if _, handOn := g.core.ReleaseAt(now, &t.permit, t.deadline, gone, o); handOn {
		// The release above and this load pair with EnterAt's acquire and
		// the queue length a locked step stores: one of the two sides sees
		// the other, so a freed slot never goes unnoticed by a waiter.
		g.mu.Lock()
		g.execLocked(g.core.DispatchAt(time.Now()), nil)
		g.mu.Unlock()
	}
}
