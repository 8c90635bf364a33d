package grpcx_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
)

// flaky is a health service that is overloaded for its first call.
type flaky struct {
	healthpb.UnimplementedHealthServer
	n atomic.Int32
}

func (f *flaky) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	fmt.Printf("server: stormguard-attempt %q\n", md.Get("stormguard-attempt")) // none on a first try
	if f.n.Add(1) == 1 {
		grpc.SetTrailer(ctx, metadata.Pairs("stormguard-overload", "instance", "grpc-retry-pushback-ms", "20"))
		return nil, status.Error(codes.Unavailable, "busy")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serve starts srv on 127.0.0.1 and returns its address and a function
// that stops it.
func serve(srv *grpc.Server) (string, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	return lis.Addr().String(), func() { srv.Stop(); <-done }
}

// A client that retries an overloaded server, honouring its pushback.
func ExampleUnaryClientInterceptor() {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, new(flaky))
	addr, stop := serve(srv)
	defer stop()

	// In production, start from retry.Preset("stormguard"). This policy
	// waits 10 ms between attempts and lets a pushback stretch that by at
	// most 50 ms.
	r := retry.MustNew(retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Millisecond},
		Pushback:    retry.Pushback{MaxExtra: 50 * time.Millisecond},
	})
	// DialOptions installs the unary and stream interceptors and turns
	// grpc-go's own retries off.
	opts := append(grpcx.DialOptions(r), grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(status.Code(err), err) // a *retry.GiveUpError says why retrying stopped
		return
	}
	fmt.Println("client:", resp.Status)
	// Output:
	// server: stormguard-attempt []
	// server: stormguard-attempt ["2"]
	// client: SERVING
}

// hello is a health service that reports what stormguard told it.
type hello struct {
	healthpb.UnimplementedHealthServer
}

func (hello) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	left, _ := deadline.Remaining(ctx, time.Now())
	fmt.Printf("handler: attempt %d, criticality %v, at most %v left\n", deadline.Attempt(ctx), deadline.Criticality(ctx), left.Round(time.Second))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// A server behind stormguard: deadlines bounded to 5 s, an adaptive
// concurrency limit, a queue that serves first tries before retries and
// turns LIFO under overload. The handler reads its call's signals from the
// context.
func ExampleServer() {
	sg, err := grpcx.NewServer(grpcx.ServerConfig{
		Config: admit.Config{
			MaxTimeout: 5 * time.Second,
			Limit:      limit.Spec{Kind: limit.KindGradient2},
			Queue:      shed.Config{Capacity: 100, Order: shed.AdaptiveLIFO},
		},
	})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(sg.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, hello{})
	addr, stop := serve(srv)
	defer stop()

	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	// A retry of sheddable work, as an upstream stormguard client sends it.
	ctx := metadata.AppendToOutgoingContext(context.Background(), "stormguard-attempt", "2", "stormguard-criticality", "sheddable")
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		panic(err)
	}
	st := sg.Stats()
	fmt.Printf("stats: arrived %d, retries %d, goodput %d\n", st.Arrived, st.Retries, st.Goodput)
	// Output:
	// handler: attempt 2, criticality sheddable, at most 5s left
	// stats: arrived 1, retries 1, goodput 1
}

// sometimes is a health service whose first Watch fails before sending
// anything.
type sometimes struct {
	healthpb.UnimplementedHealthServer
	n atomic.Int32
}

func (s *sometimes) Watch(_ *healthpb.HealthCheckRequest, ss grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	fmt.Printf("server: stormguard-attempt %q\n", md.Get("stormguard-attempt")) // none on a first try
	if s.n.Add(1) == 1 {
		return status.Error(codes.Unavailable, "restarting")
	}
	for _, st := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING} {
		if err := ss.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
			return err
		}
	}
	return nil
}

// A server-streaming call is retried, unseen by the caller, until its
// first message arrives.
func ExampleStreamClientInterceptor() {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, new(sometimes))
	addr, stop := serve(srv)
	defer stop()

	r := retry.MustNew(retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Millisecond}})
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithStreamInterceptor(grpcx.StreamClientInterceptor(r)))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		panic(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			fmt.Println("client: end:", err) // io.EOF: a clean end
			break
		}
		fmt.Println("client:", resp.Status)
	}
	// Output:
	// server: stormguard-attempt []
	// server: stormguard-attempt ["2"]
	// client: NOT_SERVING
	// client: SERVING
	// client: end: EOF
}

// Wiring a gRPC client and server to Prometheus with package metrics.
func Example_metrics() {
	reg := prometheus.NewRegistry()

	// The server: its counters on every scrape, and how long calls queue.
	shop := metrics.Labels{Target: "shop"}
	sg, err := grpcx.NewServer(grpcx.ServerConfig{Config: admit.Config{OnQueueWait: metrics.QueueWait(reg, shop)}})
	if err != nil {
		panic(err)
	}
	if err := metrics.RegisterServer(reg, shop, sg.Stats); err != nil {
		panic(err)
	}
	srv := grpc.NewServer(sg.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, hello{})
	addr, stop := serve(srv)
	defer stop()

	// The client: the retrier's attempts, retries and give-ups.
	r := retry.MustNew(retry.Policy{}, retry.WithHooks(metrics.RetryHooks(reg, shop)))
	conn, err := grpc.NewClient("passthrough:///"+addr, append(grpcx.DialOptions(r), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		panic(err)
	}

	// Serve reg with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}); here,
	// read it directly.
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetValue())
			}
			switch mf.GetName() {
			case "stormguard_client_request_duration_seconds":
				if n := m.GetHistogram().GetSampleCount(); n > 0 {
					fmt.Printf("%s %v: %v\n", mf.GetName(), labels, n)
				}
			case "stormguard_server_requests_total":
				if v := m.GetCounter().GetValue(); v > 0 {
					fmt.Printf("%s %v: %v\n", mf.GetName(), labels, v)
				}
			}
		}
	}
	// Output:
	// handler: attempt 1, criticality critical, at most 30s left
	// stormguard_client_request_duration_seconds [success  shop]: 1
	// stormguard_server_requests_total [goodput  shop]: 1
}
