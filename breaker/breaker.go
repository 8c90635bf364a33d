// Package breaker is a circuit breaker as a deterministic core: time and
// randomness are arguments or injected, it never sleeps, never starts a
// goroutine and never reads the clock, so the simulator drives the same code
// in virtual time that production runs in wall-clock time.
//
// A breaker protects a dependency that is failing from calls that would
// fail anyway, and the caller from waiting for them: while it is open, calls
// are refused at once, unsent. Retry budgets bound the retries; a breaker
// bounds the calls themselves. The two answer different failures: a partial
// failure (10 % of calls fail) trips a sensitive breaker and refuses the 90 %
// that would have succeeded, while a budget keeps serving them; a total
// failure is what a breaker is for.
//
// A breaker may instead stop retries only ([StopsRetries], Brooker 2022):
// open, it refuses retries and hedges while first tries go through, so a
// partial failure costs the share that fails and the load on the
// dependency is never more than the first tries.
//
// The protocol, for every call:
//
//	p, ok := b.AllowAt(now)   may the call start? if not, do not send it
//	b.EndAt(now, p, outcome)  the call ended: Success, Failure or Ignore
//
// with [Breaker.AllowFirstAt] in place of AllowAt for a request's first
// try. Every granted AllowAt is followed by exactly one EndAt (Ignore for a
// call that was never sent). Which results are failures is the caller's
// choice; package retry maps its classes and tells first tries from retries
// (see retry.WithBreaker).
//
// The presets ([Preset]), as plain data:
//
//	name        mode         opens when                       open for     half-open
//	failsafe    consecutive  1 failure                        1 min        1 probe, 1 success closes
//	gobreaker   consecutive  6 failures in a row              60 s         1 probe, 1 success closes
//	rate        rate         ≥ 50 % of ≥ 20 calls in 10 s     5 s ± 20 %   3 probes, 3 successes close
//	stormguard  consecutive  5 failures in a row              5 s ± 20 %   1 probe, 2 successes close
//
// Every preset stops calls; Brooker's breaker is a preset with Stops set
// to [StopsRetries], such as the rate preset opening at 10 % failures.
package breaker

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// State is a breaker's state.
type State uint8

// The states.
const (
	Closed   State = iota // calls go through; results are counted
	Open                  // calls are refused until the open period ends
	HalfOpen              // a few probes go through; their results decide
)

var stateNames = [...]string{"closed", "open", "half-open"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "breaker.State(?)"
}

// Outcome is how a call ended, as far as the breaker is concerned.
type Outcome uint8

// The outcomes.
const (
	// Success: the dependency answered well.
	Success Outcome = iota
	// Failure: the call failed in a way that counts against the
	// dependency's health.
	Failure
	// Ignore: the call ended in a way that says nothing about the
	// dependency (the caller cancelled, a request it rejected as
	// malformed, a call never sent).
	Ignore
)

// ErrOpen is the error of a call the breaker refused. retry.ErrBreakerOpen
// is this same value.
var ErrOpen = errors.New("circuit breaker open")

// Permit is the receipt of a granted call, to pass to [Breaker.EndAt]. It is
// a small value; the zero Permit belongs to no call and EndAt ignores it.
type Permit struct {
	gen   uint32 // the breaker's period (state change count) when granted
	probe bool   // granted by a half-open breaker
}

// Probe reports whether the permit is a half-open probe's.
func (p Permit) Probe() bool { return p.probe }

