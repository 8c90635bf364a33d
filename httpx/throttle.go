package httpx

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// ErrThrottled is wrapped by the error of an attempt that an
// [AdaptiveThrottle] refused locally: the request was never sent. It states
// its class, [retry.Throttling] (it has the RetryClass method of
// [retry.Classed]), so that the retry layer, and any layer above that
// classifies the error, treats it as throttling.
var ErrThrottled error = throttledError{}

type throttledError struct{}

func (throttledError) Error() string {
	return "httpx: request throttled locally by adaptive throttling"
}

func (throttledError) RetryClass() retry.Class { return retry.Throttling }

// ErrInvalidThrottleConfig is wrapped by the error [NewAdaptiveThrottle]
// returns for an invalid [ThrottleConfig]; the message names the field.
var ErrInvalidThrottleConfig = errors.New("httpx: invalid throttle config")

// Defaults for zero [ThrottleConfig] fields: the values of the Google SRE
// book ("Handling Overload").
const (
	DefaultThrottleWindow = 2 * time.Minute
	DefaultThrottleK      = 2.0
)

// throttleSlots is the number of slots an AdaptiveThrottle's window is split
// into: with the default window, 10 s each.
const throttleSlots = 12

// ThrottleConfig describes an [AdaptiveThrottle] as plain data. A zero field
// takes the default in brackets.
type ThrottleConfig struct {
	// Window is the span over which requests and accepts are counted [2m].
	// At least 12ns.
	Window time.Duration `json:"window,omitempty" yaml:"window,omitempty"`
	// K is how many requests per accepted request the client sends before
	// it starts refusing some locally [2]. At least 1: with K below 1 a
	// client would refuse requests to a backend that accepts all of them.
	// Smaller is more aggressive (the SRE book mentions 1.1).
	K float64 `json:"k,omitempty" yaml:"k,omitempty"`
}

// Validate reports a configuration [NewAdaptiveThrottle] cannot use.
func (c ThrottleConfig) Validate() error {
	switch {
	case c.Window < 0 || c.Window > 0 && c.Window < throttleSlots:
		return fmt.Errorf("%w: window must be at least %v, got %v", ErrInvalidThrottleConfig, time.Duration(throttleSlots), c.Window)
	case c.K != 0 && !(c.K >= 1 && c.K <= 1e6):
		return fmt.Errorf("%w: k must be in [1, 1e6], got %v", ErrInvalidThrottleConfig, c.K)
	}
	return nil
}

// AdaptiveThrottle is client-side adaptive throttling, as the Google SRE
// book describes it ("Handling Overload"): a client that sees its backend
// refuse much of its traffic stops sending most of that traffic, refusing it
// locally instead, so that a backend busy rejecting is not also kept busy
// reading the rejected requests. Over a sliding window it counts
//
//	requests   attempts the client wanted to send (refused locally or not)
//	accepts    attempts the backend accepted (see [AdaptiveThrottle.AcceptAt])
//
// and refuses each new attempt locally with probability
//
//	p = max(0, (requests − K × accepts) / (requests + 1))
//
// computed from the counts before that attempt. A locally refused attempt
// counts as a request but not as an accept, so p keeps rising while the
// backend refuses, and falls as soon as it accepts again. With K = 2:
//
//	requests  accepts   p
//	100       100       0               healthy
//	100       50        0               half refused, still no throttling
//	100       25        50/101  ≈ 0.495
//	100       10        80/101  ≈ 0.792
//	100       0         100/101 ≈ 0.990 the backend refuses everything
//	0         0         0
//
// Resolution: the window is a ring of 12 slots, each a twelfth of the window
// long, aligned on the time of the first call. An event stops counting when
// its slot leaves the ring, after more than 11/12 of the window and at most
// the whole window. Time that goes backwards counts in the newest slot.
//
// The …At methods are the deterministic core: time and the random sample
// are arguments. [AdaptiveThrottle.Allow] and [AdaptiveThrottle.Accept] are
// the wall-clock shorthands the [Transport] uses. An AdaptiveThrottle is safe
// for concurrent use (a mutex, held for a few dozen nanoseconds, guards the
// counts) and allocates nothing after [NewAdaptiveThrottle]. Share one per
// backend among all the requests to it. The zero AdaptiveThrottle is not
// usable; it must not be copied after first use.
type AdaptiveThrottle struct {
	k     float64
	width time.Duration // length of one slot
	rand  func() float64

	mu      sync.Mutex
	started bool      // origin is set
	origin  time.Time // start of slot 0: the time of the first call
	head    int64     // number of the newest slot, counted from origin
	reqs    int64     // requests in the ring
	accs    int64     // accepts in the ring
	ring    [throttleSlots]struct{ reqs, accs int64 }
}

