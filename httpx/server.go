package httpx

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// ServerConfig describes a [Server]. Its fields but ThrottleClient,
// TrustCriticality and IdempotencyScope are those of [admit.Config], with the same meaning and
// the same configuration names, so one YAML block configures an HTTP or a
// gRPC server; here is what they mean on HTTP. The first fields are plain
// data (they decode from JSON or YAML and a zero field takes the default in
// brackets); the last ones are runtime parts that only code can supply.
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
	// clients of a 503 for an overloaded instance and of a 429 [1s], at
	// most a day. It is sent in whole seconds, rounded up.
	RetryAfter time.Duration `json:"retry_after,omitempty" yaml:"retry_after,omitempty"`
	// Limit chooses the concurrency-limit algorithm [vegas, Netflix's
	// defaults]; use kind "fixed" for a constant limit. It is ignored when
	// Limiter is set.
	Limit limit.Spec `json:"limit,omitzero" yaml:"limit,omitempty"`
	// Queue shapes the queue where requests wait while the limit is
	// reached: capacity, order (fifo, lifo, adaptive-lifo with CoDel) and
	// priority (first tries before retries by default, or by criticality).
	Queue shed.Config `json:"queue,omitzero" yaml:"queue,omitempty"`
	// MaxCriticality is the highest Stormguard-Criticality believed from a
	// caller [critical]: a request that claims more (critical-plus) is
	// queued, and runs and propagates, as MaxCriticality, unless
	// TrustCriticality vouches for its caller. Lower claims are always
	// taken. The header is the caller's say-so: with Queue.Priority
	// "criticality" a request that claims critical-plus is served before,
	// and evicts from a full queue, everyone else's. Raise this to
	// critical-plus only when every client that reaches the server is
	// inside your network and trusted; see [admit.Config].MaxCriticality.
	MaxCriticality wire.Criticality `json:"max_criticality,omitempty" yaml:"max_criticality,omitempty"`
	// Supersede turns request supersession on for requests that carry an
	// Idempotency-Key header; nil, the default, leaves it off. See
	// "Request supersession" in the [Server] documentation for the rules,
	// and [admit.SupersedeConfig] for the bounds. The key is the caller's
	// say-so: turn it on only where every caller is inside your network
	// and trusted, or set IdempotencyScope.
	Supersede *admit.SupersedeConfig `json:"supersede,omitempty" yaml:"supersede,omitempty"`

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
	// ThrottleClient, when set, is asked for every request that the kill
	// switch and the deadline let through whether to throttle its client (a
	// per-client quota, say): if it answers true the request is refused
	// with 429 and Retry-After. It must be fast and safe for concurrent
	// use.
	ThrottleClient func(r *http.Request) bool `json:"-" yaml:"-"`
	// TrustCriticality, when set, is asked for every request whose
	// Stormguard-Criticality claims more than MaxCriticality whether to
	// believe its caller: true takes the claim as it is. Decide from
	// something the caller cannot forge, inside your network: a verified
	// client certificate (r.TLS), a header your authenticating proxy sets
	// and strips from outside traffic, a peer address on a private network
	// that outsiders cannot reach (r.RemoteAddr). It must be fast and safe
	// for concurrent use.
	TrustCriticality func(r *http.Request) bool `json:"-" yaml:"-"`
	// IdempotencyScope, when set with Supersede, tells who sends a request
	// with an Idempotency-Key: requests are collapsed only when they carry
	// the same key, to the same method, host and path, from the same
	// scope. Return something the caller cannot forge (the authenticated
	// user or client, a verified certificate's subject), "" for callers you
	// cannot tell apart. It must be fast and safe for concurrent use.
	IdempotencyScope func(r *http.Request) string `json:"-" yaml:"-"`
	// OnQueueWait, when set, is told how long each request that was
	// admitted waited for its slot: 0 for the requests admitted at once. It
	// runs on the request's goroutine before the handler, and must not
	// block (a histogram from metrics.QueueWait fits).
	OnQueueWait func(wait time.Duration) `json:"-" yaml:"-"`
	// OnRefuse, when set, is told of every request refused or dropped before
	// its handler ran (shed, expired, whose caller left while it was
	// queued, or answered by supersession), with the request's context,
	// its attempt number and the gate's decision, before the answer is
	// sent. It runs on the request's goroutine
	// and must not block (otelx.ServerEvents, which adds a span event,
	// fits).
	OnRefuse func(ctx context.Context, attempt int, d admit.Decision) `json:"-" yaml:"-"`
}

// Defaults for zero [ServerConfig] fields: admit's.
const (
	DefaultMaxTimeout = admit.DefaultMaxTimeout
	DefaultRetryAfter = admit.DefaultRetryAfter
)

// ErrInvalidServerConfig is wrapped by the error [NewServer] and
// [ServerConfig.Validate] return for an invalid configuration; the message
// names the field by its configuration name. It is [admit.ErrInvalidConfig]:
// the configuration is the admission gate's.
var ErrInvalidServerConfig = admit.ErrInvalidConfig