// Breaker is a circuit breaker. The rules, exactly:
//
// Closed. Every call is allowed. In [Consecutive] mode a counter holds the
// failures since the last success: a Success resets it to 0, a Failure adds
// 1, Ignore changes nothing; the breaker opens when it reaches Failures. In
// [Rate] mode the breaker keeps a ring of Buckets buckets, each
// Window/Buckets long, aligned on multiples of that length since the Unix
// epoch; a call counts in the bucket of the time its EndAt is given, and
// the window at time t is t's bucket and the Buckets − 1 before it (so
// between (Buckets − 1)/Buckets × Window and Window of history). After a
// Failure, the breaker opens when the window holds at least MinCalls calls
// (Successes and Failures; Ignore is not counted) of which at least
// FailureRate failed. A bucket counts at most 262,143 calls; later calls in
// it are left out (the rate is that of the first ones).
//
// Open. The open period is Delay × (1 + Jitter × (2u − 1)) with u a uniform
// sample in [0, 1) drawn when the breaker opens (see [WithRand]). Calls are
// refused until it has passed; the first AllowAt at or after its end makes
// the breaker half-open.
//
// Half-open. At most Probes calls are let through at a time (the probes);
// others are refused. A probe that succeeds counts; when Successes probes
// have succeeded since the breaker became half-open, it closes (counters and
// window cleared). A probe that fails opens it again, for a new open period
// with a new sample. A probe that ends in Ignore frees its place and counts
// nothing.
//
// Results of calls allowed before the last change of state are ignored:
// they describe the dependency as it was.
//
// Stopping retries only ([StopsRetries]). The breaker opens by the same
// rule (failures in a row, or the rate over the window), from the results
// of every attempt, first tries and retries. Open, it refuses retries:
// AllowAt refuses, and AllowFirstAt grants every first try, whose result
// counts: in consecutive mode the successes in a row since it opened (a
// failure resets them to 0), in rate mode the window, which opening
// cleared. It never becomes half-open. At the first EndAt at or after the
// end of the open period (drawn as above) at which those first tries show
// the dependency healthy, it closes (counters and window cleared):
// consecutive mode, the last Successes of them succeeded; rate mode, the
// window holds at least MinCalls of them and less than FailureRate of
// those failed. Until then it stays open, however long that is: with no
// first tries there is nothing to retry. AllowFirstAt of a breaker that
// stops calls is AllowAt. So, under a partial failure where a fifth of the
// answers are errors, a breaker opening at a 10 % rate refuses 4 calls in 5
// that would have succeeded if it stops calls, and none if it stops retries.
//
// Times are compared by their wall-clock reading (UnixNano), which virtual
// time and the wall clock share. AllowAt and EndAt may be given the zero
// Time when [Breaker.NeedsClock] is false and the caller did not read the
// clock: a consecutive-mode breaker that is closed needs the time only when
// a failure opens it. An open breaker given the zero Time refuses.
//
// With the "stormguard" preset (5 failures, 5 s ± 20 %, 1 probe, 2
// successes):
//
//	event                            state      failures in a row
//	4 failures                       closed     4
//	success                          closed     0
//	5 failures                       open       (until 4–6 s later)
//	AllowAt 1 s later  → refused     open
//	AllowAt 6 s later  → a probe     half-open
//	AllowAt            → refused     half-open  (one probe at a time)
//	the probe succeeds               half-open  1 success of 2
//	AllowAt → a probe, it succeeds   closed     0
//
// A Breaker is safe for concurrent use. Closed (and open, for the first
// tries of one that stops retries), the path is one atomic load to allow and, in consecutive mode, one atomic load to record a success
// (one compare-and-swap in rate mode); it allocates nothing. Changes of state
// take a mutex, never held across a call out: the state-change hook runs
// after it is released. Build one with [New]; the zero Breaker is not
// usable.
type Breaker struct {
	s        Spec
	rate     bool
	retries  bool // stops retries only
	failures int64
	minCalls uint64
	ratePPM  uint64 // FailureRate in millionths
	width    int64  // bucket length, ns
	jitter   float64
	rand     func() float64
	onChange func(from, to State, now time.Time)

	word      atomic.Uint64 // gen<<2 | state
	fails     atomic.Int64  // consecutive failures (closed, consecutive mode)
	oks       atomic.Int64  // successes in a row since it opened (open, stops retries, consecutive mode)
	openUntil atomic.Int64  // end of the open period, UnixNano
	buckets   []atomic.Uint64

	mu       sync.Mutex // changes of state; the half-open counts
	inFlight int        // half-open: probes in flight
	okProbes int        // half-open: probes that succeeded

	opens, halfOpens, closes, refused atomic.Uint64
}

