package bench

import (
	"context"
	"net"
	"testing"
	"time"

	mwretry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/retry"
)

// The gRPC client retry interceptors, stormguard's grpcx.UnaryClientInterceptor
// against go-grpc-middleware v2's interceptors/retry, called directly with an
// invoker that answers at once (no connection: the figures are the
// interceptors' own cost). Both make the same attempts and classify alike:
//
//   - success: the first attempt succeeds. stormguard is its "stormguard"
//     preset (3 attempts, token-bucket budget); the middleware WithMax(3)
//     and its default codes (UNAVAILABLE, RESOURCE_EXHAUSTED).
//   - failing: every attempt fails with UNAVAILABLE, which both retry;
//     3 attempts per call, no wait between them (stormguard's preset
//     without backoff and with budget kind none; the middleware's
//     WithMax(3) and a zero backoff).
//
// Each runs with a caller context that has no outgoing metadata (""), with
// one that carries one key ("md/": an authorization header, say, appended
// with metadata.AppendToOutgoingContext; "map/": the same key in a map,
// metadata.NewOutgoingContext), since stamping the attempt number must
// merge with the caller's metadata, and with a deadline ("dl/"). Both
// libraries get the same caller contexts.
// Both stamp retries only: stormguard stormguard-attempt and
// grpc-previous-rpc-attempts (a first try carries none: absent means 1 at
// a stormguard server), the middleware x-retry-attempt. stormguard also
// captures each attempt's header and trailer for the server's signals and
// rewards its retry budget on success; the middleware reads no signals and
// has no budget.

var errUnavailable = status.Error(codes.Unavailable, "unavailable")

type grpcLib struct {
	name string
	icpt func(failing bool) grpc.UnaryClientInterceptor
}

var grpcLibs = []grpcLib{
	{"stormguard", func(failing bool) grpc.UnaryClientInterceptor {
		p := stormguardPolicy(failing)
		if failing {
			p.Budget = budget.Spec{Kind: budget.KindNone}
		}
		return grpcx.UnaryClientInterceptor(retry.MustNew(p))
	}},
	{"middleware", func(failing bool) grpc.UnaryClientInterceptor {
		opts := []mwretry.CallOption{mwretry.WithMax(3)}
		if failing {
			opts = append(opts, mwretry.WithBackoff(func(context.Context, uint) time.Duration { return 0 }))
		}
		return mwretry.UnaryClientInterceptor(opts...)
	}},
}

// grpcCallers are the caller contexts: without outgoing metadata, with
// one key of it (appended, or in a map), and with a deadline (an hour away: every stormguard
// attempt is then timed, and its success teaches the learned attempt
// time), cancelled when tb ends.
func grpcCallers(tb testing.TB) []struct {
	name string
	ctx  context.Context
} {
	dl, cancel := context.WithTimeout(context.Background(), time.Hour)
	tb.Cleanup(cancel)
	return []struct {
		name string
		ctx  context.Context
	}{
		{"", context.Background()},
		{"md/", metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer x")},
		{"map/", metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", "Bearer x"))},
		{"dl/", dl},
	}
}

func benchGRPCClient(b *testing.B, failing bool) {
	attempts := 0
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		attempts++
		if failing {
			return errUnavailable
		}
		return nil
	}
	for _, caller := range grpcCallers(b) {
		for _, l := range grpcLibs {
			b.Run(caller.name+l.name, func(b *testing.B) {
				icpt, ctx := l.icpt(failing), caller.ctx
				call := func() error { return icpt(ctx, "/svc/Method", nil, nil, nil, invoker) }
				timeCalls(b, call, failing, &attempts)
			})
		}
	}
}

// BenchmarkGRPCClientSuccess: the first attempt succeeds.
func BenchmarkGRPCClientSuccess(b *testing.B) { benchGRPCClient(b, false) }

// BenchmarkGRPCClientFailing: every attempt fails with UNAVAILABLE; 3
// attempts per call.
func BenchmarkGRPCClientFailing(b *testing.B) { benchGRPCClient(b, true) }

// TestGRPCClientsAgree checks the premise: one attempt of a call that
// succeeds, three of one that keeps failing, in both interceptors.
func TestGRPCClientsAgree(t *testing.T) {
	for _, l := range grpcLibs {
		for _, failing := range []bool{false, true} {
			calls := 0
			invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
				calls++
				if failing {
					return errUnavailable
				}
				return nil
			}
			icpt := l.icpt(failing)
			for i := range 100 {
				calls = 0
				err := icpt(context.Background(), "/svc/Method", nil, nil, nil, invoker)
				want := 1
				if failing {
					want = 3
				}
				if calls != want || (err != nil) != failing || (failing && status.Code(err) != codes.Unavailable) {
					t.Fatalf("%s, failing %v, call %d: %d attempts, err %v; want %d", l.name, failing, i, calls, err, want)
				}
			}
		}
	}
}

