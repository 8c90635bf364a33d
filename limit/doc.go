// Package limit bounds the number of requests a server works on at once with
// a concurrency limit that adapts to the latency it observes, in the manner
// of TCP congestion control: when requests start to queue, round-trip times
// grow, and the limit shrinks until they stop growing.
//
// The package has two layers.
//
// An [Algorithm] is a deterministic core: a plain state machine fed one
// [Sample] per finished request, which returns the new limit. It never reads
// the clock (the time is part of the sample), never sleeps, starts no
// goroutine, takes no lock and allocates nothing, so the simulator drives
// the very same code in virtual time. Algorithms are not safe for concurrent
// use. The implementations:
//
//	Fixed       a constant limit
//	AIMD        +1 per good sample, × 0.9 on a drop or a timeout (loss-based)
//	Vegas       estimates the queue from the minimum RTT; +/− log10(limit) (delay-based, Netflix's default)
//	Gradient2   limit × (long-term RTT / current RTT) + queue, smoothed (delay-based)
//
// A [Limiter] is the concurrent shell used by the HTTP and gRPC middleware.
// [Limiter.AcquireAt] admits a request while fewer than the limit are in
// flight and hands back a [Permit]; the request ends with exactly one of
// [Permit.SuccessAt], [Permit.IgnoreAt] or [Permit.DroppedAt], which releases
// the slot and feeds the algorithm (or, for Ignore, does not). A
// [killswitch.Dials] limit override, when set, takes precedence over the
// algorithm.
//
// Configuration is plain data: [Spec] names an algorithm by [Kind] and
// carries an [AIMDConfig], [VegasConfig] or [Gradient2Config] whose zero
// fields mean the documented defaults (those of Netflix's concurrency-limits
// library where it has one), so that scenario files, presets and production
// code share one description.
package limit
