package budget

import (
	"errors"
	"math"
	"sync"
	"time"
)

// windowSlots is the number of slots a Window's span is split into; it sets
// the window's resolution to a tenth of its span.
const windowSlots = 10

// Limits that keep a Window's arithmetic within int64.
const (
	maxWindowRatio  = 1000 // retries per request
	maxWindowFloor  = 1e12 // floor × window seconds, in retries
	minWindowLength = windowSlots * time.Nanosecond
)

// Window is a retry budget over a sliding window of time: a retry is granted
// when
//
//	retries in the window + 1 ≤ ratio × requests in the window + floor × window seconds
//
// where requests are first attempts (counted by BeginAt) and retries are the
// retries granted by RetryAt. The ratio part lets retries grow with traffic;
// the floor part is a number of retries always allowed per window, so that a
// client with little traffic can still retry.
//
// The presets that use it:
//
//	preset       window  ratio  floor/s  allows, per window of requests R
//	sre          10 s    0.1    0        0.1 R        (10 requests → 1 retry, 100 → 10)
//	finagle      10 s    0.2    10       0.2 R + 100  (0 requests → 100, 100 → 120)
//	linkerd      as finagle
//	per-minute   1 min   0      1        60
//
// Resolution: the window is a fixed ring of 10 slots, each a tenth of the
// window long, aligned on the time of the first call. An event stops counting
// when its slot leaves the ring, that is after more than 0.9 × window and at
// most 1 × window. Time that goes backwards is taken as the newest time seen
// (events count in the newest slot); it never panics.
//
// EndAt changes nothing, except that [Ignore] on a retry's ticket (a retry
// abandoned before it started, or whose outcome says nothing about the
// dependency) takes that retry out of the count again, if its slot is still
// in the window.
//
// A Window is safe for concurrent use: a mutex guards the counts (it is held
// for a few dozen nanoseconds and never across a call out). It allocates
// nothing. Ratio and floor keep six decimal places.
//
// The zero Window has ratio and floor 0 and refuses every retry. Build one
// with [NewWindow] or [Spec.New]. A Window must not be copied after first use.
type Window struct {
	mu      sync.Mutex
	width   time.Duration // length of one slot
	ratio   int64         // retries per request, in millionths
	floor   int64         // retries per window always allowed, in millionths
	started bool          // origin is set
	origin  time.Time     // start of slot 0: the time of the first call
	head    int64         // number of the newest slot, counted from origin
	reqs    int64         // requests in the ring
	rets    int64         // retries in the ring
	ring    [windowSlots]windowSlot
}

// windowSlot holds the counts of one tenth of a Window.
type windowSlot struct {
	reqs, rets int64
}

var _ Budget = (*Window)(nil)

// NewWindow returns an empty Window over the given span: retries in any span
// of that length may reach ratio × requests + floor × span in seconds. floor is
// in retries per second. The arguments are taken as given, without the
// defaults of [Spec].
//
// NewWindow panics unless window is at least 10ns, ratio is in [0, 1000],
// floor ≥ 0 with floor × window seconds ≤ 1e12, and either ratio > 0 or
// floor × window seconds ≥ 1 (one retry per window): use [Spec.New] to check configuration that comes from outside the
// program.
func NewWindow(window time.Duration, ratio, floor float64) *Window {
	if err := checkWindow(window, ratio, floor); err != nil {
		panic(err)
	}
	return &Window{
		width: window / windowSlots,
		ratio: micro(ratio),
		floor: micro(floor * window.Seconds()),
	}
}

