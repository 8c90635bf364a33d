package grpcpolicy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/retry"
)

// Live applies a [policyfile.Live] to gRPC clients and servers, as
// policyfile.Live.Transport and Handler do for net/http: every call is
// decided by one whole version of the file, the one current when the call
// starts, and keeps it to its end.
//
//   - A client call (unary or stream) takes the retrier of its dependency
//     in the current version and runs through grpcx's interceptors for that
//     retrier: its attempts, backoff, budget and breaker all come from that
//     version. A reload during the call changes nothing for it.
//   - A server call is admitted, queued or refused by the grpcx.Server of
//     the current version's server block, and runs to its end there. A
//     version whose server block did not change keeps the previous
//     version's server, with its limit and queue (as policyfile.Live keeps
//     its HTTP server: the same block, the same server); a changed block
//     gets a new server, built the first time a call needs it, from
//     [ServerConfig] and the runtime parts of [LiveServerConfig]. Calls
//     admitted or queued by the old server finish there.
//
// The servers a Live built are kept, so that [Live.ServerStats] adds up
// their counters across reloads. A Live is safe for concurrent use.
type Live struct {
	l       *policyfile.Live
	cfg     func(*grpcx.ServerConfig)
	copts   []grpcx.ClientOption
	current atomic.Pointer[serverFor] // the server of the last version a call used

	mu      sync.Mutex // guards servers and built
	servers map[*httpx.Server]*serverFor
	built   []*grpcx.Server
}

// serverFor is the gRPC server of one server block, and its interceptors.
type serverFor struct {
	key    *httpx.Server // the version's HTTP server: the same for the same block
	s      *grpcx.Server
	unary  grpc.UnaryServerInterceptor
	stream grpc.StreamServerInterceptor
	err    error // why the server could not be built
}

// LiveOption configures [NewLive].
type LiveOption func(*Live)

// LiveServerConfig is called on the configuration of every gRPC server a
// version's server block builds, after the block's fields are copied in
// ([ServerConfig]): set the runtime parts there (Dials, OnQueueWait,
// OnRefuse, ThrottleClient, TrustCriticality, IdempotencyScope).
func LiveServerConfig(f func(*grpcx.ServerConfig)) LiveOption {
	return func(g *Live) { g.cfg = f }
}

// LiveClientOptions are given to the client interceptors of every version
// (grpcx.WithRetryableMethods, say), before those of the call to
// [Live.DialOptions] or the interceptor constructors.
func LiveClientOptions(opts ...grpcx.ClientOption) LiveOption {
	return func(g *Live) { g.copts = append(g.copts, opts...) }
}

// NewLive returns the gRPC side of l. The retriers are l's (and so shared
// with l's HTTP transports for the same dependency); the servers are
// Live's own. It builds the current version's server, and returns the
// error of grpcx.NewServer if it cannot be built. A later version's server
// block has passed the same validation when l applied it, so only a
// LiveServerConfig that makes it invalid could fail it: its calls would
// then fail with INTERNAL.
func NewLive(l *policyfile.Live, opts ...LiveOption) (*Live, error) {
	g := &Live{l: l, servers: map[*httpx.Server]*serverFor{}}
	for _, o := range opts {
		o(g)
	}
	if _, err := g.Server(l.Current()); err != nil {
		return nil, err
	}
	return g, nil
}

// DialOptions returns the dial options of a client of dependency dep whose
// calls follow the live policy, to pass to grpc.NewClient: as
// grpcx.DialOptions, grpc.WithDisableRetry and both client interceptors.
func (g *Live) DialOptions(dep string, opts ...grpcx.ClientOption) []grpc.DialOption {
	c := g.client(dep, opts)
	return []grpc.DialOption{
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(c.unary),
		grpc.WithChainStreamInterceptor(c.stream),
	}
}

// UnaryClientInterceptor returns an interceptor that sends each unary call
// through grpcx.UnaryClientInterceptor with the retrier of dep in the
// version current when the call starts. A version without dep fails the
// call with FAILED_PRECONDITION, whose error wraps that of
// policyfile.File.Client.
func (g *Live) UnaryClientInterceptor(dep string, opts ...grpcx.ClientOption) grpc.UnaryClientInterceptor {
	return g.client(dep, opts).unary
}

// StreamClientInterceptor is UnaryClientInterceptor for streams, through
// grpcx.StreamClientInterceptor.
func (g *Live) StreamClientInterceptor(dep string, opts ...grpcx.ClientOption) grpc.StreamClientInterceptor {
	return g.client(dep, opts).stream
}

func (g *Live) client(dep string, opts []grpcx.ClientOption) *liveClient {
	return &liveClient{l: g.l, dep: dep, opts: append(slices.Clip(g.copts), opts...)}
}

// liveClient is the client interceptors of one dependency.
type liveClient struct {
	l     *policyfile.Live
	dep   string
	opts  []grpcx.ClientOption
	cache atomic.Pointer[clientFor]
}

