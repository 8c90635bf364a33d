package httpx

import (
	"net/http"
	"strconv"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/wire"
)

// ServerConfig describes a [Server]: the admission gate's configuration,
// [admit.Config], embedded, and beside it the hooks only an HTTP server
// has. admit.Config's fields are ServerConfig's, under the same
// configuration names (JSON and YAML decode them inline), so one YAML block
// configures an HTTP or a gRPC server and a field added to the gate is a
// field of both. A zero field takes its default. On HTTP they mean:
//
//	MaxTimeout        a request's context ends at arrival +
//	                  min(MaxTimeout, Stormguard-Timeout) [30s]: a caller can
//	                  shorten the server's deadline, never extend it
//	MinRemaining      a request with this or less left before its deadline,
//	                  on arrival or after waiting in the queue, is answered
//	                  504 and its handler never runs; about the handler's
//	                  service time
//	RetryAfter        the Retry-After of a 503 for an overloaded instance and
//	                  of a 429 [1s, at most a day], in whole seconds rounded up
//	Limit, Queue      the concurrency limit [vegas] and the queue behind it
//	MaxCriticality    the highest Stormguard-Criticality believed from a
//	                  caller [critical] unless TrustCriticality vouches for it
//	Supersede         collapses requests that carry an Idempotency-Key header
//	                  (see "Request supersession" in the [Server]
//	                  documentation); the key is the caller's say-so: set it
//	                  only where every caller is trusted, or set
//	                  IdempotencyScope
//	Limiter, Dials    a limiter built in code, the runtime kill switches
//	ServiceSaturated  true: a refusal for overload says
//	                  Stormguard-Overload: service, with no Retry-After
//	OnQueueWait       each admitted request's wait for its slot, on its
//	                  goroutine before the handler
//	OnRefuse          each request refused or dropped before its handler
//	                  ran, before the answer is sent
//
// See [admit.Config] for each field's full description. A composite literal
// names the embedded field:
//
//	httpx.ServerConfig{Config: admit.Config{MaxTimeout: 5 * time.Second}, ThrottleClient: quota}
type ServerConfig struct {
	admit.Config `yaml:",inline"`

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
	// the same key, to the same method, host, path and query string, from
	// the same scope. Without it, the caller is told by its credentials: the
	// Authorization and Cookie headers and the TLS client certificate,
	// where present. Return something the caller cannot forge (the
	// authenticated user or client, a verified certificate's subject), ""
	// for callers you cannot tell apart. It must be fast and safe for
	// concurrent use.
	IdempotencyScope func(r *http.Request) string `json:"-" yaml:"-"`
}

// Defaults for zero [ServerConfig] fields: admit's.
const (
	DefaultMaxTimeout = admit.DefaultMaxTimeout
	DefaultRetryAfter = admit.DefaultRetryAfter
)

// ErrInvalidServerConfig is wrapped by the error [NewServer] and
// [admit.Config.Validate] (ServerConfig's Validate) return for an invalid
// configuration; the message names the field by its configuration name. It
// is [admit.ErrInvalidConfig]: the configuration is the admission gate's.
var ErrInvalidServerConfig = admit.ErrInvalidConfig

// WithDefaults returns c with the defaults of its admission gate's
// configuration filled in ([admit.Config.WithDefaults]).
func (c ServerConfig) WithDefaults() ServerConfig {
	c.Config = c.Config.WithDefaults()
	return c
}

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
// to the same method, host, path and query string, from the same caller
// (the same IdempotencyScope, if set; else the same Authorization and
// Cookie headers and TLS client certificate), that the server holds:
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
// response is replayed only when the twin completed for a client that was
// still waiting: one that ended after its client left or after its
// deadline (an empty 200 of a handler that returned when its context
// ended, a 499, a 408), that panicked, or that is larger, hijacked or
// declares trailers is not; its waiters go through the gate again, and
// the first of them runs. The key is forgotten when the twin ends; a
// request with it that arrives later runs again (the server keeps no
// responses after the fact).
//
// The key is the caller's say-so, like Stormguard-Criticality: a caller
// that learns or guesses another's key can have that caller's queued
// request superseded or read its response. The default scope tells
// callers apart by their credentials, which a caller that shares another's
// (behind a proxy that strips them, say) does not; turn supersession on
// only where every caller is inside your network and trusted, or set
// IdempotencyScope to the authenticated caller. A key names one intent:
// the server does not compare bodies, so a client must not reuse a key for
// a different request.
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
	g, err := admit.New(cfg.Config)
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
// [ServerStats].Shed. It is admit's type, as grpcx's is.
type ShedReason = admit.ShedReason

// The shed reasons: admit's.
const (
	ShedQueueFull    = admit.ShedQueueFull    // 503, instance
	ShedEvicted      = admit.ShedEvicted      // 503, instance
	ShedQueueTimeout = admit.ShedQueueTimeout // 503, instance
	ShedKillSwitch   = admit.ShedKillSwitch   // 503, service
	ShedThrottled    = admit.ShedThrottled    // 429
	ShedKeyBusy      = admit.ShedKeyBusy      // 429: too many wait for the key's twin

	// NumShedReasons is the number of shed reasons.
	NumShedReasons = admit.NumShedReasons
)

// ServerStats is a snapshot of a [Server]'s counters: the admission gate's
// [admit.Stats], in the vocabulary of the whole project (offered load,
// goodput, wasted work, shed, expired). grpcx.Server reports in the same
// type.
type ServerStats = admit.Stats

// Stats returns a snapshot of the server's counters. The counters are read
// one by one, so a snapshot taken while requests run may be off by the
// requests in progress.
func (s *Server) Stats() ServerStats { return s.gate.Stats() }