// The gRPC server interceptor (grpcx.Server: deadline bound, admission
// through the gate, release with the handler's outcome) against a bare
// grpc-go server, in process (the interceptor called directly around a
// handler that answers at once, against the handler alone) and over
// loopback (the standard health service on 127.0.0.1, one client making
// one call at a time, through a server with and without the interceptors).

// grpcServerMD is a call's context as grpc-go gives it to a server
// interceptor: the metadata grpc-go's client sends on a first try (a
// stormguard client adds no attempt number to it).
func grpcServerMD() context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(":authority", "127.0.0.1:50051",
		"content-type", "application/grpc", "user-agent", "grpc-go/1.85.0", "grpc-accept-encoding", "gzip"))
}

// BenchmarkGRPCServerInProcess: one unary call through the interceptor
// ("stormguard") or straight to the handler ("bare").
func BenchmarkGRPCServerInProcess(b *testing.B) {
	reply := &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}
	handler := func(context.Context, any) (any, error) { return reply, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	sg, err := grpcx.NewServer(grpcx.ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	icpt := sg.UnaryServerInterceptor()
	ctx := grpcServerMD()
	for _, v := range []struct {
		name string
		call func() (any, error)
	}{
		{"bare", func() (any, error) { return handler(ctx, nil) }},
		{"stormguard", func() (any, error) { return icpt(ctx, nil, info, handler) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			timeCalls(b, func() error { _, err := v.call(); return err }, false, nil)
		})
	}
}

// healthServer answers every Check at once.
type healthServer struct {
	healthpb.UnimplementedHealthServer
}

func (healthServer) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// startGRPC serves the health service on 127.0.0.1 with opts and returns
// a client connection to it; b's cleanup stops both.
func startGRPC(b *testing.B, opts ...grpc.ServerOption) healthpb.HealthClient {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, healthServer{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); srv.Stop(); <-done })
	return healthpb.NewHealthClient(conn)
}

// BenchmarkGRPCServer: calls over loopback to a bare grpc-go server and to
// one behind grpcx.Server's interceptors; req/s and CPU per call (client
// and server, one process).
func BenchmarkGRPCServer(b *testing.B) {
	for _, name := range []string{"bare", "stormguard"} {
		b.Run(name, func(b *testing.B) {
			var opts []grpc.ServerOption
			if name == "stormguard" {
				sg, err := grpcx.NewServer(grpcx.ServerConfig{})
				if err != nil {
					b.Fatal(err)
				}
				opts = sg.ServerOptions()
			}
			c := startGRPC(b, opts...)
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{}
			if _, err := c.Check(ctx, req); err != nil { // connect
				b.Fatal(err)
			}
			b.ReportAllocs()
			calls := 0
			cpu := startCPU()
			for b.Loop() {
				if _, err := c.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
				calls++
			}
			cpu.report(b, calls, 0)
			b.ReportMetric(float64(calls)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
