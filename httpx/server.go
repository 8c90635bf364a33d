package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"stormguard/killswitch"
	"stormguard/limit"
	"stormguard/shed"
)

// ServerConfig describes a [Server]. The first fields are plain data (they
// decode from JSON or YAML and a zero field takes the default in brackets);
// the last ones are runtime parts that only code can supply.
type ServerConfig struct {
	// MaxTimeout bounds the deadline of every request [30s]: a request's
	// context ends at arrival + min(MaxTimeout, Stormguard-Timeout). A
	// caller can shorten the server's deadline, never extend it.
	MaxTimeout time.Duration `json:"max_timeout,omitempty" yaml:"max_timeout,omitempty"`
	// MinRemaining is the least time before its deadline a request must
	// have to start [Queue.MinRemaining, itself 0]: one with MinRemaining or
	// less left, on arrival or after waiting in the queue, is answered 504
	// and its handler never runs. Set it to about the handler's service
	// time. If both this and Queue.MinRemaining are set they must agree.
	MinRemaining time.Duration `json:"min_remaining,omitempty" yaml:"min_remaining,omitempty"`
	// RetryAfter is the delay suggested, in a Retry-After header, to the
	// clients of a 503 for an overloaded instance and of a 429 [1s]. It is
	// sent in whole seconds, rounded up.
	RetryAfter time.Duration `json:"retry_after,omitempty" yaml:"retry_after,omitempty"`
	// Limit chooses the concurrency-limit algorithm [vegas, Netflix's
	// defaults]; use kind "fixed" for a constant limit. It is ignored when
	// Limiter is set.
	Limit limit.Spec `json:"limit,omitzero" yaml:"limit,omitempty"`
	// Queue shapes the queue where requests wait while the limit is
	// reached: capacity, order (fifo, lifo, adaptive-lifo with CoDel) and
	// priority (first tries before retries by default, or by criticality).
	Queue shed.Config `json:"queue,omitzero" yaml:"queue,omitempty"`

	// Limiter, when set, is used instead of building one from Limit (to
	// use an algorithm configured in code, say). Build it with
	// limit.WithDials to honour the dials' limit override. Do not share it
	// with another Server: a slot freed elsewhere does not wake this
	// Server's waiters. To share a limit between handlers, wrap them all
	// with one Server.
	Limiter *limit.Limiter `json:"-" yaml:"-"`
	// Dials are the runtime kill switches: the shed fraction sheds that
	// share of requests, chosen at random, with the service signal; the
	// limit override pins the concurrency limit (when the Server builds its
	// Limiter). Nil means no dials.
	Dials *killswitch.Dials `json:"-" yaml:"-"`
	// ServiceSaturated, when set, is asked on every refusal for overload
	// whether the whole service (not only this instance) is out of
	// capacity: a fleet-wide view, say every instance shedding. If it
	// answers true the refusal says Stormguard-Overload: service with no
	// Retry-After (no layer retries) instead of instance. It is not itself
	// a reason to refuse, and is not called for requests that are served.
	// It must be fast and safe for concurrent use.
	ServiceSaturated func() bool `json:"-" yaml:"-"`
	// ThrottleClient, when set, is asked for every request whether to
	// throttle its client (a per-client quota, say): if it answers true the
	// request is refused with 429 and Retry-After. It must be fast and safe
	// for concurrent use.
	ThrottleClient func(r *http.Request) bool `json:"-" yaml:"-"`
}

// Defaults for zero [ServerConfig] fields.
const (
	DefaultMaxTimeout = 30 * time.Second
	DefaultRetryAfter = time.Second
)

// ErrInvalidServerConfig is wrapped by the error [NewServer] and
// [ServerConfig.Validate] return for an invalid configuration; the message
// names the field by its configuration name.
var ErrInvalidServerConfig = errors.New("httpx: invalid server config")

// WithDefaults returns c with every zero field of its own set to its
// default (the queue's and the limit's are theirs to fill) and MinRemaining
// resolved against Queue.MinRemaining.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.MinRemaining == 0 {
		c.MinRemaining = c.Queue.MinRemaining
	}
	c.Queue.MinRemaining = c.MinRemaining
	return c
}

