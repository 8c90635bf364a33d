package grpcx

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"stormguard/deadline"
	"stormguard/httpx"
	"stormguard/killswitch"
	"stormguard/limit"
	"stormguard/shed"
	"stormguard/wire"
)

// ServerConfig describes a [Server]. It has the fields of
// httpx.ServerConfig, with the same meaning and the same configuration
// names, so one YAML block configures either; only the runtime hooks differ.
// The first fields are plain data (a zero field takes the default in
// brackets); the last ones are runtime parts that only code can supply.
type ServerConfig struct {
	// MaxTimeout bounds the deadline of every call [30s]: a call's context
	// ends at arrival + min(MaxTimeout, grpc-timeout, stormguard-timeout).
	// A caller can shorten the server's deadline, never extend it.
	MaxTimeout time.Duration `json:"max_timeout,omitempty" yaml:"max_timeout,omitempty"`
	// MinRemaining is the least time before its deadline a call must have
	// to start [Queue.MinRemaining, itself 0]: one with MinRemaining or less
	// left, on arrival or after waiting in the queue, fails with
	// DEADLINE_EXCEEDED and its handler never runs. Set it to about the
	// handler's service time. If both this and Queue.MinRemaining are set
	// they must agree.
	MinRemaining time.Duration `json:"min_remaining,omitempty" yaml:"min_remaining,omitempty"`
	// RetryAfter is the delay suggested, in grpc-retry-pushback-ms, to the
	// clients of a refusal for an overloaded instance and of a throttled
	// client [1s]. It is sent in whole milliseconds, rounded up.
	RetryAfter time.Duration `json:"retry_after,omitempty" yaml:"retry_after,omitempty"`
	// Limit chooses the concurrency-limit algorithm [vegas]; it is ignored
	// when Limiter is set.
	Limit limit.Spec `json:"limit,omitzero" yaml:"limit,omitempty"`
	// Queue shapes the queue where calls wait while the limit is reached:
	// capacity, order and priority (first tries before retries by default,
	// or by criticality).
	Queue shed.Config `json:"queue,omitzero" yaml:"queue,omitempty"`

	// Limiter, when set, is used instead of building one from Limit, for
	// example to share one limit between a gRPC and an HTTP server.
	Limiter *limit.Limiter `json:"-" yaml:"-"`
	// Dials are the runtime kill switches: the shed fraction sheds that
	// share of calls, chosen at random, with the service signal; the limit
	// override pins the concurrency limit (when the Server builds its
	// Limiter). Nil means no dials.
	Dials *killswitch.Dials `json:"-" yaml:"-"`
	// ServiceSaturated, when set, is asked on every refusal for overload
	// whether the whole service (not only this instance) is out of
	// capacity. If it answers true the refusal says stormguard-overload:
	// service instead of instance. It must be fast and safe for concurrent
	// use.
	ServiceSaturated func() bool `json:"-" yaml:"-"`
	// ThrottleClient, when set, is asked for every call whether to throttle
	// its client (a per-client quota, say), with the call's incoming context
	// (its metadata and peer) and full method name: if it answers true the
	// call fails with RESOURCE_EXHAUSTED and a pushback. It must be fast and
	// safe for concurrent use.
	ThrottleClient func(ctx context.Context, fullMethod string) bool `json:"-" yaml:"-"`
	// OnQueueWait, when set, is told how long each call that was admitted
	// waited for its slot: 0 for the calls admitted at once. It runs on the
	// call's goroutine before the handler, and must not block (a histogram
	// from metrics.QueueWait fits).
	OnQueueWait func(wait time.Duration) `json:"-" yaml:"-"`
}

// Defaults for zero [ServerConfig] fields: those of httpx.
const (
	DefaultMaxTimeout = httpx.DefaultMaxTimeout
	DefaultRetryAfter = httpx.DefaultRetryAfter
)

// ErrInvalidServerConfig is wrapped by the error [NewServer] and
// [ServerConfig.Validate] return for an invalid configuration; the message
// names the field by its configuration name.
var ErrInvalidServerConfig = errors.New("grpcx: invalid server config")

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
	case d.RetryAfter > wire.MaxPushback:
		return fmt.Errorf("%w: retry_after %v is more than %v", ErrInvalidServerConfig, c.RetryAfter, wire.MaxPushback)
	case d.MinRemaining < 0:
		return fmt.Errorf("%w: min_remaining %v is negative", ErrInvalidServerConfig, d.MinRemaining)
	case d.MinRemaining >= d.MaxTimeout:
		return fmt.Errorf("%w: min_remaining %v is not below max_timeout %v: every call would be dropped", ErrInvalidServerConfig, d.MinRemaining, d.MaxTimeout)
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

// ServerStats is a snapshot of a [Server]'s counters. It is the type of
// httpx.Server's snapshot, so that both servers report in one vocabulary
// and one metrics collector serves both; on gRPC, "handler returned a
// status below 500" reads "handler returned a code that maps to an HTTP
// status below 500", as the [Server] documentation lists.
type ServerStats = httpx.ServerStats

