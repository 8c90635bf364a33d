package grpcx

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/wire"
)

// ServerConfig describes a [Server]: the admission gate's configuration,
// [admit.Config], embedded, as httpx.ServerConfig embeds it, and beside it
// the hooks only a gRPC server has. admit.Config's fields are
// ServerConfig's, under the same configuration names (JSON and YAML decode
// them inline), so one YAML block configures either server and a field
// added to the gate is a field of both. A zero field takes its default. On
// gRPC they mean:
//
//	MaxTimeout        a call's context ends at arrival + min(MaxTimeout,
//	                  grpc-timeout, stormguard-timeout) [30s]: a caller can
//	                  shorten the server's deadline, never extend it
//	MinRemaining      a call with this or less left before its deadline, on
//	                  arrival or after waiting in the queue, fails with
//	                  DEADLINE_EXCEEDED and its handler never runs; about the
//	                  handler's service time
//	RetryAfter        the grpc-retry-pushback-ms of a refusal for an
//	                  overloaded instance and of a throttled client [1s, at
//	                  most a day], in whole milliseconds rounded up
//	Limit, Queue      the concurrency limit [vegas] and the queue behind it;
//	                  unary and streaming calls share them when both
//	                  interceptors are installed
//	MaxCriticality    the highest stormguard-criticality believed from a
//	                  caller [critical] unless TrustCriticality vouches for it
//	Supersede         collapses unary calls that carry idempotency-key
//	                  metadata (see "Request supersession" in the [Server]
//	                  documentation; MaxReplayBytes is ignored: the reply
//	                  message is shared, not copied); the key is the caller's
//	                  say-so: set it only where every caller is trusted, or
//	                  set IdempotencyScope
//	Limiter, Dials    a limiter built in code, the runtime kill switches
//	ServiceSaturated  true: a refusal for overload says
//	                  stormguard-overload: service
//	OnQueueWait       each admitted call's wait for its slot, on its
//	                  goroutine before the handler
//	OnRefuse          each call refused or dropped before its handler ran,
//	                  before the answer is sent
//
// See [admit.Config] for each field's full description. A composite literal
// names the embedded field:
//
//	grpcx.ServerConfig{Config: admit.Config{MaxTimeout: 5 * time.Second}, ThrottleClient: quota}
type ServerConfig struct {
	admit.Config `yaml:",inline"`

	// ThrottleClient, when set, is asked for every call that the kill
	// switch and the deadline let through whether to throttle its client
	// (a per-client quota, say), with the call's incoming context (its
	// metadata and peer) and full method name: if it answers true the call
	// fails with RESOURCE_EXHAUSTED and a pushback. It must be fast and
	// safe for concurrent use.
	ThrottleClient func(ctx context.Context, fullMethod string) bool `json:"-" yaml:"-"`
	// TrustCriticality, when set, is asked for every call whose
	// stormguard-criticality claims more than MaxCriticality whether to
	// believe its caller, with the call's incoming context and full method
	// name: true takes the claim as it is. Decide from something the
	// caller cannot forge, inside your network: the peer's verified
	// identity (peer.FromContext(ctx).AuthInfo under mutual TLS), or a peer
	// address on a private network that outsiders cannot reach. It must be
	// fast and safe for concurrent use.
	TrustCriticality func(ctx context.Context, fullMethod string) bool `json:"-" yaml:"-"`
	// IdempotencyScope, when set with Supersede, tells who makes a call
	// with idempotency-key metadata, from its incoming context and full
	// method name: calls are collapsed only when they carry the same key,
	// to the same method, from the same scope. Without it, the caller is
	// told by its credentials: its authorization and cookie metadata and
	// its TLS client certificate, where present. Return something the
	// caller cannot forge (the peer's verified identity under mutual TLS),
	// "" for callers you cannot tell apart. It must be fast and safe for
	// concurrent use.
	IdempotencyScope func(ctx context.Context, fullMethod string) string `json:"-" yaml:"-"`
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

// ServerStats is a snapshot of a [Server]'s counters: the admission gate's
// [admit.Stats], the type httpx.Server reports in too, so that both servers
// report in one vocabulary and one metrics collector serves both. On gRPC,
// "a status below 500" reads "a code that maps to an HTTP status below
// 500", as the [Server] documentation lists.
type ServerStats = admit.Stats

// ShedReason says why a [Server] refused a call for overload; it indexes
// [ServerStats].Shed. It is admit's type.
type ShedReason = admit.ShedReason

// The shed reasons: admit's.
const (
	ShedQueueFull    = admit.ShedQueueFull    // UNAVAILABLE, instance
	ShedEvicted      = admit.ShedEvicted      // UNAVAILABLE, instance
	ShedQueueTimeout = admit.ShedQueueTimeout // UNAVAILABLE, instance
	ShedKillSwitch   = admit.ShedKillSwitch   // UNAVAILABLE, service
	ShedThrottled    = admit.ShedThrottled    // RESOURCE_EXHAUSTED
	ShedKeyBusy      = admit.ShedKeyBusy      // RESOURCE_EXHAUSTED: too many wait for the key's twin
	NumShedReasons   = admit.NumShedReasons
)

// Server is overload control for a gRPC server, the equivalent of
// httpx.Server: it bounds the deadline of every call, drops work whose
// deadline has passed before starting it, runs at most a concurrency limit
// of handlers at once, queues the excess (first tries before retries), and
// refuses what it cannot serve cheaply, with the signals clients need.
// Build one with [NewServer] and install both of its interceptors (see
// [Server.ServerOptions]) so that unary and streaming calls share one limit
// and one queue.
//
// # A call's way through
//
//  1. The kill switch: with probability Dials.ShedFraction the call fails
//     with UNAVAILABLE, trailers stormguard-overload: service and
//     grpc-retry-pushback-ms: -1 (which tells any gRFC A6 client, not only
//     stormguard's, not to retry).
//  2. Its deadline becomes the earliest of arrival + MaxTimeout, the
//     incoming context's (grpc-go sets it from grpc-timeout) and
//     arrival + stormguard-timeout if that metadata is present and well
//     formed. If that leaves MinRemaining or less: DEADLINE_EXCEEDED,
//     counted as expired; the handler never runs.
//  3. ThrottleClient, if set and true: RESOURCE_EXHAUSTED with
//     grpc-retry-pushback-ms.
//  4. If nobody is queued and fewer than the limit are running, the handler
//     runs at once. Otherwise the call waits in the queue, ranked by its
//     attempt number (stormguard-attempt, else grpc-previous-rpc-attempts
//     + 1, else 1) and its criticality (stormguard-criticality, at most
//     MaxCriticality unless TrustCriticality vouches for the caller). The
//     queue
//     may refuse it or later give it up (full, evicted by a call it would
//     serve first, timed out by adaptive LIFO): UNAVAILABLE,
//     stormguard-overload: instance and grpc-retry-pushback-ms: RetryAfter
//     (or the service signal of step 1 if ServiceSaturated says so). Its
//     deadline may pass while it waits: DEADLINE_EXCEEDED, expired. Its
//     client may leave: CANCELLED, which nobody receives.
//  5. The handler runs with a context whose deadline is the call's, and
//     which carries the attempt number and the criticality for the
//     [deadline] package's accessors; a call made with that context through
//     this package's client interceptors propagates both.
//
// The signals go in the trailer metadata, where gRFC A6 puts the pushback.
//
// When a handler fails with an error that says retrying already stopped
// below it (see [RelayExhausted]), the Server adds
// stormguard-retries-exhausted: 1 to the trailer itself, so that the
// layers above do not retry: retries happen at one layer only.
//
// # Request supersession
//
// With Supersede set, unary calls that carry idempotency-key metadata
// ([KeyIdempotencyKey]: one value, 1 to 255 printable ASCII characters,
// optionally quoted; any other value is ignored) are collapsed in the
// admission gate, between steps 3 and 4, with the calls of the same key to
// the same method from the same caller (the same IdempotencyScope, if set;
// else the same authorization and cookie metadata and TLS client
// certificate) that the server holds, as httpx.Server does with the
// Idempotency-Key header:
//
//	its twin is…   the call                                    the twin
//	nowhere        runs as usual                               —
//	queued         takes the twin's place in the queue         ALREADY_EXISTS, trailers stormguard-superseded:
//	                                                           replaced and grpc-retry-pushback-ms: -1
//	in service     waits, and is answered with the twin's      runs once; its answer is kept
//	               reply message or error, header and
//	               trailer metadata, and stormguard-superseded:
//	               joined in the trailer
//	in service,    RESOURCE_EXHAUSTED with a pushback          runs on
//	too many wait  (shed, key-busy)
//
// Why ALREADY_EXISTS: it is the code that maps to HTTP 409, which the HTTP
// server answers (the idempotency draft's status for a key in use by
// another request), and neither stormguard's client nor a usual gRFC A6
// policy retries it or counts it against a circuit breaker. ABORTED, the
// code of a concurrency conflict, is retried by stormguard's classifier
// and often by A6 policies: a retried superseded call would supersede the
// newer one in turn. CANCELLED reads as the caller's own cancellation, and
// is what the server answers a caller that left. The negative pushback
// stops an A6 client that retries ALREADY_EXISTS all the same.
//
// A twin's reply message is shared with its waiters, not copied (grpc-go
// marshals it for each; a handler must not change a message after
// returning it). A reply is replayed only when the twin completed for a
// client that was still waiting: one that ended after its client left or
// after its deadline (a CANCELLED or DEADLINE_EXCEEDED of a handler that
// gave up on its context, or any answer then), or that panicked, is not;
// its waiters go through the gate again, and the first of them runs. The
// key is forgotten when the twin ends. Streaming calls are never
// collapsed: their metadata key is ignored.
//
// The key is the caller's say-so, like stormguard-criticality: a caller
// that learns or guesses another's key can have that caller's queued call
// superseded or read its reply. The default scope tells callers apart by
// their credentials, which callers that share them (behind a proxy that
// strips them, say) are not; turn supersession on only where every caller
// is inside your network and trusted, or set IdempotencyScope to the
// authenticated caller. A key names one intent: the server does not compare
// request messages, so a client must not reuse a key for a different
// request.
//
// # What the concurrency limit learns, and how calls are counted
//
// Each handler holds a slot, released, and the call counted in
// [ServerStats], as
//
//	panicked                                    IgnoreAt    Failed, and the panic goes on
//	returned after the deadline passed          DroppedAt   Wasted
//	returned after the client went away         IgnoreAt    Wasted
//	returned in time, OK or a code that maps   SuccessAt   Goodput
//	to an HTTP status below 500 (INVALID_ARGUMENT,
//	NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
//	UNAUTHENTICATED, FAILED_PRECONDITION, ABORTED,
//	OUT_OF_RANGE, RESOURCE_EXHAUSTED, CANCELLED)
//	returned in time, UNAVAILABLE or            DroppedAt   Failed (a downstream call
//	DEADLINE_EXCEEDED                                       was refused or timed out)
//	returned in time, another code (UNKNOWN,    IgnoreAt    Failed (a bug says
//	INTERNAL, UNIMPLEMENTED, DATA_LOSS)                     nothing about load)
//
// (the first line that applies wins). "In time" means before the call's
// deadline and while its client was there. Calls refused or dropped before
// starting hold no slot; each is counted in exactly one of Shed (by
// reason), Expired, Canceled, or, with Supersede, Superseded or Joined.
//
// The Server is the gRPC shell of an [admit.Gate], which decides, as it
// does for httpx.Server; see there for concurrency. A Server is safe for
// concurrent use; no goroutine is started per call and no callback
// (ServiceSaturated, ThrottleClient, OnQueueWait, the handler) runs under a
// lock.
type Server struct {
	gate      *admit.Gate
	throttle  func(context.Context, string) bool
	trust     func(context.Context, string) bool
	maxCrit   wire.Criticality
	supersede bool
	scope     func(context.Context, string) string

	// Trailers of the refusals, built once. grpc-go copies a trailer it is
	// given (metadata.Join).
	mdInstance  metadata.MD
	mdThrottled metadata.MD
}

// NewServer validates cfg, fills its defaults and builds a Server over a
// new [admit.Gate]: an empty queue and, unless cfg.Limiter is set, a fresh
// [limit.Limiter] from cfg.Limit that honours cfg.Dials.
func NewServer(cfg ServerConfig) (*Server, error) {
	g, err := admit.New(cfg.Config)
	if err != nil {
		return nil, err
	}
	ms := strconv.FormatInt(int64((cfg.WithDefaults().RetryAfter+time.Millisecond-1)/time.Millisecond), 10)
	return &Server{
		gate:        g,
		throttle:    cfg.ThrottleClient,
		trust:       cfg.TrustCriticality,
		maxCrit:     cfg.MaxCriticality,
		mdInstance:  metadata.MD{keyOverload: {wire.OverloadInstance.String()}, wire.KeyGRPCRetryPushback: {ms}},
		mdThrottled: metadata.MD{wire.KeyGRPCRetryPushback: {ms}},
		supersede:   cfg.Supersede != nil,
		scope:       cfg.IdempotencyScope,
	}, nil
}

// Limiter returns the concurrency limiter the server admits calls with.
func (s *Server) Limiter() *limit.Limiter { return s.gate.Limiter() }

// UnaryServerInterceptor returns the interceptor that puts unary calls
// through the server's overload control.
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor { return s.unary }

// StreamServerInterceptor returns the interceptor that puts streaming calls
// through the server's overload control. A stream holds its slot until its
// handler returns, so a limit shared with unary calls should allow for the
// streams that stay open.
func (s *Server) StreamServerInterceptor() grpc.StreamServerInterceptor { return s.stream }

// ServerOptions returns the options that install both interceptors, to pass
// to grpc.NewServer. They chain after interceptors installed before them.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.unary),
		grpc.ChainStreamInterceptor(s.stream),
	}
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	setTrailer := func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }
	r := s.request(ctx, info.FullMethod)
	if s.supersede {
		md, _ := metadata.FromIncomingContext(ctx)
		r.Key, r.KeyScope = keyOf(ctx, md, info.FullMethod, s.scope)
	}
	t, d := s.gate.Admit(ctx, time.Now(), r)
	switch {
	case d.Answer == admit.Joined:
		return sendReplay(ctx, d.Result.(*unaryReply))
	case !d.Admitted():
		return nil, s.refuse(setTrailer, d)
	}
	var resp any
	var cs *captureStream
	if st := grpc.ServerTransportStreamFromContext(ctx); t.Joinable() && st != nil {
		cs = &captureStream{ServerTransportStream: st}
	}
	var kept func(error) any
	if cs != nil {
		kept = func(err error) any { return cs.reply(resp, err) }
	}
	err := serve(ctx, func(hctx context.Context) error {
		if cs != nil {
			hctx = grpc.NewContextWithServerTransportStream(hctx, cs)
		}
		var err error
		resp, err = handler(hctx, req)
		return err
	}, t, setTrailer, kept)
	return resp, err
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return s.handle(ss.Context(), info.FullMethod, ss.SetTrailer, func(hctx context.Context) error {
		return handler(srv, &serverStream{ServerStream: ss, ctx: hctx})
	})
}