// Validate reports a configuration that [NewServer] cannot use, naming the
// field. Defaults are applied first, so a zero field is valid.
func (c ServerConfig) Validate() error {
	if c.MinRemaining != 0 && c.Queue.MinRemaining != 0 && c.MinRemaining != c.Queue.MinRemaining {
		return fmt.Errorf("%w: min_remaining %v and queue.min_remaining %v disagree; set one", ErrInvalidServerConfig, c.MinRemaining, c.Queue.MinRemaining)
	}
	d := c.WithDefaults()
	switch {
	case d.MaxTimeout < 0:
		return fmt.Errorf("%w: max_timeout %v is negative", ErrInvalidServerConfig, c.MaxTimeout)
	case d.RetryAfter < 0:
		return fmt.Errorf("%w: retry_after %v is negative", ErrInvalidServerConfig, c.RetryAfter)
	case d.RetryAfter > 24*time.Hour:
		return fmt.Errorf("%w: retry_after %v is more than a day", ErrInvalidServerConfig, c.RetryAfter)
	case d.MinRemaining < 0:
		return fmt.Errorf("%w: min_remaining %v is negative", ErrInvalidServerConfig, d.MinRemaining)
	case d.MinRemaining >= d.MaxTimeout:
		return fmt.Errorf("%w: min_remaining %v is not below max_timeout %v: every request would be dropped", ErrInvalidServerConfig, d.MinRemaining, d.MaxTimeout)
	}
	if err := d.Queue.Validate(); err != nil {
		return fmt.Errorf("%w: queue: %w", ErrInvalidServerConfig, err)
	}
	if c.Limiter == nil {
		if err := c.Limit.Validate(); err != nil {
			return fmt.Errorf("%w: limit: %w", ErrInvalidServerConfig, err)
		}
	}
	return nil
}

// Server is overload-control middleware for net/http: it bounds the
// deadline of every request, drops work whose deadline has passed before
// starting it, runs at most a concurrency limit of handlers at once, queues
// the excess (first tries before retries), and refuses what it cannot serve
// cheaply and with the signals clients need. Build one with [NewServer] and
// wrap handlers with [Server.Wrap].
//
// # A request's way through
//
//  1. The kill switch: with probability Dials.ShedFraction the request is
//     refused: 503, Stormguard-Overload: service.
//  2. Its deadline becomes arrival + min(MaxTimeout, Stormguard-Timeout)
//     (a malformed header is ignored; the incoming context's own deadline
//     counts if it is sooner). If that leaves MinRemaining or less: 504,
//     counted as expired; the handler never runs.
//  3. ThrottleClient, if set and true: 429 with Retry-After.
//  4. If nobody is queued and fewer than the limit are running, the handler
//     runs at once. Otherwise the request waits in the queue. The queue may
//     refuse it or later give it up (full, evicted by a request it would
//     serve first, timed out by adaptive LIFO): 503, Retry-After,
//     Stormguard-Overload: instance (or service, see ServiceSaturated). Its
//     deadline may pass while it waits: 504, expired. Its client may leave:
//     nothing is answered, and nobody waits for it. When a handler
//     finishes, the next request the queue chooses takes its slot.
//  5. The handler runs with a context whose deadline is the request's, and
//     which carries the attempt number (Stormguard-Attempt) and the
//     criticality (Stormguard-Criticality) for the [deadline] package's
//     accessors. A [Transport] that sends with this context propagates the
//     remaining deadline and the criticality to the next hop.
//
// # What the concurrency limit learns
//
// Each handler holds a [limit.Permit], released when it returns as
//
//	returned in time, status < 500, or hijacked   SuccessAt: an RTT sample
//	returned in time, status 503 or 504           DroppedAt: a downstream call was
//	                                              refused or timed out, i.e. overload
//	returned in time, other status ≥ 500          IgnoreAt: a bug says nothing about load
//	returned after the deadline passed            DroppedAt: the work took too long
//	returned after the client went away           IgnoreAt: the caller's choice
//	panicked                                      IgnoreAt, and the panic goes on
//
// so that only requests served normally feed the RTT baseline, and timed
// out or shed work never does. Requests refused or dropped before starting
// hold no permit. In time means while the request's context was live.
//
// # Accounting
//
// Every request that reaches the middleware ends in exactly one way, counted
// in [ServerStats]: Goodput, Failed or Wasted (the handler ran), one of the
// Shed reasons, Expired, or Canceled (the client left while it waited).
//
// Concurrency: the queue is guarded by a mutex; each waiting request blocks
// on a channel of its own; queue timeouts and deadlines are enforced by one
// time.Timer for the whole queue, whose function takes the mutex itself. No
// goroutine is started per request, and no callback (ServiceSaturated,
// ThrottleClient, the handler) runs under the mutex. A Server is safe for
// concurrent use, and one Server may wrap several handlers, which then
// share its limit and queue.
type Server struct {
	maxTimeout   time.Duration
	minRemaining time.Duration
	lim          *limit.Limiter
	dials        *killswitch.Dials
	saturated    func() bool
	throttle     func(*http.Request) bool
	retryAfter   []string // the Retry-After value, built once

	mu      sync.Mutex // guards q, armed, armedAt
	q       *shed.Queue[*waiter]
	timer   *time.Timer // fires at the queue's NextExpiry; its func takes mu
	armed   bool
	armedAt time.Time
	waiting atomic.Int64 // q.Len(), for the lock-free fast path

	waiters sync.Pool // of *waiter

	c counters
}