// Option configures [New].
type Option func(*Breaker)

// WithRand sets the source of uniform samples in [0, 1) for the open
// period's jitter; it is called once each time the breaker opens, under
// the breaker's lock. The default is math/rand/v2's Float64. The simulator
// passes a seeded stream of its own.
func WithRand(f func() float64) Option { return func(b *Breaker) { b.rand = f } }

// WithOnStateChange installs a hook that runs after each change of state,
// with the time that caused it, on the goroutine of the call that caused
// it, after the breaker's lock is released. It must not block.
func WithOnStateChange(f func(from, to State, now time.Time)) Option {
	return func(b *Breaker) { b.onChange = f }
}

// New validates s, fills its defaults and builds a closed Breaker.
func New(s Spec, opts ...Option) (*Breaker, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.WithDefaults()
	b := &Breaker{
		s:        s,
		rate:     s.Mode == Rate,
		retries:  s.Stops == StopsRetries,
		failures: int64(s.Failures),
		minCalls: uint64(s.MinCalls),
		ratePPM:  uint64(math.Round(s.FailureRate * 1e6)),
		width:    int64(s.Window) / int64(s.Buckets),
		jitter:   *s.Jitter,
		rand:     rand.Float64,
	}
	if b.rate {
		b.buckets = make([]atomic.Uint64, s.Buckets)
	}
	for _, o := range opts {
		o(b)
	}
	b.word.Store(1<<2 | uint64(Closed)) // period 1: the zero Permit matches none
	return b, nil
}

// MustNew is New for specs known to be valid (presets, literals); it panics
// on error.
func MustNew(s Spec, opts ...Option) *Breaker {
	b, err := New(s, opts...)
	if err != nil {
		panic(err)
	}
	return b
}

// Spec returns the breaker's spec with its defaults filled in.
func (b *Breaker) Spec() Spec { return b.s }

// State returns the state now. An open breaker whose open period has passed
// reports Open until a call asks (AllowAt moves it to half-open; one that
// stops retries closes when an EndAt shows the dependency healthy).
func (b *Breaker) State() State { return State(b.word.Load() & 3) }

// NeedsClock reports whether AllowAt and EndAt must be given the time now:
// always in rate mode; in consecutive mode only while the breaker is not
// closed. Shells read the clock only when it says so (or on a failure).
func (b *Breaker) NeedsClock() bool { return b.rate || b.word.Load()&3 != uint64(Closed) }

// Stats are a breaker's counters since it was built.
type Stats struct {
	State     State
	Opens     uint64 // changes to open (from closed or half-open)
	HalfOpens uint64 // changes to half-open
	Closes    uint64 // changes to closed
	Refused   uint64 // calls refused (retries and hedges, for a breaker that stops retries only)
}

// Stats returns the state and the counters now.
func (b *Breaker) Stats() Stats {
	return Stats{State: b.State(), Opens: b.opens.Load(), HalfOpens: b.halfOpens.Load(),
		Closes: b.closes.Load(), Refused: b.refused.Load()}
}

// AllowAt reports whether a call may start at now; if ok, pass the permit
// to EndAt when the call ends. For a breaker that stops retries the call is
// a retry (or a hedge): refused while the breaker is open. Such a breaker
// grants no probes, so a permit it grants for a retry that is then not made
// may be dropped without an EndAt.
func (b *Breaker) AllowAt(now time.Time) (Permit, bool) {
	w := b.word.Load()
	switch State(w & 3) {
	case Closed:
		return Permit{gen: uint32(w >> 2)}, true
	case Open:
		if b.retries || now.IsZero() || now.UnixNano() < b.openUntil.Load() {
			b.refused.Add(1)
			return Permit{}, false
		}
	}
	return b.allowSlow(now)
}