// ShedReason says why a [Server] refused a call for overload; it indexes
// [ServerStats].Shed. It is httpx's type.
type ShedReason = httpx.ShedReason

// The shed reasons, as in httpx.
const (
	ShedQueueFull    = httpx.ShedQueueFull    // UNAVAILABLE, instance
	ShedEvicted      = httpx.ShedEvicted      // UNAVAILABLE, instance
	ShedQueueTimeout = httpx.ShedQueueTimeout // UNAVAILABLE, instance
	ShedKillSwitch   = httpx.ShedKillSwitch   // UNAVAILABLE, service
	ShedThrottled    = httpx.ShedThrottled    // RESOURCE_EXHAUSTED
	NumShedReasons   = httpx.NumShedReasons
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
//     + 1, else 1) and its criticality (stormguard-criticality). The queue
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
// # What the concurrency limit learns, and how calls are counted
//
// Each handler holds a [limit.Permit], released, and the call counted in
// [ServerStats], as
//
//	returned in time, OK or a code that maps   SuccessAt   Goodput
//	to an HTTP status below 500 (INVALID_ARGUMENT,
//	NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
//	UNAUTHENTICATED, FAILED_PRECONDITION, ABORTED,
//	OUT_OF_RANGE, RESOURCE_EXHAUSTED, CANCELLED)
//	returned in time, UNAVAILABLE or            DroppedAt   Failed (a downstream call
//	DEADLINE_EXCEEDED                                       was refused or timed out)
//	returned in time, another code (UNKNOWN,    IgnoreAt    Failed (a bug says
//	INTERNAL, UNIMPLEMENTED, DATA_LOSS)                     nothing about load)
//	returned after the deadline passed          DroppedAt   Wasted
//	returned after the client went away         IgnoreAt    Wasted
//	panicked                                    IgnoreAt    Failed, and the panic goes on
//
// "In time" means while the call's context was live. Calls refused or
// dropped before starting hold no permit; each is counted in exactly one of
// Shed (by reason), Expired or Canceled.
//
// A Server is safe for concurrent use; no goroutine is started per call and
// no callback (ServiceSaturated, ThrottleClient, OnQueueWait, the handler)
// runs under its lock.
type Server struct {
	maxTimeout   time.Duration
	minRemaining time.Duration
	dials        *killswitch.Dials
	saturated    func() bool
	throttle     func(context.Context, string) bool
	onWait       func(time.Duration)
	gate         *gate

	// Trailers and errors of the refusals, built once. grpc-go copies a
	// trailer it is given (metadata.Join) and only reads a status.
	mdInstance  metadata.MD
	mdThrottled metadata.MD
	c           counters
}

// counters are the Server's metrics, updated with atomics.
type counters struct {
	arrived  atomic.Uint64
	retries  atomic.Uint64
	running  atomic.Int64
	goodput  atomic.Uint64
	failed   atomic.Uint64
	wasted   atomic.Uint64
	expired  atomic.Uint64
	canceled atomic.Uint64
	shed     [NumShedReasons]atomic.Uint64
}

// NewServer validates cfg, fills its defaults and builds a Server with an
// empty queue and, unless cfg.Limiter is set, a fresh [limit.Limiter] from
// cfg.Limit that honours cfg.Dials.
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
	ms := strconv.FormatInt(int64((cfg.RetryAfter+time.Millisecond-1)/time.Millisecond), 10)
	return &Server{
		maxTimeout:   cfg.MaxTimeout,
		minRemaining: cfg.MinRemaining,
		dials:        cfg.Dials,
		saturated:    cfg.ServiceSaturated,
		throttle:     cfg.ThrottleClient,
		onWait:       cfg.OnQueueWait,
		gate:         newGate(lim, q),
		mdInstance:   metadata.MD{keyOverload: {wire.OverloadInstance.String()}, wire.KeyGRPCRetryPushback: {ms}},
		mdThrottled:  metadata.MD{wire.KeyGRPCRetryPushback: {ms}},
	}, nil
}