// gate returns the admission gate's part of c.
func (c ServerConfig) gate() admit.Config {
	return admit.Config{MaxTimeout: c.MaxTimeout, MinRemaining: c.MinRemaining, RetryAfter: c.RetryAfter,
		Limit: c.Limit, Queue: c.Queue, MaxCriticality: c.MaxCriticality, Supersede: c.Supersede, Limiter: c.Limiter, Dials: c.Dials,
		ServiceSaturated: c.ServiceSaturated, OnQueueWait: c.OnQueueWait, OnRefuse: c.OnRefuse}
}

// WithDefaults returns c with every zero field of its own set to its
// default (the queue's and the limit's are theirs to fill) and MinRemaining
// resolved against Queue.MinRemaining, as [admit.Config.WithDefaults] does.
func (c ServerConfig) WithDefaults() ServerConfig {
	d := c.gate().WithDefaults()
	c.MaxTimeout, c.MinRemaining, c.RetryAfter, c.Queue = d.MaxTimeout, d.MinRemaining, d.RetryAfter, d.Queue
	return c
}

// Validate reports a configuration that [NewServer] cannot use, naming the
// field, as [admit.Config.Validate] does. Defaults are applied first, so a
// zero field is valid.
func (c ServerConfig) Validate() error { return c.gate().Validate() }

// Server is overload-control middleware for net/http: it bounds the
// deadline of every request, drops work whose deadline has passed before
// starting it, runs at most a concurrency limit of handlers at once, queues
// the excess (first tries before retries), and refuses what it cannot serve
// cheaply and with the signals clients need. Build one with [NewServer] and
// wrap handlers with [Server.Wrap].
//
// The Server is the HTTP shell of an [admit.Gate], which decides; the
// Server reads the request's signals from its headers and writes the
// gate's answers.
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
//     runs at once. Otherwise the request waits in the queue, ranked by its
//     attempt number (Stormguard-Attempt) and criticality
//     (Stormguard-Criticality, at most MaxCriticality unless
//     TrustCriticality vouches for the caller). The queue may refuse it or later give it up
//     (full, evicted by a request it would serve first, timed out by
//     adaptive LIFO): 503, Retry-After, Stormguard-Overload: instance (or
//     service, see ServiceSaturated). Its deadline may pass while it
//     waits: 504, expired. Its client may leave: nothing is answered, and
//     nobody waits for it. When a handler finishes, the next request the
//     queue chooses takes its slot.
//  5. The handler runs with a context whose deadline is the request's, and
//     which carries the attempt number and the criticality for the
//     [deadline] package's accessors. A [Transport] that sends with this
//     context propagates the remaining deadline and the criticality to the
//     next hop.
//
// # Request supersession
//
// With Supersede set, requests that carry an Idempotency-Key header (the
// IETF httpapi draft's: one value, 1 to 255 printable ASCII characters,
// optionally quoted; any other value is ignored) are collapsed in the
// admission gate, between steps 3 and 4, with the requests of the same key
// to the same method, host and path (and from the same IdempotencyScope,
// if set) that the server holds:
//
//	its twin is…   the request                                    the twin
//	nowhere        runs as usual                                  —
//	queued         takes the twin's place in the queue            409 Conflict, Stormguard-Superseded: replaced
//	in service     waits, and is answered with the twin's         runs once; its response is kept
//	               response, replayed: status, header and body,
//	               and Stormguard-Superseded: joined
//	in service,    429 with Retry-After (shed, key-busy)          runs on
//	too many wait
//
// Why 409: it is the status the draft gives a request whose key is in use by
// another, and stormguard's Transport (like most clients) does not retry
// it, nor count it against a circuit breaker: the caller's newer request,
// which holds the key now, carries the answer; a retry of the older would
// only supersede the newer in turn. gRPC's server answers ALREADY_EXISTS,
// the code that maps to 409.
//
// To replay a response the server keeps a copy of what the twin's handler
// writes, for every request with a key it tracks: the header as sent with
// the status, and the body up to Supersede.MaxReplayBytes (64 KiB by
// default), so at most the concurrency limit × MaxReplayBytes in all. A
// twin whose response is larger, is hijacked, declares trailers, panics, or
// fails after its client left (its handler most likely gave up on its
// context) leaves nothing to replay: its waiters go through the gate
// again, and the first of them runs. The key is forgotten when the twin
// ends; a request with it that arrives later runs again (the server keeps
// no responses after the fact).
//
// The key is the caller's say-so, like Stormguard-Criticality: a caller
// that learns or guesses another's key can have that caller's queued
// request superseded or read its response. Turn supersession on only where
// every caller is inside your network and trusted (the key's scope then is
// the method, host and path), or set IdempotencyScope to tell callers
// apart. A key names one intent: the server does not compare bodies, so a
// client must not reuse a key for a different request.
//
// # What the concurrency limit learns
//
// Each handler holds a slot, released when it returns as
//
//	panicked                                      IgnoreAt, and the panic goes on
//	returned after the deadline passed            DroppedAt: the work took too long
//	returned after the client went away           IgnoreAt: the caller's choice
//	returned in time, status < 500, or hijacked   SuccessAt: an RTT sample (hijacked: IgnoreAt)
//	returned in time, status 503 or 504           DroppedAt: a downstream call was
//	                                              refused or timed out, i.e. overload
//	returned in time, other status ≥ 500          IgnoreAt: a bug says nothing about load
//
// (the first line that applies wins) so that only requests served normally
// feed the RTT baseline, and timed out or shed work never does. Requests
// refused or dropped before starting hold no slot. In time means before the
// request's deadline and while its client was there.
//
// # Accounting
//
// Every request that reaches the middleware ends in exactly one way, counted
// in [ServerStats]: Goodput (status < 500, or hijacked), Failed (≥ 500, or
// a panic) or Wasted (too late) when the handler ran, one of the Shed
// reasons, Expired, Canceled (the client left while it waited), or, with
// Supersede, Superseded (a newer twin took its place) or Joined (answered
// with its twin's response).
//
// Concurrency: see [admit.Gate]. No goroutine is started per request, and
// no callback (ServiceSaturated, ThrottleClient, OnQueueWait, the handler)
// runs under a lock. A request served costs two allocations, its context
// (which also records the status) and net/http's copy of the
// *http.Request that carries it, and two readings of the monotonic clock,
// on arrival and when its handler returns; one refused on arrival (shed,
// expired, throttled), without an Idempotency-Key, allocates nothing. A
// Server is safe for concurrent use, and one Server may wrap several
// handlers, which then share its limit and queue.
type Server struct {
	gate       *admit.Gate
	throttle   func(*http.Request) bool
	trust      func(*http.Request) bool
	maxCrit    wire.Criticality
	retryAfter []string // the Retry-After value, built once
	supersede  bool
	scope      func(*http.Request) string
	maxReplay  int
	clock      clock // the time of arrivals
}

