package grpcpolicy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/livetest"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/policyfile/grpcpolicy"
	"github.com/stormguard/stormguard/retry"
)

// Two versions of one file that differ in what a client call and a server
// call decide: A makes 2 attempts of at most 60 s and bounds a server
// call's deadline at 2 s; B makes 4 attempts of at most 120 s and bounds
// the deadline at 30 s (far apart, so that a loaded host cannot blur them). Each attempt's deadline, as the client sends it,
// tells the client's version; the deadline the handler runs with (below
// the attempt's) tells the server's.
const (
	versionA = "clients:\n  db:\n    max_attempts: 2\n    attempt_timeout: 60s\nserver:\n  max_timeout: 2s\n"
	versionB = "clients:\n  db:\n    max_attempts: 4\n    attempt_timeout: 120s\nserver:\n  max_timeout: 30s\n"
)

func newLive(t *testing.T, data string, opts ...grpcpolicy.LiveOption) (string, *policyfile.Live, *grpcpolicy.Live) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	livetest.WriteFile(t, path, data)
	l, err := policyfile.NewLive(path, policyfile.LiveLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	g, err := grpcpolicy.NewLive(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return path, l, g
}

// health is a health service whose Check calls the test's function.
type health struct {
	healthpb.UnimplementedHealthServer
	check func(ctx context.Context) error
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serve starts a real gRPC server on 127.0.0.1 behind g's server
// interceptors and returns a client of dependency db through g's client
// interceptors, with extra client interceptors after them (each sees every
// attempt).
func serve(t *testing.T, g *grpcpolicy.Live, check func(context.Context) error, after ...grpc.UnaryClientInterceptor) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(g.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, &health{check: check})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	opts := append(g.DialOptions("db"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	for _, i := range after {
		opts = append(opts, grpc.WithChainUnaryInterceptor(i))
	}
	cc, err := grpc.NewClient(lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		<-done
	})
	return healthpb.NewHealthClient(cc)
}

// Reloaded under load, with -race: 8 goroutines call a real gRPC server
// whose handler always answers UNAVAILABLE, both sides following one live
// file that flips between versions A and B and is reloaded every
// millisecond or so. Every client call is decided by one whole version — 2
// attempts each bounded by 60 s (A), or 4 bounded by 120 s (B), never a
// mix — and every server call by one: its deadline is bound at 2 s (A) or
// 30 s (B). Every call ends as its version says (attempts exhausted, each of its
// attempts seen by the server): none is dropped.
func TestLiveReloadUnderLoad(t *testing.T) {
	leakcheck.Check(t)
	path, l, g := newLive(t, versionA)

	type attempt struct {
		n      int
		remain time.Duration // the attempt's deadline, from now
	}
	var (
		mu      sync.Mutex
		sent    = map[string][]attempt{}       // by call, as the client sent them
		served  = map[string][]time.Duration{} // by call, the handler's deadline
		unknown atomic.Int64
	)
	callID := func(md metadata.MD) string {
		if v := md.Get("x-call"); len(v) == 1 {
			return v[0]
		}
		unknown.Add(1)
		return ""
	}
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		n := 1 // absent: a first try
		if v := md.Get("stormguard-attempt"); len(v) == 1 {
			n, _ = strconv.Atoi(v[0])
		}
		dl, _ := ctx.Deadline()
		mu.Lock()
		id := callID(md)
		sent[id] = append(sent[id], attempt{n, time.Until(dl)})
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	client := serve(t, g, func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		dl, _ := ctx.Deadline()
		mu.Lock()
		id := callID(md)
		served[id] = append(served[id], time.Until(dl))
		mu.Unlock()
		return status.Error(codes.Unavailable, "down")
	}, record)

	const workers, perWorker = 8, 150
	var failed atomic.Int64
	reloads := livetest.UnderLoad(t, l, path, []string{versionA, versionB}, workers, perWorker, func(w, i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-call", fmt.Sprintf("%d-%d", w, i))
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		var ge *retry.GiveUpError
		if !errors.As(err, &ge) || !errors.Is(ge.Reason, retry.ErrAttemptsExhausted) || status.Code(err) != codes.Unavailable {
			failed.Add(1)
			t.Errorf("call %d-%d: %v; want a give-up with attempts exhausted, UNAVAILABLE", w, i, err)
		}
	})

	mu.Lock()
	defer mu.Unlock()
	clientBy, serverBy := map[string]int{}, map[string]int{}
	attempts := 0
	for id, as := range sent {
		version := "mixed"
		numbered := true
		for k, a := range as {
			numbered = numbered && a.n == k+1
		}
		switch {
		case numbered && len(as) == 2 && livetest.All(as, func(a attempt) bool { return a.remain > 30*time.Second && a.remain <= 60*time.Second }):
			version = "A"
		case numbered && len(as) == 4 && livetest.All(as, func(a attempt) bool { return a.remain > 90*time.Second && a.remain <= 120*time.Second }):
			version = "B"
		}
		clientBy[version]++
		if version == "mixed" {
			t.Errorf("call %s: attempts %+v are neither A's (1, 2, each ≤ 60s) nor B's (1–4, each ≤ 120s)", id, as)
		}
		if got := len(served[id]); got != len(as) {
			t.Errorf("call %s: the server saw %d of its %d attempts", id, got, len(as))
		}
		for _, d := range served[id] {
			switch {
			case d > 0 && d <= 2*time.Second:
				serverBy["A"]++
			case d > 10*time.Second && d <= 30*time.Second:
				serverBy["B"]++
			default:
				serverBy["mixed"]++
				t.Errorf("call %s: the handler's deadline %v is neither A's bound (2s) nor B's (30s)", id, d)
			}
		}
		attempts += len(as)
	}
	t.Logf("%d reloads applied under load; client calls decided by A: %d, by B: %d, mixed: %d; server calls by A: %d, by B: %d, mixed: %d",
		reloads, clientBy["A"], clientBy["B"], clientBy["mixed"], serverBy["A"], serverBy["B"], serverBy["mixed"])
	if len(sent) != workers*perWorker || len(served) != len(sent) || unknown.Load() != 0 || failed.Load() != 0 {
		t.Errorf("%d calls sent, %d served, %d without their id, %d failed otherwise; want %d, %d, 0, 0",
			len(sent), len(served), unknown.Load(), failed.Load(), workers*perWorker, workers*perWorker)
	}
	if reloads < 10 || clientBy["A"] < 50 || clientBy["B"] < 50 || serverBy["A"] < 50 || serverBy["B"] < 50 {
		t.Errorf("%d reloads, client calls by A %d, by B %d, server calls by A %d, by B %d: the test did not reload under load",
			reloads, clientBy["A"], clientBy["B"], serverBy["A"], serverBy["B"])
	}
	// The servers' books: every attempt that arrived at one of the
	// versions' servers ended there, as a failure (UNAVAILABLE).
	st := g.ServerStats()
	if st.Arrived != uint64(attempts) || st.Failed != st.Arrived || st.InFlight != 0 {
		t.Errorf("server stats %+v; want %d arrived, all failed, none in flight", st, attempts)
	}
}

// A call in flight during a reload finishes on its version: a call held in
// the handler while the file changes to B keeps A's server (its deadline
// bound at 2 s) and succeeds there; a call that starts after the reload is
// decided by B (30 s). A version whose server block is the same keeps the
// server, with its counters.
func TestLiveInFlightKeepsItsVersion(t *testing.T) {
	leakcheck.Check(t)
	path, l, g := newLive(t, versionA)
	entered, release := make(chan time.Duration, 1), make(chan struct{})
	client := serve(t, g, func(ctx context.Context) error {
		dl, _ := ctx.Deadline()
		md, _ := metadata.FromIncomingContext(ctx)
		if len(md.Get("x-hold")) > 0 {
			entered <- time.Until(dl)
			<-release
			return nil
		}
		if d := time.Until(dl); d <= 10*time.Second {
			return status.Errorf(codes.FailedPrecondition, "deadline %v: not B's bound", d)
		}
		return nil
	})
	srvA, _ := g.Server(l.Current())
	held := make(chan error, 1)
	go func() {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-hold", "1")
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		held <- err
	}()
	if d := <-entered; d > 2*time.Second {
		t.Fatalf("the held call runs with a deadline %v away, want A's bound of 2s", d)
	}
	livetest.WriteFile(t, path, versionB)
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call after the reload: %v; want B's server", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the call held across the reload: %v; want it to end on A's server", err)
	}
	srvB, _ := g.Server(l.Current())
	if srvB == srvA || srvA.Stats().Goodput != 1 || srvB.Stats().Goodput != 1 {
		t.Errorf("servers A %+v, B %+v; want two servers, one call each", srvA.Stats(), srvB.Stats())
	}
	if st := g.ServerStats(); st.Arrived != 2 || st.Goodput != 2 {
		t.Errorf("ServerStats %+v; want both calls", st)
	}
	// Only the client block changes: the server stays.
	livetest.WriteFile(t, path, "clients:\n  db:\n    max_attempts: 3\nserver:\n  max_timeout: 30s\n")
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if s, _ := g.Server(l.Current()); s != srvB {
		t.Error("an unchanged server block got a new gRPC server")
	}
}

