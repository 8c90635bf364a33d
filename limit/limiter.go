package limit

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/killswitch"
)

// Limiter admits requests while fewer than a limit are in flight, and learns
// the limit from the requests it admitted through an [Algorithm].
//
// [Limiter.AcquireAt] admits a request or refuses it; an admitted request
// holds a [Permit] and must end with exactly one of its release methods:
//
//	SuccessAt(now)   served: the RTT is a sample for the algorithm
//	DroppedAt(now)   failed from overload (a downstream timeout or rejection): a drop sample
//	IgnoreAt(now)    neither, e.g. the caller gave up or the request was invalid: no sample
//
// The in-flight count, the algorithm's limit and a lock bit that guards the
// algorithm share one atomic 64-bit word, so that a request pays at most
// three locked instructions: AcquireAt reads the word and compare-and-swaps
// the count up; a release with a sample compare-and-swaps the count down and
// takes the lock bit in the same step, runs the algorithm's Update, and
// clears the bit with one atomic add that also stores the new limit. IgnoreAt,
// and every release with [Fixed] (which learns nothing), only subtracts one.
// No callback is called while the bit is held. An acquire plus a release
// allocates nothing and costs about 38–42 ns on one goroutine with
// wall-clock instants, 43–46 ns with virtual ones (whose Time.Sub is
// slower), 28 ns with Fixed (BenchmarkLimiter on the project's VM;
// BENCHMARKS.md has the figures).
//
// A release that finds the bit held by another release waits for it: it
// re-reads the word a few times, then yields its processor between reads
// until the bit is free, so that every sample reaches the algorithm, in the
// order the releases took the bit, exactly as in the simulator, which runs
// the same code on one goroutine. Update holds the bit for some ns (4–12 ns
// in BenchmarkUpdate, more when its state comes from another core's cache),
// so a release rarely waits long; a release that waits still counts as in
// flight until it takes the bit. Skipping the sample instead of waiting was
// tried: under contention it lost up to half of the samples of Vegas and
// Gradient2 (a fifth to a third with 0.25 µs of work per request on two
// cores), which would make production learn from fewer samples than a
// simulation of the same traffic.
//
// The word holds the count as a signed 32-bit number and the algorithm's
// limit in 31 bits: a limit or an override above 2³¹ − 1 acts as 2³¹ − 1
// ([Spec] limits stop at 2³⁰), and a negative limit from an algorithm that
// breaks its contract acts as 0. A permit released twice makes the count
// wrong (InFlight may go negative) but cannot touch the lock or the limit.
//
// When a [killswitch.Dials] is attached ([WithDials]) and its limit override
// is set, the override replaces the algorithm's limit for admission; the
// algorithm still learns from samples, and takes over again when the
// override is removed.
//
// A Limiter is safe for concurrent use. The zero Limiter is not usable:
// build one with [NewLimiter]. It must not be copied after first use.
type Limiter struct {
	// What every acquire and release reads and writes fills one cache line
	// (a Limiter is 64 bytes, a size class whose objects start on a 64-byte
	// boundary), so that no other object shares it.
	state  atomic.Uint64 // in flight, update lock and the algorithm's limit (layout below)
	dials  *killswitch.Dials
	alg    Algorithm // guarded by the update lock (lockBit of state)
	static bool      // alg is a Fixed: releases need not feed it
	_      [64 - 40]byte
}

// The layout of Limiter.state, one 64-bit word:
//
//	bits 32–63  the number of requests in flight, a signed 32-bit count
//	bit  31     the update lock: set while one release runs alg.Update
//	bits 0–30   the algorithm's limit as of its last Update, 0 to 2³¹ − 1
//
// The count is on top so that adding or subtracting countOne never carries
// into the lock or the limit: a permit released twice makes the count
// wrong (negative, as InFlight reports) but cannot take or free the lock.
// The count only grows while it is below the limit admission applies, at
// most maxWordLimit, so it cannot overflow either.
const (
	limitMask    = 1<<31 - 1 // the algorithm's limit
	lockBit      = 1 << 31   // the update lock
	countShift   = 32
	countOne     = 1 << countShift         // one request in flight
	countMinus   = -countOne & (1<<64 - 1) // one request fewer, as a uint64 to Add
	maxWordLimit = limitMask               // the largest limit the word holds: 2³¹ − 1
)

// updateSpins is how many times a release re-reads the state word, while
// another release holds the update lock, before it starts yielding its
// processor between reads: about as long as an Update takes.
const updateSpins = 32

// wordLimit returns limit bounded to what the state word holds, [0, 2³¹ − 1].
func wordLimit(limit int) uint64 {
	return uint64(max(0, min(limit, maxWordLimit)))
}

// inFlightOf returns the in-flight count of the state word w.
func inFlightOf(w uint64) int64 { return int64(int32(w >> countShift)) }

// Option configures a [Limiter] in [NewLimiter].
type Option func(*Limiter)

// WithDials makes the limiter honour the limit override of d
// ([killswitch.Dials.LimitOverride]). A nil d means no dials.
func WithDials(d *killswitch.Dials) Option {
	return func(l *Limiter) { l.dials = d }
}