// ThrottleOption configures an [AdaptiveThrottle] in [NewAdaptiveThrottle].
type ThrottleOption func(*AdaptiveThrottle)

// WithThrottleRand sets the source of uniform samples in [0, 1) that
// [AdaptiveThrottle.Allow] draws from; the default is math/rand/v2's
// Float64. Tests and simulations pass a seeded source.
func WithThrottleRand(f func() float64) ThrottleOption {
	return func(t *AdaptiveThrottle) { t.rand = f }
}

// NewAdaptiveThrottle validates c, fills its defaults and returns an
// AdaptiveThrottle with empty counts.
func NewAdaptiveThrottle(c ThrottleConfig, opts ...ThrottleOption) (*AdaptiveThrottle, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Window == 0 {
		c.Window = DefaultThrottleWindow
	}
	if c.K == 0 {
		c.K = DefaultThrottleK
	}
	t := &AdaptiveThrottle{k: c.K, width: c.Window / throttleSlots, rand: rand.Float64}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// advance moves the ring to now, emptying the slots that left the window,
// and returns the index of the newest slot. t.mu must be held.
func (t *AdaptiveThrottle) advance(now time.Time) int {
	if !t.started {
		t.started, t.origin = true, now
		return 0
	}
	n := int64(now.Sub(t.origin) / t.width)
	if n <= t.head { // same slot, or time went backwards
		return int(t.head % throttleSlots)
	}
	if n-t.head >= throttleSlots {
		t.ring = [throttleSlots]struct{ reqs, accs int64 }{}
		t.reqs, t.accs = 0, 0
	} else {
		for s := t.head + 1; s <= n; s++ {
			sl := &t.ring[s%throttleSlots]
			t.reqs -= sl.reqs
			t.accs -= sl.accs
			sl.reqs, sl.accs = 0, 0
		}
	}
	t.head = n
	return int(n % throttleSlots)
}

// probability is the formula of the type documentation. t.mu must be held.
func (t *AdaptiveThrottle) probability() float64 {
	r := float64(t.reqs)
	return max(0, (r-t.k*float64(t.accs))/(r+1))
}

// ProbabilityAt returns the probability with which an attempt made at now
// would be refused locally.
func (t *AdaptiveThrottle) ProbabilityAt(now time.Time) float64 {
	t.mu.Lock()
	t.advance(now)
	p := t.probability()
	t.mu.Unlock()
	return p
}

// AllowAt counts an attempt at now and decides whether to send it: it is
// refused (false) if u < p, where p is the refusal probability before this
// attempt and u is a uniform sample in [0, 1). A refused attempt must fail
// locally, unsent; an allowed one that the backend accepts must be reported
// with [AdaptiveThrottle.AcceptAt].
func (t *AdaptiveThrottle) AllowAt(now time.Time, u float64) bool {
	t.mu.Lock()
	i := t.advance(now)
	p := t.probability()
	t.ring[i].reqs++
	t.reqs++
	t.mu.Unlock()
	return !(u < p)
}

// AcceptAt records at now that the backend accepted an attempt allowed by
// AllowAt: it answered with anything but a refusal for overload. What counts
// as a refusal is the caller's to decide; the [Transport] counts every
// response except 429 and a 503 that carries Stormguard-Overload.
func (t *AdaptiveThrottle) AcceptAt(now time.Time) {
	t.mu.Lock()
	i := t.advance(now)
	t.ring[i].accs++
	t.accs++
	t.mu.Unlock()
}

// CountsAt returns the requests and the accepts in the window at now, for
// metrics and tests.
func (t *AdaptiveThrottle) CountsAt(now time.Time) (requests, accepts int64) {
	t.mu.Lock()
	t.advance(now)
	requests, accepts = t.reqs, t.accs
	t.mu.Unlock()
	return requests, accepts
}

// Allow is AllowAt(time.Now(), u) with u drawn from the throttle's source
// (see [WithThrottleRand]).
func (t *AdaptiveThrottle) Allow() bool { return t.AllowAt(time.Now(), t.rand()) }

// Accept is AcceptAt(time.Now()).
func (t *AdaptiveThrottle) Accept() { t.AcceptAt(time.Now()) }

// backendAccepted reports whether a response counts as an accept for an
// AdaptiveThrottle: anything but 429 Too Many Requests and a 503 that
// carries an overload signal (any value but "none").
func backendAccepted(code int, h http.Header) bool {
	switch code {
	case http.StatusTooManyRequests:
		return false
	case http.StatusServiceUnavailable:
		if v := h[wire.HeaderOverload]; len(v) > 0 {
			o, ok := wire.ParseOverload(v[0])
			return ok && o == wire.OverloadNone
		}
	}
	return true
}
