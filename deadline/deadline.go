// Package deadline carries stormguard's per-request signals in a
// context.Context: the attempt number and the criticality a server read from
// the wire, and the time left before the context's deadline.
//
// The server middleware (httpx, grpcx) puts the values in the context it
// hands to the handler; client shells read them back when the handler calls
// further down, so that the signals travel hop by hop. The deadline itself is
// the context's own (context.WithDeadline): there is nothing to store, only
// [Remaining] to read it with an explicit now.
//
// The keys are unexported types: only the accessors of this package can set
// or read the values. Every function is safe for concurrent use.
package deadline

import (
	"context"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// attemptKey and criticalityKey are the context keys. Being distinct
// unexported types, they cannot collide with any other package's keys.
type (
	attemptKey     struct{}
	criticalityKey struct{}
)

// WithAttempt returns a copy of ctx that carries attempt number n: 1 for a
// first try, 2 for the first retry, and so on. n is clamped to
// [1, wire.MaxAttempt], as on the wire.
func WithAttempt(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptKey{}, min(max(n, 1), wire.MaxAttempt))
}

// Attempt returns the attempt number ctx carries, or 1 when it carries none:
// a request that does not say is a first try.
func Attempt(ctx context.Context) int {
	if n, ok := ctx.Value(attemptKey{}).(int); ok {
		return n
	}
	return 1
}

// WithCriticality returns a copy of ctx that carries criticality c.
func WithCriticality(ctx context.Context, c wire.Criticality) context.Context {
	return context.WithValue(ctx, criticalityKey{}, c)
}

// Criticality returns the criticality ctx carries, or
// [wire.DefaultCriticality] (critical) when it carries none.
func Criticality(ctx context.Context) wire.Criticality {
	if c, ok := ctx.Value(criticalityKey{}).(wire.Criticality); ok {
		return c
	}
	return wire.DefaultCriticality
}

// Remaining returns the time left at now before the deadline of ctx, and
// true; or 0 and false when ctx has no deadline. The duration is zero or
// negative once the deadline has passed: the work should then be dropped,
// not started.
func Remaining(ctx context.Context, now time.Time) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(now), true
}