// Limiter returns the concurrency limiter the server admits calls with.
func (s *Server) Limiter() *limit.Limiter { return s.gate.lim }

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
	var resp any
	setTrailer := func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }
	err := s.handle(ctx, info.FullMethod, setTrailer, func(hctx context.Context) error {
		var err error
		resp, err = handler(hctx, req)
		return err
	})
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
	s.c.arrived.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	attempt := attemptOf(md)
	if attempt > 1 {
		s.c.retries.Add(1)
	}
	if s.dials != nil {
		if ppm := s.dials.ShedPPM(); ppm > 0 && rand.Uint32N(1_000_000) < ppm {
			return s.refuse(setTrailer, ShedKillSwitch)
		}
	}

	now := time.Now()
	budget := s.maxTimeout
	if v := md[keyTimeout]; len(v) > 0 {
		if d, ok := wire.ParseTimeout(v[0]); ok && d < budget { // malformed: ignored
			budget = d
		}
	}
	dl := now.Add(budget)
	if pdl, ok := ctx.Deadline(); ok && pdl.Before(dl) {
		dl = pdl
	}
	if !now.Before(dl.Add(-s.minRemaining)) {
		return s.expire()
	}
	if s.throttle != nil && s.throttle(ctx, method) {
		return s.refuse(setTrailer, ShedThrottled)
	}
	crit := wire.DefaultCriticality
	if v := md[keyCriticality]; len(v) > 0 {
		crit, _ = wire.ParseCriticality(v[0]) // malformed: the default
	}

	a := s.gate.admit(ctx, now, attempt, crit, dl)
	if !a.ok {
		switch a.why {
		case shed.None: // the client left while the call waited
			s.c.canceled.Add(1)
			return status.Error(codes.Canceled, "grpcx: call abandoned by its client while queued")
		case shed.Expired:
			return s.expire()
		case shed.Evicted:
			return s.refuse(setTrailer, ShedEvicted)
		case shed.QueueTimeout:
			return s.refuse(setTrailer, ShedQueueTimeout)
		default: // shed.QueueFull
			return s.refuse(setTrailer, ShedQueueFull)
		}
	}
	if s.onWait != nil {
		s.onWait(a.waited)
	}
	return s.serve(ctx, run, a.permit, dl, attempt, crit, setTrailer)
}

// attemptOf reads a call's attempt number: stormguard-attempt, else
// grpc-previous-rpc-attempts + 1, else 1. A malformed value counts as
// absent.
func attemptOf(md metadata.MD) int {
	if v := md[keyAttempt]; len(v) > 0 {
		if n, ok := wire.ParseAttempt(v[0]); ok {
			return n
		}
	}
	if v := md[wire.KeyGRPCPreviousAttempts]; len(v) > 0 {
		if n, ok := wire.AttemptFromPrevious(v[0]); ok {
			return n
		}
	}
	return 1
}

// serve runs the handler under the call's deadline and signals, then
// accounts for it and releases its permit.
func (s *Server) serve(ctx context.Context, run func(context.Context) error, p limit.Permit, dl time.Time, attempt int, crit wire.Criticality, setTrailer func(metadata.MD)) (err error) {
	hctx := ctx
	var cancel context.CancelFunc
	if pdl, ok := ctx.Deadline(); !ok || dl.Before(pdl) {
		hctx, cancel = context.WithDeadline(ctx, dl)
	}
	hctx = deadline.WithCriticality(deadline.WithAttempt(hctx, attempt), crit)
	s.c.running.Add(1)
	returned := false
	defer func() {
		s.finish(hctx, p, err, !returned)
		if cancel != nil {
			cancel()
		}
	}()
	err = run(hctx)
	returned = true
	if err != nil && exhausted(err) {
		setTrailer(mdExhausted)
	}
	return err
}

// finish accounts for a handler that returned (or panicked) and releases
// its permit, as the Server documentation's table says.
func (s *Server) finish(hctx context.Context, p limit.Permit, err error, panicked bool) {
	s.c.running.Add(-1)
	kind := releaseSuccess
	switch cerr := hctx.Err(); {
	case panicked:
		s.c.failed.Add(1)
		kind = releaseIgnore
	case cerr == context.DeadlineExceeded:
		s.c.wasted.Add(1)
		kind = releaseDropped
	case cerr != nil: // the client went away
		s.c.wasted.Add(1)
		kind = releaseIgnore
	default:
		switch status.Code(err) {
		case codes.OK, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
			codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition,
			codes.Aborted, codes.OutOfRange, codes.ResourceExhausted, codes.Canceled:
			s.c.goodput.Add(1)
		case codes.Unavailable, codes.DeadlineExceeded:
			s.c.failed.Add(1)
			kind = releaseDropped
		default:
			s.c.failed.Add(1)
			kind = releaseIgnore
		}
	}
	s.gate.release(p, kind)
}

// Stats returns a snapshot of the server's counters. The counters are read
// one by one, so a snapshot taken while calls run may be off by the calls
// in progress.
func (s *Server) Stats() ServerStats {
	st := ServerStats{
		Arrived:  s.c.arrived.Load(),
		Retries:  s.c.retries.Load(),
		InFlight: int(s.c.running.Load()),
		Limit:    s.gate.lim.Limit(),
		Goodput:  s.c.goodput.Load(),
		Failed:   s.c.failed.Load(),
		Wasted:   s.c.wasted.Load(),
		Expired:  s.c.expired.Load(),
		Canceled: s.c.canceled.Load(),
	}
	for i := range st.Shed {
		st.Shed[i] = s.c.shed[i].Load()
	}
	st.Queued, st.Queue = s.gate.stats()
	return st
}