// allowSlow admits a probe, after moving an open breaker whose period has
// passed to half-open.
func (b *Breaker) allowSlow(now time.Time) (Permit, bool) {
	b.mu.Lock()
	w := b.word.Load()
	from, changed := State(w&3), false
	switch from {
	case Closed: // closed since the caller looked
		b.mu.Unlock()
		return Permit{gen: uint32(w >> 2)}, true
	case Open:
		if b.retries || now.IsZero() || now.UnixNano() < b.openUntil.Load() {
			b.mu.Unlock()
			b.refused.Add(1)
			return Permit{}, false
		}
		w = b.setLocked(w, HalfOpen)
		b.inFlight, b.okProbes = 0, 0
		changed = true
	}
	p, ok := Permit{}, false
	if b.inFlight < b.s.Probes {
		b.inFlight++
		p, ok = Permit{gen: uint32(w >> 2), probe: true}, true
	}
	b.mu.Unlock()
	if !ok {
		b.refused.Add(1)
	}
	if changed {
		b.changed(from, HalfOpen, now)
	}
	return p, ok
}

// AllowFirstAt is AllowAt for the first try of a request. A breaker that
// stops calls answers as AllowAt does; one that stops retries grants every
// first try, open or closed, and counts its result (see [Breaker]).
func (b *Breaker) AllowFirstAt(now time.Time) (Permit, bool) {
	if !b.retries {
		return b.AllowAt(now)
	}
	return Permit{gen: uint32(b.word.Load() >> 2)}, true
}

// EndAt records how the call of permit p ended, at now.
func (b *Breaker) EndAt(now time.Time, p Permit, o Outcome) {
	w := b.word.Load()
	if uint32(w>>2) != p.gen {
		return // allowed in an earlier period, or no call at all
	}
	if p.probe {
		b.endProbe(now, p, o)
		return
	}
	if State(w&3) == Open {
		// Only a breaker that stops retries grants a call while open:
		// a first try, from which it learns when to close.
		b.endOpen(now, p, o)
		return
	}
	switch o {
	case Success:
		if b.rate {
			b.count(now, false)
		} else if b.fails.Load() != 0 {
			b.fails.Store(0)
		}
	case Failure:
		if b.rate {
			if b.overRate(b.count(now, true)) {
				b.trip(now, p.gen, Closed)
			}
		} else if b.fails.Add(1) >= b.failures {
			b.trip(now, p.gen, Closed)
		}
	}
}

// endOpen records the result of a first try that an open breaker that
// stops retries let through, and closes the breaker if, the open period
// over, the first tries since it opened show the dependency healthy.
func (b *Breaker) endOpen(now time.Time, p Permit, o Outcome) {
	if o == Ignore {
		return
	}
	var ep uint64
	switch {
	case b.rate:
		ep = b.count(now, o == Failure)
	case o == Success:
		b.oks.Add(1)
	default:
		b.oks.Store(0)
	}
	if now.IsZero() || now.UnixNano() < b.openUntil.Load() {
		return
	}
	if b.rate {
		calls, fails := b.sums(ep)
		if calls < b.minCalls || fails*1e6 >= b.ratePPM*calls {
			return
		}
	} else if b.oks.Load() < int64(b.s.Successes) {
		return
	}
	b.mu.Lock()
	w := b.word.Load()
	if uint32(w>>2) != p.gen || State(w&3) != Open {
		b.mu.Unlock()
		return
	}
	b.setLocked(w, Closed)
	b.clearLocked()
	b.mu.Unlock()
	b.changed(Open, Closed, now)
}

// clearLocked forgets what the breaker counted: the failures and successes
// in a row and the window.
func (b *Breaker) clearLocked() {
	b.fails.Store(0)
	b.oks.Store(0)
	for i := range b.buckets {
		b.buckets[i].Store(0)
	}
}