// NewLimiter returns a Limiter with nothing in flight, whose limit is alg's.
// The limiter takes alg over: the caller must not use it afterwards (Fixed,
// which has no state, excepted). NewLimiter panics if alg is nil.
func NewLimiter(alg Algorithm, opts ...Option) *Limiter {
	if alg == nil {
		panic("limit: NewLimiter with a nil Algorithm")
	}
	_, static := alg.(Fixed)
	l := &Limiter{alg: alg, static: static}
	l.state.Store(wordLimit(alg.Limit()))
	for _, o := range opts {
		o(l)
	}
	return l
}

// AcquireAt admits a request that starts at now, if fewer requests than the
// limit (see [Limiter.Limit]) are in flight: it returns a Permit and true,
// and the request counts as in flight until the permit is released. Else it
// returns the zero Permit and false, and nothing changes: a refusal is not a
// sample. now is the request's start, from which its RTT is measured.
func (l *Limiter) AcquireAt(now time.Time) (Permit, bool) {
	override, overridden := l.override()
	for {
		w := l.state.Load()
		limit := int64(w & limitMask)
		if overridden {
			limit = int64(override)
		}
		n := inFlightOf(w)
		if n >= limit {
			return Permit{}, false
		}
		if l.state.CompareAndSwap(w, w+countOne) {
			return Permit{l: l, start: now, inFlight: int(n + 1)}, true
		}
	}
}

// Acquire is AcquireAt(time.Now()).
func (l *Limiter) Acquire() (Permit, bool) { return l.AcquireAt(time.Now()) }

// Limit returns the limit that admission applies now: the dials' override
// when one is set, else the algorithm's limit as of its last sample. Either
// is capped at 2³¹ − 1, the most the limiter holds.
func (l *Limiter) Limit() int {
	if o, ok := l.override(); ok {
		return o
	}
	return l.AlgorithmLimit()
}

// override returns the dials' limit override, capped at maxWordLimit, and
// whether one is set.
func (l *Limiter) override() (int, bool) {
	if l.dials == nil {
		return 0, false
	}
	o, ok := l.dials.LimitOverride()
	return min(o, maxWordLimit), ok
}

// AlgorithmLimit returns the algorithm's limit as of its last sample,
// whatever the override.
func (l *Limiter) AlgorithmLimit() int { return int(l.state.Load() & limitMask) }

// InFlight returns the number of requests admitted and not yet released.
func (l *Limiter) InFlight() int { return int(inFlightOf(l.state.Load())) }

// release ends the request of a permit admitted at start with n in flight.
// When record, the algorithm gets a sample (a drop if dropped); if another
// release holds the update lock, release waits for it.
func (l *Limiter) release(start time.Time, n int, now time.Time, record, dropped bool) {
	if !record || l.static {
		l.state.Add(countMinus)
		return
	}
	s := Sample{Now: now, RTT: now.Sub(start), InFlight: n, Dropped: dropped}
	w := l.state.Load()
	for spins := 0; ; spins++ {
		if w&lockBit == 0 {
			// Leave and take the lock in one step.
			if l.state.CompareAndSwap(w, (w-countOne)|lockBit) {
				break
			}
		} else if spins >= updateSpins {
			runtime.Gosched() // the holder may need this processor to finish
		}
		w = l.state.Load()
	}
	// The lock is ours: no other release touches alg or the limit bits until
	// the Add below, which stores the new limit and clears the bit at once.
	limit := wordLimit(l.alg.Update(s))
	l.state.Add(limit - w&limitMask - lockBit)
}

// Permit is an admitted request's hold on a [Limiter] slot. Release it with
// exactly one of SuccessAt, DroppedAt or IgnoreAt (or their wall-clock
// shorthands); releasing one twice corrupts the in-flight count. The zero
// Permit (from a refused acquire) holds nothing: releasing it does nothing.
//
// A Permit is a small value (40 bytes); pass it by value. It is meant to be
// released once, by one goroutine.
type Permit struct {
	l        *Limiter
	start    time.Time
	inFlight int // in flight at admission, this request included
}

// SuccessAt releases the permit of a request served at now; now − start is
// an RTT sample for the algorithm.
func (p Permit) SuccessAt(now time.Time) {
	if p.l != nil {
		p.l.release(p.start, p.inFlight, now, true, false)
	}
}

// DroppedAt releases the permit of a request that failed from overload at
// now (a call it made timed out, or was rejected or shed downstream): the
// algorithm records a drop. When the caller is the one who gave up, use
// IgnoreAt instead.
func (p Permit) DroppedAt(now time.Time) {
	if p.l != nil {
		p.l.release(p.start, p.inFlight, now, true, true)
	}
}

// IgnoreAt releases the permit without a sample: use it when the request's
// latency says nothing about the server's load (the caller gave up or
// cancelled, the request was invalid), so that it neither raises nor lowers
// the limit. now is not used; it is there for symmetry.
func (p Permit) IgnoreAt(now time.Time) {
	if p.l != nil {
		p.l.release(p.start, p.inFlight, now, false, false)
	}
}

// Success is SuccessAt(time.Now()).
func (p Permit) Success() { p.SuccessAt(time.Now()) }

// Dropped is DroppedAt(time.Now()).
func (p Permit) Dropped() { p.DroppedAt(time.Now()) }

// Ignore is IgnoreAt(time.Now()), except that it does not read the clock,
// since IgnoreAt does not use the time.
func (p Permit) Ignore() { p.IgnoreAt(time.Time{}) }

// Start returns when the permit's request was admitted, the zero Time for
// the zero Permit.
func (p Permit) Start() time.Time { return p.start }