// clientFor is grpcx's interceptors for one retrier.
type clientFor struct {
	r      *retry.Retrier
	unary  grpc.UnaryClientInterceptor
	stream grpc.StreamClientInterceptor
}

// NoClientError is the error of a call whose dependency the current
// version of the file has no client block for: FAILED_PRECONDITION for
// status.Code, and the error of policyfile.File.Client for errors.Is and
// errors.As.
type NoClientError struct{ Err error }

func (e *NoClientError) Error() string { return "grpcpolicy: call not sent: " + e.Err.Error() }

// Unwrap returns policyfile.File.Client's error.
func (e *NoClientError) Unwrap() error { return e.Err }

// GRPCStatus returns FAILED_PRECONDITION with the error's message.
func (e *NoClientError) GRPCStatus() *status.Status {
	return status.New(codes.FailedPrecondition, e.Error())
}

// of returns the interceptors of the current version's retrier of dep.
func (c *liveClient) of() (*clientFor, error) {
	r, err := c.l.Current().Retrier(c.dep)
	if err != nil {
		return nil, &NoClientError{Err: err}
	}
	f := c.cache.Load()
	if f == nil || f.r != r {
		f = &clientFor{r: r, unary: grpcx.UnaryClientInterceptor(r, c.opts...), stream: grpcx.StreamClientInterceptor(r, c.opts...)}
		c.cache.Store(f)
	}
	return f, nil
}

func (c *liveClient) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	f, err := c.of()
	if err != nil {
		return err
	}
	return f.unary(ctx, method, req, reply, cc, invoker, opts...)
}

func (c *liveClient) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	f, err := c.of()
	if err != nil {
		return nil, err
	}
	return f.stream(ctx, desc, cc, method, streamer, opts...)
}

// ServerOptions returns the options that install both server interceptors,
// to pass to grpc.NewServer, as grpcx.Server.ServerOptions does.
func (g *Live) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

// UnaryServerInterceptor returns the interceptor that puts each unary call
// through the gRPC server of the version current when it arrives.
func (g *Live) UnaryServerInterceptor() grpc.UnaryServerInterceptor { return g.unary }

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func (g *Live) StreamServerInterceptor() grpc.StreamServerInterceptor { return g.stream }

func (g *Live) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	s := g.server(g.l.Current())
	if s.err != nil {
		return nil, status.Error(codes.Internal, s.err.Error())
	}
	return s.unary(ctx, req, info, handler)
}

func (g *Live) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := g.server(g.l.Current())
	if s.err != nil {
		return status.Error(codes.Internal, s.err.Error())
	}
	return s.stream(srv, ss, info, handler)
}

// Server returns the gRPC server of version v's server block (building it
// if no call has needed it yet), or the error of grpcx.NewServer for it.
func (g *Live) Server(v *policyfile.Version) (*grpcx.Server, error) {
	s := g.server(v)
	return s.s, s.err
}

// server returns the server of v's server block. policyfile.Live keeps a
// version's HTTP server when its server block did not change, so that
// server names the block: one gRPC server is built per HTTP server, the
// first time a call of one of its versions arrives, and a call that read
// an older version just before a reload still finds that version's.
func (g *Live) server(v *policyfile.Version) *serverFor {
	key := v.Server()
	if c := g.current.Load(); c != nil && c.key == key {
		return c
	}
	g.mu.Lock()
	s, ok := g.servers[key]
	if !ok {
		s = g.build(v)
		g.servers[key] = s
	}
	g.mu.Unlock()
	g.current.Store(s)
	return s
}

// build builds the server of v's server block. g.mu is held.
func (g *Live) build(v *policyfile.Version) *serverFor {
	f := &serverFor{key: v.Server()}
	cfg, err := ServerConfig(v.File)
	if err == nil {
		if g.cfg != nil {
			g.cfg(&cfg)
		}
		f.s, err = grpcx.NewServer(cfg)
	}
	if err != nil {
		f.err = fmt.Errorf("grpcpolicy: %s: server: %w", v.File.Name, err)
		return f
	}
	f.unary, f.stream = f.s.UnaryServerInterceptor(), f.s.StreamServerInterceptor()
	g.built = append(g.built, f.s)
	return f
}

// ServerStats adds up the counters of every gRPC server the versions
// built, so that a reload that builds a new server does not reset them
// (register it with metrics.RegisterServer or otelx.RegisterServer); gauges
// are summed too (calls still running in an old server are in flight), but
// for Limit, the current version's server's.
func (g *Live) ServerStats() admit.Stats {
	cur, err := g.Server(g.l.Current())
	g.mu.Lock()
	built := slices.Clone(g.built)
	g.mu.Unlock()
	sum := policyfile.SumServerStats(built)
	sum.Limit = 0
	if err == nil {
		sum.Limit = cur.Stats().Limit
	}
	return sum
}