// A version without the call's dependency fails the call, unsent, with
// FAILED_PRECONDITION and the file's error; the runtime parts of
// LiveServerConfig reach the servers every version builds.
func TestLiveNoClientAndRuntimeConfig(t *testing.T) {
	leakcheck.Check(t)
	var d killswitch.Dials
	if err := d.SetShedFraction(1); err != nil { // the kill switch sheds every call
		t.Fatal(err)
	}
	var refused atomic.Int64
	path, l, g := newLive(t, "clients:\n  search: {}\n", grpcpolicy.LiveServerConfig(func(c *grpcx.ServerConfig) {
		c.Dials = &d
		c.OnRefuse = func(context.Context, int, admit.Decision) { refused.Add(1) }
	}))
	var reached atomic.Int64
	client := serve(t, g, func(context.Context) error { reached.Add(1); return nil })
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	var nc *grpcpolicy.NoClientError
	if status.Code(err) != codes.FailedPrecondition || !errors.As(err, &nc) || reached.Load() != 0 {
		t.Fatalf("a call to db, which the file has no block for: %v (reached the server: %d); want FAILED_PRECONDITION, unsent", err, reached.Load())
	}
	// A version with db: sent, and shed by its server's kill switch.
	livetest.WriteFile(t, path, "clients:\n  db: {max_attempts: 1}\nserver: {max_timeout: 1s}\n")
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable || refused.Load() != 1 || reached.Load() != 0 {
		t.Errorf("with the kill switch on: %v, %d refused, %d reached the handler; want UNAVAILABLE, 1, 0", err, refused.Load(), reached.Load())
	}
	// Streams go through the same version's interceptors.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unavailable || refused.Load() != 2 {
		t.Errorf("a stream with the kill switch on: %v, %d refused; want UNAVAILABLE, 2", err, refused.Load())
	}
	if got := g.ServerStats().Shed[admit.ShedKillSwitch]; got != 2 {
		t.Errorf("ServerStats: %d shed by the kill switch, want 2", got)
	}
}

// TestDocsQuoteExample: the gRPC snippet of docs/policy.md is ExampleLive's
// code, which go test runs.
func TestDocsQuoteExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "  ```go\n  grpcLive")
	snippet, _, ok2 := strings.Cut("  grpcLive"+after, "  ```")
	if !ok || !ok2 {
		t.Fatal("docs/policy.md has no gRPC snippet")
	}
	var want strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(snippet, "\n"), "\n") {
		want.WriteString("\t" + strings.TrimPrefix(l, "  ") + "\n")
	}
	if !strings.Contains(string(ex), want.String()) {
		t.Errorf("the gRPC snippet of docs/policy.md is not in example_test.go:\n%s", want.String())
	}
}