// serverStream is a ServerStream whose context is the handler's.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the handler's context.
func (s *serverStream) Context() context.Context { return s.ctx }

// handle takes a call through the steps of the Server documentation and
// runs it with run if it is admitted.
func (s *Server) handle(ctx context.Context, method string, setTrailer func(metadata.MD), run func(context.Context) error) error {
	t, d := s.gate.Admit(ctx, time.Now(), s.request(ctx, method))
	if !d.Admitted() {
		return s.refuse(setTrailer, d)
	}
	return serve(ctx, run, t, setTrailer, nil)
}

// request reads a call's signals for the gate, with the hooks that ask
// about its caller.
func (s *Server) request(ctx context.Context, method string) admit.Request {
	// The call's own keys only: metadata.FromIncomingContext would copy
	// every key the call carries.
	req := requestOf(func(key string) []string { return metadata.ValueFromIncomingContext(ctx, key) })
	if req.Criticality > s.maxCrit && s.trust != nil {
		req.TrustedCriticality = s.trust(ctx, method)
	}
	if s.throttle != nil {
		req.Throttle = func() bool { return s.throttle(ctx, method) }
	}
	return req
}

// requestOf reads a call's signals from its metadata, whose values for a
// key md gives: the attempt number (stormguard-attempt, else
// grpc-previous-rpc-attempts + 1, else 1), the caller's timeout
// (stormguard-timeout; grpc-timeout is the context's deadline) and the
// criticality (stormguard-criticality). A malformed value counts as absent.
func requestOf(md func(key string) []string) admit.Request {
	req := admit.Request{Attempt: attemptOf(md), Criticality: wire.DefaultCriticality}
	if v := md(keyTimeout); len(v) > 0 {
		req.Timeout, req.HasTimeout = wire.ParseTimeout(v[0])
	}
	if v := md(keyCriticality); len(v) > 0 {
		req.Criticality, _ = wire.ParseCriticality(v[0]) // malformed: the default
	}
	return req
}