// counters are the Server's metrics, updated with atomics.
type counters struct {
	arrived  atomic.Uint64
	retries  atomic.Uint64
	started  atomic.Uint64 // handlers started; those running are started − goodput − failed − wasted
	goodput  atomic.Uint64
	failed   atomic.Uint64
	wasted   atomic.Uint64
	expired  atomic.Uint64
	canceled atomic.Uint64
	shed     [NumShedReasons]atomic.Uint64
}

// NewServer validates cfg, fills its defaults and builds a Server with an
// empty queue (allocated now, see [shed.New]) and, unless cfg.Limiter is
// set, a fresh [limit.Limiter] from cfg.Limit that honours cfg.Dials.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	q, err := shed.New[*waiter](cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("%w: queue: %w", ErrInvalidServerConfig, err)
	}
	lim := cfg.Limiter
	if lim == nil {
		alg, err := cfg.Limit.New()
		if err != nil {
			return nil, fmt.Errorf("%w: limit: %w", ErrInvalidServerConfig, err)
		}
		lim = limit.NewLimiter(alg, limit.WithDials(cfg.Dials))
	}
	secs := (cfg.RetryAfter + time.Second - 1) / time.Second
	s := &Server{
		maxTimeout:   cfg.MaxTimeout,
		minRemaining: cfg.MinRemaining,
		lim:          lim,
		dials:        cfg.Dials,
		saturated:    cfg.ServiceSaturated,
		throttle:     cfg.ThrottleClient,
		retryAfter:   []string{strconv.FormatInt(int64(max(secs, 1)), 10)},
		q:            q,
	}
	s.timer = time.AfterFunc(time.Hour, s.onTimer)
	s.timer.Stop()
	s.waiters.New = func() any { return &waiter{ch: make(chan grant, 1)} }
	return s, nil
}

// Wrap returns h behind the server's overload control. Its method value,
// s.Wrap, is the usual func(http.Handler) http.Handler middleware.
func (s *Server) Wrap(h http.Handler) http.Handler {
	return &guarded{s: s, next: h}
}

// Limiter returns the concurrency limiter the server admits requests with.
func (s *Server) Limiter() *limit.Limiter { return s.lim }

// ShedReason says why a [Server] refused a request for overload; it indexes
// [ServerStats.Shed].
type ShedReason uint8

// The shed reasons.
const (
	// ShedQueueFull: the limit was reached and the queue was full of
	// requests it would serve first (503, instance).
	ShedQueueFull ShedReason = iota
	// ShedEvicted: it waited in the queue and was pushed out by a request
	// the queue serves first (503, instance).
	ShedEvicted
	// ShedQueueTimeout: it waited longer than adaptive LIFO allows (503,
	// instance).
	ShedQueueTimeout
	// ShedKillSwitch: the dials' shed fraction chose it (503, service).
	ShedKillSwitch
	// ShedThrottled: ThrottleClient throttled its client (429).
	ShedThrottled

	// NumShedReasons is the number of shed reasons.
	NumShedReasons = iota
)

