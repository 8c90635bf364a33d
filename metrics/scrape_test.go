package metrics_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

// classed is an error that states its retry class.
type classed retry.Class

func (c classed) Error() string           { return retry.Class(c).String() }
func (c classed) RetryClass() retry.Class { return retry.Class(c) }

// script returns a function that fails with the given classes, one per
// call, then succeeds.
func script(cls ...retry.Class) func(context.Context) error {
	n := 0
	return func(context.Context) error {
		if n < len(cls) {
			n++
			return classed(cls[n-1])
		}
		return nil
	}
}

// scrape fetches url and returns its samples, "name{labels}" → value as
// written, and the metric names that have a TYPE line.
func scrape(t *testing.T, client *http.Client, url string) (samples map[string]string, families map[string]string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	samples, families = map[string]string{}, map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			families[name] = typ
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		samples[line[:i]] = line[i+1:]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples, families
}

// TestScrape drives a retrier, an HTTP server and a gRPC server, then
// scrapes a real /metrics endpoint and checks every series of the schema.
func TestScrape(t *testing.T) {
	leakcheck.Check(t)
	reg := prometheus.NewRegistry()

	// The client side: a retrier with a token bucket (capacity 100, a
	// retry costs 10, a first-try success earns 1, a retry that succeeds
	// is refunded).
	backend := metrics.Labels{Target: "backend"}
	r := retry.MustNew(retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Constant, Base: time.Microsecond},
		Budget:      budget.Spec{Kind: budget.KindTokenBucket, Capacity: 100, RetryCost: 10, SuccessReward: 1},
	}, retry.WithHooks(metrics.RetryHooks(reg, backend)))
	if err := metrics.RegisterBudget(reg, backend, r.Budget()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := []struct {
		fn     func(context.Context) error
		wantOK bool
	}{
		{script(retry.Transient, retry.Transient), true},                   // 3 attempts, 2 retries: level 100 → 80 → 90 (refund)
		{script(retry.NeverRetry), false},                                  // 1 attempt, not retryable
		{script(retry.Transient, retry.Transient, retry.Transient), false}, // 3 attempts, 2 retries: → 70, attempts exhausted
		{script(), true}, // 1 attempt: → 71
	}
	for i, c := range calls {
		if err := retry.Do(ctx, r, c.fn); (err == nil) != c.wantOK {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	// The HTTP server side: one request of each fate.
	dials := new(killswitch.Dials)
	hs, err := httpx.NewServer(httpx.ServerConfig{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 1}, Dials: dials})
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterServer(reg, metrics.Labels{Target: "web"}, hs.Stats); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(hs.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})))
	defer web.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(path string, header ...string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, web.URL+path, nil)
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("/")
	get("/", "Stormguard-Attempt", "2")
	get("/", "Stormguard-Timeout", "0n")
	get("/fail")
	dials.SetShedFraction(1)
	get("/")
	dials.SetShedFraction(0)

	// The gRPC server side, with the queue-wait histogram.
	rpc := metrics.Labels{Target: "rpc"}
	gs, err := grpcx.NewServer(grpcx.ServerConfig{OnQueueWait: metrics.QueueWait(reg, rpc)})
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterServer(reg, rpc, gs.Stats); err != nil {
		t.Fatal(err)
	}
	stop := serveHealth(t, gs)
	defer stop.close()
	for range 2 {
		if _, err := stop.client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}

	// Scrape.
	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer ms.Close()
	samples, families := scrape(t, client, ms.URL+"/metrics")

	want := map[string]string{
		// client: 8 attempts (2 success, 5 transient, 1 never-retry), 4 retries
		`stormguard_attempts_total{outcome="success",side="client",target="backend"}`:            "2",
		`stormguard_attempts_total{outcome="transient",side="client",target="backend"}`:          "5",
		`stormguard_attempts_total{outcome="never-retry",side="client",target="backend"}`:        "1",
		`stormguard_attempts_total{outcome="throttling",side="client",target="backend"}`:         "0",
		`stormguard_attempts_total{outcome="timeout",side="client",target="backend"}`:            "0",
		`stormguard_attempts_total{outcome="canceled",side="client",target="backend"}`:           "0",
		`stormguard_attempts_total{outcome="service-overloaded",side="client",target="backend"}`: "0",
		`stormguard_attempts_total{outcome="retries-exhausted",side="client",target="backend"}`:  "0",
		`stormguard_retries_total{side="client",target="backend"}`:                               "4",
		`stormguard_goodput_total{side="client",target="backend"}`:                               "2",
		`stormguard_throughput_total{side="client",target="backend"}`:                            "8",
		`stormguard_giveups_total{reason="not-retryable",side="client",target="backend"}`:        "1",
		`stormguard_giveups_total{reason="attempts-exhausted",side="client",target="backend"}`:   "1",
		`stormguard_giveups_total{reason="budget-exhausted",side="client",target="backend"}`:     "0",
		`stormguard_giveups_total{reason="other",side="client",target="backend"}`:                "0",
		`stormguard_budget_level{side="client",target="backend"}`:                                "71",
		`stormguard_budget_capacity{side="client",target="backend"}`:                             "100",

		// HTTP server: 5 requests: 2 goodput (one a retry), 1 failed, 1 expired, 1 shed
		`stormguard_offered_total{side="server",target="web"}`:                     "5",
		`stormguard_retries_total{side="server",target="web"}`:                     "1",
		`stormguard_goodput_total{side="server",target="web"}`:                     "2",
		`stormguard_throughput_total{side="server",target="web"}`:                  "3",
		`stormguard_wasted_total{side="server",target="web"}`:                      "0",
		`stormguard_expired_dropped_total{side="server",target="web"}`:             "1",
		`stormguard_attempts_total{outcome="goodput",side="server",target="web"}`:  "2",
		`stormguard_attempts_total{outcome="failed",side="server",target="web"}`:   "1",
		`stormguard_attempts_total{outcome="wasted",side="server",target="web"}`:   "0",
		`stormguard_attempts_total{outcome="shed",side="server",target="web"}`:     "1",
		`stormguard_attempts_total{outcome="expired",side="server",target="web"}`:  "1",
		`stormguard_attempts_total{outcome="canceled",side="server",target="web"}`: "0",
		`stormguard_shed_total{reason="kill-switch",side="server",target="web"}`:   "1",
		`stormguard_shed_total{reason="queue-full",side="server",target="web"}`:    "0",
		`stormguard_shed_total{reason="evicted",side="server",target="web"}`:       "0",
		`stormguard_shed_total{reason="queue-timeout",side="server",target="web"}`: "0",
		`stormguard_shed_total{reason="throttled",side="server",target="web"}`:     "0",
		`stormguard_concurrency_limit{side="server",target="web"}`:                 "1",
		`stormguard_in_flight{side="server",target="web"}`:                         "0",
		`stormguard_queued{side="server",target="web"}`:                            "0",

		// gRPC server: 2 calls, both admitted at once
		`stormguard_offered_total{side="server",target="rpc"}`:                         "2",
		`stormguard_goodput_total{side="server",target="rpc"}`:                         "2",
		`stormguard_attempts_total{outcome="goodput",side="server",target="rpc"}`:      "2",
		`stormguard_queue_wait_seconds_count{side="server",target="rpc"}`:              "2",
		`stormguard_queue_wait_seconds_sum{side="server",target="rpc"}`:                "0",
		`stormguard_queue_wait_seconds_bucket{side="server",target="rpc",le="0.0005"}`: "2",
	}
	for k, w := range want {
		if got, ok := samples[k]; !ok {
			t.Errorf("%s: missing", k)
		} else if got != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	for name, typ := range map[string]string{
		"stormguard_attempts_total": "counter", "stormguard_retries_total": "counter",
		"stormguard_goodput_total": "counter", "stormguard_throughput_total": "counter",
		"stormguard_giveups_total": "counter", "stormguard_budget_level": "gauge",
		"stormguard_budget_capacity": "gauge", "stormguard_offered_total": "counter",
		"stormguard_wasted_total": "counter", "stormguard_shed_total": "counter",
		"stormguard_expired_dropped_total": "counter", "stormguard_concurrency_limit": "gauge",
		"stormguard_in_flight": "gauge", "stormguard_queued": "gauge",
		"stormguard_queue_wait_seconds": "histogram",
	} {
		if got := families[name]; got != typ {
			t.Errorf("# TYPE %s = %q, want %q", name, got, typ)
		}
	}
	for name := range families {
		if strings.HasPrefix(name, "stormguard_") && !documented[name] {
			t.Errorf("%s is exported but not in the schema of doc.go", name)
		}
	}
}

// documented lists the names of the schema table in doc.go.
var documented = map[string]bool{
	"stormguard_attempts_total": true, "stormguard_retries_total": true, "stormguard_goodput_total": true,
	"stormguard_throughput_total": true, "stormguard_giveups_total": true, "stormguard_budget_level": true,
	"stormguard_budget_capacity": true, "stormguard_offered_total": true, "stormguard_wasted_total": true,
	"stormguard_shed_total": true, "stormguard_expired_dropped_total": true, "stormguard_concurrency_limit": true,
	"stormguard_in_flight": true, "stormguard_queued": true, "stormguard_queue_wait_seconds": true,
}

// health is a gRPC server behind gs on 127.0.0.1 and a client of it.
type health struct {
	client healthpb.HealthClient
	close  func()
}

type serving struct {
	healthpb.UnimplementedHealthServer
}

func (serving) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func serveHealth(t *testing.T, gs *grpcx.Server) health {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(gs.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, serving{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return health{healthpb.NewHealthClient(conn), func() {
		conn.Close()
		srv.Stop()
		<-done
	}}
}