// attemptOf reads a call's attempt number: stormguard-attempt, else
// grpc-previous-rpc-attempts + 1, else 1. A malformed value counts as
// absent.
func attemptOf(md func(key string) []string) int {
	if v := md(keyAttempt); len(v) > 0 {
		if n, ok := wire.ParseAttempt(v[0]); ok {
			return n
		}
	}
	if v := md(wire.KeyGRPCPreviousAttempts); len(v) > 0 {
		if n, ok := wire.AttemptFromPrevious(v[0]); ok {
			return n
		}
	}
	return 1
}

// serve runs the handler under the call's deadline and signals, then
// releases its ticket with the handler's outcome and, if kept is set and
// the handler returned, what kept returns: the answer to replay to the
// calls that joined it.
func serve(ctx context.Context, run func(context.Context) error, t admit.Ticket, setTrailer func(metadata.MD), kept func(error) any) (err error) {
	// The handler's context: one allocation, cancelled by a method call
	// (Ticket.Bind would add its cancel func's).
	hctx := new(deadline.Bound)
	hctx.Init(ctx, t.Deadline(), t.Attempt(), t.Criticality())
	returned := false
	defer func() {
		var result any
		if returned && kept != nil {
			result = kept(err)
		}
		t.ReleaseWith(ctx, time.Now(), handlerOutcome(err, !returned), result)
		hctx.Cancel()
	}()
	err = run(hctx)
	returned = true
	if err != nil && exhausted(err) {
		setTrailer(mdExhausted)
	}
	return err
}

// handlerOutcome tells how a handler ended from its error, as the Server
// documentation's table says.
func handlerOutcome(err error, panicked bool) admit.Outcome {
	if panicked {
		return admit.Panicked
	}
	switch status.Code(err) {
	case codes.OK, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition,
		codes.Aborted, codes.OutOfRange, codes.ResourceExhausted, codes.Canceled:
		return admit.Succeeded
	case codes.Unavailable, codes.DeadlineExceeded:
		return admit.FailedOverload
	default:
		return admit.Failed
	}
}

// Stats returns a snapshot of the server's counters. The counters are read
// one by one, so a snapshot taken while calls run may be off by the calls
// in progress.
func (s *Server) Stats() ServerStats { return s.gate.Stats() }