var shedReasonNames = [NumShedReasons]string{"queue-full", "evicted", "queue-timeout", "kill-switch", "throttled"}

// String returns the reason's name, such as "queue-full", as metrics label
// it.
func (r ShedReason) String() string {
	if int(r) < len(shedReasonNames) {
		return shedReasonNames[r]
	}
	return "httpx.ShedReason(" + strconv.Itoa(int(r)) + ")"
}

// ServerStats is a snapshot of a [Server]'s counters, in the vocabulary of
// the whole project (offered load, goodput, wasted work, shed, expired).
// Counters count since [NewServer]; gauges are values now. Every request
// that arrived ends in exactly one outcome, so once nothing is in flight or
// queued
//
//	Arrived = Goodput + Failed + Wasted + ShedTotal() + Expired + Canceled
//
// (while requests are in progress the difference is InFlight, Queued and
// those in between steps).
type ServerStats struct {
	// Arrived counts the requests that reached the middleware (offered
	// load), Retries those of them with an attempt number above 1.
	Arrived uint64 `json:"arrived"`
	Retries uint64 `json:"retries"`
	// InFlight is the number of handlers running now, Limit the
	// concurrency limit now and Queued the requests waiting now.
	InFlight int `json:"in_flight"`
	Limit    int `json:"limit"`
	Queued   int `json:"queued"`
	// Goodput counts handlers that returned a status below 500 while their
	// caller was still waiting (the context was live).
	Goodput uint64 `json:"goodput"`
	// Failed counts handlers that returned a status of 500 or more while
	// their caller was waiting, or panicked.
	Failed uint64 `json:"failed"`
	// Wasted counts handlers that returned after their caller had left or
	// their deadline had passed: work nobody was waiting for.
	Wasted uint64 `json:"wasted"`
	// Shed counts refusals for overload by reason, indexed by ShedReason.
	Shed [NumShedReasons]uint64 `json:"shed"`
	// Expired counts requests dropped before they started because their
	// deadline had passed or left MinRemaining or less, on arrival or
	// while queued (504).
	Expired uint64 `json:"expired"`
	// Canceled counts requests whose client went away while they waited in
	// the queue; nothing was answered.
	Canceled uint64 `json:"canceled"`
	// Queue is the queue's own account, first tries and retries apart.
	Queue shed.Stats `json:"queue"`
}

// ShedTotal returns the requests shed for any reason.
func (st ServerStats) ShedTotal() uint64 {
	var n uint64
	for _, v := range st.Shed {
		n += v
	}
	return n
}

// Started returns the handlers started: Goodput + Failed + Wasted +
// InFlight.
func (st ServerStats) Started() uint64 {
	return st.Goodput + st.Failed + st.Wasted + uint64(max(st.InFlight, 0))
}

// Stats returns a snapshot of the server's counters. The counters are read
// one by one, so a snapshot taken while requests run may be off by the
// requests in progress.
func (s *Server) Stats() ServerStats {
	// Outcomes are read before the starts, so that a handler that ends
	// meanwhile is not counted as ended but never started.
	st := ServerStats{
		Goodput:  s.c.goodput.Load(),
		Failed:   s.c.failed.Load(),
		Wasted:   s.c.wasted.Load(),
		Expired:  s.c.expired.Load(),
		Canceled: s.c.canceled.Load(),
	}
	for i := range st.Shed {
		st.Shed[i] = s.c.shed[i].Load()
	}
	started := s.c.started.Load()
	st.InFlight = int(started - st.Goodput - st.Failed - st.Wasted)
	st.Queued = int(s.waiting.Load())
	st.Limit = s.lim.Limit()
	st.Retries = s.c.retries.Load()
	st.Arrived = s.c.arrived.Load()
	s.mu.Lock()
	st.Queue = s.q.Stats()
	s.mu.Unlock()
	return st
}