func (b *Breaker) endProbe(now time.Time, p Permit, o Outcome) {
	b.mu.Lock()
	w := b.word.Load()
	if uint32(w>>2) != p.gen || State(w&3) != HalfOpen {
		b.mu.Unlock()
		return
	}
	b.inFlight--
	to := HalfOpen
	switch o {
	case Success:
		b.okProbes++
		if b.okProbes >= b.s.Successes {
			b.setLocked(w, Closed)
			b.clearLocked()
			to = Closed
		}
	case Failure:
		b.openLocked(now, w)
		to = Open
	}
	b.mu.Unlock()
	if to != HalfOpen {
		b.changed(HalfOpen, to, now)
	}
}

// trip opens the breaker if it is still in period gen and state from.
func (b *Breaker) trip(now time.Time, gen uint32, from State) {
	b.mu.Lock()
	w := b.word.Load()
	if uint32(w>>2) != gen || State(w&3) != from {
		b.mu.Unlock()
		return
	}
	b.openLocked(now, w)
	b.mu.Unlock()
	b.changed(from, Open, now)
}

// openLocked opens the breaker for a new open period from now.
func (b *Breaker) openLocked(now time.Time, w uint64) {
	d := float64(b.s.Delay)
	if b.jitter > 0 {
		d *= 1 + b.jitter*(2*b.rand()-1)
	}
	until := now.UnixNano()
	if now.IsZero() {
		until = 0 // no time given: the period counts from the epoch
	}
	b.openUntil.Store(until + int64(d))
	if b.retries {
		b.clearLocked() // open, it counts the first tries from here
	} else {
		b.fails.Store(0)
	}
	b.setLocked(w, Open)
}

// setLocked moves to state s in a new period and returns the new word.
func (b *Breaker) setLocked(w uint64, s State) uint64 {
	nw := (w>>2+1)<<2 | uint64(s)
	b.word.Store(nw)
	switch s {
	case Open:
		b.opens.Add(1)
	case HalfOpen:
		b.halfOpens.Add(1)
	case Closed:
		b.closes.Add(1)
	}
	return nw
}

func (b *Breaker) changed(from, to State, now time.Time) {
	if b.onChange != nil {
		b.onChange(from, to, now)
	}
}

// A bucket is one word: the bucket's number (its start ÷ its length,
// modulo 2²⁸) in the top 28 bits, then the calls (18 bits), then the
// failures (18 bits).
const (
	epochShift = 36
	epochMask  = 1<<28 - 1
	callShift  = 18
	countMask  = 1<<18 - 1
)

// count adds a call that ended at now to the window and returns the
// number of now's bucket (modulo 2²⁸).
func (b *Breaker) count(now time.Time, failed bool) uint64 {
	n := now.UnixNano() / b.width
	ep := uint64(n) & epochMask
	slot := &b.buckets[uint64(n)%uint64(len(b.buckets))]
	var f uint64
	if failed {
		f = 1
	}
	for {
		old := slot.Load()
		var nw uint64
		if old>>epochShift != ep {
			nw = ep<<epochShift | 1<<callShift | f
		} else if old>>callShift&countMask == countMask {
			break // full: the rest of this bucket's calls are left out
		} else {
			nw = old + 1<<callShift + f
		}
		if slot.CompareAndSwap(old, nw) {
			break
		}
	}
	return ep
}

// sums returns the calls and the failures of the window whose last bucket
// is ep.
func (b *Breaker) sums(ep uint64) (calls, fails uint64) {
	for i := range b.buckets {
		v := b.buckets[i].Load()
		if (ep-v>>epochShift)&epochMask < uint64(len(b.buckets)) {
			calls += v >> callShift & countMask
			fails += v & countMask
		}
	}
	return calls, fails
}

// overRate reports whether the window whose last bucket is ep opens the
// breaker: at least MinCalls calls, at least FailureRate of them failed.
func (b *Breaker) overRate(ep uint64) bool {
	calls, fails := b.sums(ep)
	return calls >= b.minCalls && fails*1e6 >= b.ratePPM*calls
}
