package limit

import "time"

// Sample describes one finished request, as an [Algorithm] sees it.
//
// A Sample is plain data. The [Limiter] builds one on every
// [Permit.SuccessAt] and [Permit.DroppedAt]; the simulator builds its own.
type Sample struct {
	// Now is when the request finished. The built-in algorithms do not use
	// it (their periods are counted in samples), but it is part of the
	// protocol so that an algorithm may keep time-based state without a
	// clock of its own.
	Now time.Time
	// RTT is how long the request was in flight: from admission to the end.
	// The delay-based algorithms skip a sample whose RTT is not positive
	// unless it is a drop.
	RTT time.Duration
	// InFlight is the number of requests in flight when this one was
	// admitted, itself included (so at least 1 for a real request). The
	// algorithms use it to tell a saturated server from an idle one: a
	// sample whose InFlight is below half of the limit says nothing about
	// what a larger limit would do ("application-limited"), so AIMD does
	// not raise the limit on it, and Vegas and Gradient2 leave the limit
	// alone (a Vegas drop excepted).
	InFlight int
	// Dropped reports that the request failed because of overload: a call
	// it made timed out, or was rejected or shed downstream. AIMD and Vegas lower the
	// limit on a drop; Gradient2 ignores drops (as in Netflix's library) and
	// reacts to latency only.
	Dropped bool
}

// Algorithm is an adaptive concurrency-limit algorithm: a deterministic
// state machine that turns samples into a limit.
//
// Implementations are not safe for concurrent use; [Limiter] adds the
// locking. They must not read the wall clock, sleep or block, and should not
// allocate in Update.
type Algorithm interface {
	// Update records one finished request and returns the limit that
	// applies from now on, which is also what Limit returns afterwards. The
	// limit is at least 1.
	Update(s Sample) int
	// Limit returns the current limit, at least 1.
	Limit() int
}

// Fixed is an [Algorithm] whose limit never changes: a plain concurrency
// cap, for comparisons and for servers whose capacity is known.
//
// The zero Fixed has limit 0, which Limit and Update report as 1. A Fixed is
// plain data: copy it freely; it is safe for concurrent use, since Update
// changes nothing.
type Fixed struct {
	// N is the limit; values below 1 mean 1.
	N int
}

var _ Algorithm = Fixed{}

// Update ignores s and returns the limit.
func (f Fixed) Update(Sample) int { return f.Limit() }

// Limit returns max(1, N).
func (f Fixed) Limit() int { return max(1, f.N) }

// clamp returns v bounded to [lo, hi].
func clamp(v, lo, hi float64) float64 {
	return max(lo, min(hi, v))
}