// NewServer validates cfg, fills its defaults and builds a Server over a
// new [admit.Gate]: an empty queue and, unless cfg.Limiter is set, a fresh
// [limit.Limiter] from cfg.Limit that honours cfg.Dials.
func NewServer(cfg ServerConfig) (*Server, error) {
	g, err := admit.New(cfg.gate())
	if err != nil {
		return nil, err
	}
	secs := (cfg.WithDefaults().RetryAfter + time.Second - 1) / time.Second
	s := &Server{
		gate:       g,
		throttle:   cfg.ThrottleClient,
		trust:      cfg.TrustCriticality,
		maxCrit:    cfg.MaxCriticality,
		retryAfter: []string{strconv.FormatInt(int64(max(secs, 1)), 10)},
	}
	if cfg.Supersede != nil {
		s.supersede, s.scope = true, cfg.IdempotencyScope
		s.maxReplay = cfg.Supersede.WithDefaults().MaxReplayBytes
	}
	return s, nil
}

// Wrap returns h behind the server's overload control. Its method value,
// s.Wrap, is the usual func(http.Handler) http.Handler middleware.
func (s *Server) Wrap(h http.Handler) http.Handler {
	return &guarded{s: s, next: h}
}

// Limiter returns the concurrency limiter the server admits requests with.
func (s *Server) Limiter() *limit.Limiter { return s.gate.Limiter() }

// ShedReason says why a [Server] refused a request for overload; it indexes
// [ServerStats].Shed. It has the values of [admit.ShedReason], under
// httpx's name: convert between the two freely.
type ShedReason admit.ShedReason

// The shed reasons: admit's.
const (
	ShedQueueFull    = ShedReason(admit.ShedQueueFull)    // 503, instance
	ShedEvicted      = ShedReason(admit.ShedEvicted)      // 503, instance
	ShedQueueTimeout = ShedReason(admit.ShedQueueTimeout) // 503, instance
	ShedKillSwitch   = ShedReason(admit.ShedKillSwitch)   // 503, service
	ShedThrottled    = ShedReason(admit.ShedThrottled)    // 429
	ShedKeyBusy      = ShedReason(admit.ShedKeyBusy)      // 429: too many wait for the key's twin

	// NumShedReasons is the number of shed reasons.
	NumShedReasons = admit.NumShedReasons
)

// String returns the reason's name, such as "queue-full", as metrics label
// it.
func (r ShedReason) String() string {
	if r < NumShedReasons {
		return admit.ShedReason(r).String()
	}
	return "httpx.ShedReason(" + strconv.Itoa(int(r)) + ")"
}

// ServerStats is a snapshot of a [Server]'s counters: the admission gate's
// [admit.Stats], in the vocabulary of the whole project (offered load,
// goodput, wasted work, shed, expired). grpcx.Server reports in the same
// type.
type ServerStats = admit.Stats

// Stats returns a snapshot of the server's counters. The counters are read
// one by one, so a snapshot taken while requests run may be off by the
// requests in progress.
func (s *Server) Stats() ServerStats { return s.gate.Stats() }