// checkWindow reports every invalid argument of NewWindow, naming the fields
// of Spec.
func checkWindow(window time.Duration, ratio, floor float64) error {
	var errs []error
	if window < minWindowLength {
		errs = append(errs, invalid("window", "must be at least %v, got %v", minWindowLength, window))
	}
	if !(ratio >= 0 && ratio <= maxWindowRatio) {
		errs = append(errs, invalid("ratio", "must be in [0, %d] retries per request, got %g", maxWindowRatio, ratio))
	}
	if !(floor >= 0 && floor*window.Seconds() <= maxWindowFloor) {
		errs = append(errs, invalid("floor", "must be ≥ 0 retries per second, with floor × window ≤ %g retries, got %g", float64(maxWindowFloor), floor))
	}
	switch {
	case len(errs) > 0:
	case micro(ratio) == 0 && micro(floor*window.Seconds()) == 0:
		errs = append(errs, invalid("ratio", "and floor are both 0: no retry could ever be allowed; set ratio (e.g. 0.1) or floor (retries per second)"))
	case micro(ratio) == 0 && micro(floor*window.Seconds()) < microPerUnit:
		errs = append(errs, invalid("floor", "%g per second over a window of %v allows %g retries per window, less than one: with ratio 0 no retry could ever be allowed; raise floor to at least %g or the window to at least %v",
			floor, window, floor*window.Seconds(), 1/window.Seconds(), time.Duration(float64(time.Second)/floor)))
	}
	return errors.Join(errs...)
}

// advance moves the ring to now, emptying the slots that left the window, and
// returns the newest slot. w.mu must be held.
func (w *Window) advance(now time.Time) *windowSlot {
	if w.width <= 0 { // the zero Window: one slot forever
		return &w.ring[0]
	}
	if !w.started {
		w.started, w.origin = true, now
		return &w.ring[0]
	}
	n := int64(now.Sub(w.origin) / w.width)
	if n <= w.head { // same slot, or time went backwards
		return &w.ring[w.head%windowSlots]
	}
	if n-w.head >= windowSlots {
		w.ring = [windowSlots]windowSlot{}
		w.reqs, w.rets = 0, 0
	} else {
		for s := w.head + 1; s <= n; s++ {
			sl := &w.ring[s%windowSlots]
			w.reqs -= sl.reqs
			w.rets -= sl.rets
			*sl = windowSlot{}
		}
	}
	w.head = n
	return &w.ring[n%windowSlots]
}

// allowance returns ratio × requests + floor, in millionths of a retry,
// saturating instead of overflowing. w.mu must be held.
func (w *Window) allowance() int64 {
	if w.ratio > 0 && w.reqs > (math.MaxInt64-w.floor)/w.ratio {
		return math.MaxInt64
	}
	return w.ratio*w.reqs + w.floor
}

// BeginAt counts a request at time now.
func (w *Window) BeginAt(now time.Time) {
	w.mu.Lock()
	sl := w.advance(now)
	sl.reqs++
	w.reqs++
	w.mu.Unlock()
}

// RetryAt grants a retry at time now if the retries already in the window
// plus this one stay within ratio × requests + floor × window seconds, and
// counts it. c is ignored.
func (w *Window) RetryAt(now time.Time, _ Cause) (Ticket, bool) {
	w.mu.Lock()
	sl := w.advance(now)
	if w.rets >= math.MaxInt64/microPerUnit || (w.rets+1)*microPerUnit > w.allowance() {
		w.mu.Unlock()
		return Ticket{}, false
	}
	sl.rets++
	w.rets++
	t := Ticket{cost: int32(w.head), retry: true}
	w.mu.Unlock()
	return t, true
}

// EndAt takes a retry out of the count when it ends in [Ignore] while its
// slot is still in the window; otherwise it does nothing.
func (w *Window) EndAt(now time.Time, o Outcome, t Ticket) {
	if o != Ignore || !t.retry {
		return
	}
	w.mu.Lock()
	w.advance(now)
	// The ticket holds the slot number modulo 2³²; the wrapping subtraction
	// gives its age in slots.
	age := int64(int32(w.head) - t.cost)
	if age >= 0 && age < windowSlots && age <= w.head {
		sl := &w.ring[(w.head-age)%windowSlots]
		if sl.rets > 0 {
			sl.rets--
			w.rets--
		}
	}
	w.mu.Unlock()
}

// CountsAt returns the requests and the retries in the window at time now.
// It is meant for metrics and tests.
func (w *Window) CountsAt(now time.Time) (requests, retries int64) {
	w.mu.Lock()
	w.advance(now)
	requests, retries = w.reqs, w.rets
	w.mu.Unlock()
	return requests, retries
}
