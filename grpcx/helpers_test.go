package grpcx_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/retry"
)

// The tests talk to a real grpc-go server on 127.0.0.1 that serves the
// standard health service (grpc_health_v1), which ships with grpc-go
// already generated: Check is a unary call, Watch a server-streaming one.
// No mocks, no protoc.

// step is one scripted answer of a backend: the n-th call gets the n-th
// step, and the last step repeats.
type step struct {
	code    codes.Code        // the status; codes.OK answers SERVING
	trailer map[string]string // trailer metadata to set
	msgs    int               // Watch: messages to send before the status
	// fn, when set, answers instead (Check: fn's error; Watch: the same,
	// after msgs messages).
	fn func(ctx context.Context) error
}

// call is what a backend saw of one call.
type call struct {
	attempt  string // stormguard-attempt
	previous string // grpc-previous-rpc-attempts
	timeout  string // grpc-timeout is not visible to handlers; this is stormguard-timeout
	left     time.Duration
	hasDL    bool
	at       time.Time
	ctxTry   int // deadline.Attempt of the handler's context
}

// backend is a health server with a script.
type backend struct {
	healthpb.UnimplementedHealthServer
	addr  string
	mu    sync.Mutex
	steps []step
	calls []call
}

// newBackend starts a backend on 127.0.0.1 with the given server options;
// the test's cleanup stops it.
func newBackend(t *testing.T, opts []grpc.ServerOption, steps ...step) *backend {
	t.Helper()
	if len(steps) == 0 {
		steps = []step{{}}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: lis.Addr().String(), steps: steps}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return b
}

// record notes a call and returns its step.
func (b *backend) record(ctx context.Context) step {
	md, _ := metadata.FromIncomingContext(ctx)
	c := call{at: time.Now(), ctxTry: deadline.Attempt(ctx)}
	if v := md.Get("stormguard-attempt"); len(v) > 0 {
		c.attempt = v[0]
	}
	if v := md.Get("grpc-previous-rpc-attempts"); len(v) > 0 {
		c.previous = v[0]
	}
	if v := md.Get("stormguard-timeout"); len(v) > 0 {
		c.timeout = v[0]
	}
	if dl, ok := ctx.Deadline(); ok {
		c.left, c.hasDL = time.Until(dl), true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, c)
	return b.steps[min(len(b.calls), len(b.steps))-1]
}

// seen returns a copy of the calls so far.
func (b *backend) seen() []call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]call(nil), b.calls...)
}

// attempts returns the stormguard-attempt and grpc-previous-rpc-attempts
// values seen, as "attempt/previous".
func (b *backend) attempts() []string {
	var a []string
	for _, c := range b.seen() {
		a = append(a, c.attempt+"/"+c.previous)
	}
	return a
}

func (s step) answer(ctx context.Context, setTrailer func(metadata.MD)) error {
	if len(s.trailer) > 0 {
		setTrailer(metadata.New(s.trailer))
	}
	if s.fn != nil {
		return s.fn(ctx)
	}
	if s.code != codes.OK {
		return status.Error(s.code, "scripted "+s.code.String())
	}
	return nil
}

func (b *backend) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s := b.record(ctx)
	if err := s.answer(ctx, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (b *backend) Watch(req *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	s := b.record(ss.Context())
	for range s.msgs {
		if err := ss.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
	}
	return s.answer(ss.Context(), ss.SetTrailer)
}

// dial connects to addr with the given options (plaintext, grpc-go's
// retries off); the test's cleanup closes the connection.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry()}, opts...)
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// fast returns a retrier with a constant 1 ms backoff and no budget,
// with the policy changed by edit.
func fast(t *testing.T, edit func(p *retry.Policy), opts ...retry.Option) *retry.Retrier {
	t.Helper()
	p := retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond},
	}
	if edit != nil {
		edit(&p)
	}
	r, err := retry.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// check calls Check with a 5 s timeout (scaled by the host's slowness)
// unless ctx has a deadline.
func check(ctx context.Context, c healthpb.HealthClient, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, hostspeed.Scale(5*time.Second))
		defer cancel()
	}
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
	return err
}

// waitCanceled is a backend step that answers only when its call is
// cancelled, and counts the cancellations in canceled: a slow attempt
// that a hedge must beat.
func waitCanceled(canceled *atomic.Int32) step {
	return step{fn: func(ctx context.Context) error {
		<-ctx.Done()
		canceled.Add(1)
		return ctx.Err()
	}}
}
