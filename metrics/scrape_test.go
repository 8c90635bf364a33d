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

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/metrics/schema"
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
// written, the metric names that have a TYPE line with their type, and
// their help.
func scrape(t *testing.T, client *http.Client, url string) (samples, families, help map[string]string) {
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
	samples, families, help = map[string]string{}, map[string]string{}, map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			families[name] = typ
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, text, _ := strings.Cut(rest, " ")
			help[name] = text
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
	return samples, families, help
}

// TestScrape drives a retrier, an HTTP server and a gRPC server, then
// scrapes a real /metrics endpoint: every family of the schema is exported
// with the schema's type and help, every stormguard_ family exported is in
// the schema, and the gRPC server reports in the same series as the HTTP
// one.
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

	// An HTTP server that serves one request.
	dials := new(killswitch.Dials)
	hs, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 1}, Dials: dials}})
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterServer(reg, metrics.Labels{Target: "web"}, hs.Stats); err != nil {
		t.Fatal(err)
	}
	// Its dials, exported.
	if err := metrics.RegisterDials(reg, metrics.Labels{Target: "web"}, dials); err != nil {
		t.Fatal(err)
	}
	// Its policy file: version 0123456789ab, two reloads applied, one refused.
	if err := metrics.RegisterPolicy(reg, metrics.Labels{Target: "web"}, func() schema.PolicyState {
		return schema.PolicyState{Version: "0123456789ab", Applied: 2, Refused: 1}
	}); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(hs.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer web.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Its dials, set once its request was served (a quarter shed would
	// refuse it one time in four): retries off, a quarter shed, set for the
	// fleet.
	dials.SetRetriesDisabled(true)
	_ = dials.SetShedFraction(0.25)
	dials.NoteChange(killswitch.Change{At: time.Unix(1_800_000_000, 0), Origin: killswitch.OriginFleet, By: "fleet default"})

	// The gRPC server side, with the queue-wait histogram.
	rpc := metrics.Labels{Target: "rpc"}
	gs, err := grpcx.NewServer(grpcx.ServerConfig{Config: admit.Config{OnQueueWait: metrics.QueueWait(reg, rpc)}})
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
	samples, families, help := scrape(t, client, ms.URL+"/metrics")

	want := map[string]string{
		// client: 8 attempts (first tries: 1 transient, 1 never-retry, 2
		// success, …; retries: 4 transient), 4 requests
		`stormguard_client_attempts_total{class="success",target="backend",try="first"}`:                                   "1",
		`stormguard_client_attempts_total{class="success",target="backend",try="retry"}`:                                   "1",
		`stormguard_client_attempts_total{class="transient",target="backend",try="first"}`:                                 "2",
		`stormguard_client_attempts_total{class="transient",target="backend",try="retry"}`:                                 "3",
		`stormguard_client_attempts_total{class="never-retry",target="backend",try="first"}`:                               "1",
		`stormguard_client_attempts_total{class="throttling",target="backend",try="retry"}`:                                "0",
		`stormguard_client_request_duration_seconds_count{outcome="success",reason="",target="backend"}`:                   "2",
		`stormguard_client_request_duration_seconds_count{outcome="gave-up",reason="not-retryable",target="backend"}`:      "1",
		`stormguard_client_request_duration_seconds_count{outcome="gave-up",reason="attempts-exhausted",target="backend"}`: "1",
		`stormguard_client_request_duration_seconds_count{outcome="gave-up",reason="budget-exhausted",target="backend"}`:   "0",
		`stormguard_client_request_duration_seconds_count{outcome="gave-up",reason="other",target="backend"}`:              "0",
		`stormguard_client_retry_budget_tokens{target="backend"}`:                                                          "71",
		`stormguard_client_retry_budget_capacity_tokens{target="backend"}`:                                                 "100",

		// HTTP server: 1 request, goodput
		`stormguard_server_offered_total{target="web",try="first"}`:                            "1",
		`stormguard_server_offered_total{target="web",try="retry"}`:                            "0",
		`stormguard_server_requests_total{outcome="goodput",reason="",target="web"}`:           "1",
		`stormguard_server_requests_total{outcome="shed",reason="kill-switch",target="web"}`:   "0",
		`stormguard_server_requests_total{outcome="expired",reason="on-arrival",target="web"}`: "0",
		`stormguard_server_requests_total{outcome="wasted",reason="caller-left",target="web"}`: "0",
		`stormguard_server_concurrency_limit_requests{target="web"}`:                           "1",
		`stormguard_server_in_flight_requests{target="web"}`:                                   "0",
		`stormguard_server_queued_requests{target="web"}`:                                      "0",

		// the web server's dials
		`stormguard_dials_retries_off{target="web"}`:                                  "1",
		`stormguard_dials_shed_ratio{target="web"}`:                                   "0.25",
		`stormguard_dials_limit_override_requests{target="web"}`:                      "0",
		`stormguard_dials_last_change_timestamp_seconds{origin="fleet",target="web"}`: "1.8e+09",

		`stormguard_policy_version_info{target="web",version="0123456789ab"}`: "1",
		`stormguard_policy_reloads_total{result="applied",target="web"}`:      "2",
		`stormguard_policy_reloads_total{result="refused",target="web"}`:      "1",

		// gRPC server: 2 calls, both admitted at once
		`stormguard_server_offered_total{target="rpc",try="first"}`:                  "2",
		`stormguard_server_requests_total{outcome="goodput",reason="",target="rpc"}`: "2",
		`stormguard_server_queue_wait_seconds_count{target="rpc"}`:                   "2",
		`stormguard_server_queue_wait_seconds_sum{target="rpc"}`:                     "0",
		`stormguard_server_queue_wait_seconds_bucket{target="rpc",le="0.0005"}`:      "2",
	}
	for k, w := range want {
		if got, ok := samples[k]; !ok {
			t.Errorf("%s: missing", k)
		} else if got != w {
			t.Errorf("%s = %s, want %s", k, got, w)
		}
	}
	for _, m := range schema.All() {
		if m.External || m.Name == schema.ClientBudgetFallback.Name { // the fallback: fleet budgets only (TestRegisterBudgetFallback)
			continue
		}
		if got := families[m.Name]; got != m.Kind.String() {
			t.Errorf("# TYPE %s = %q, want %q", m.Name, got, m.Kind)
		}
		if got := help[m.Name]; got != m.Help {
			t.Errorf("# HELP %s = %q, want the schema's %q", m.Name, got, m.Help)
		}
	}
	for name := range families {
		if _, ok := schema.Lookup(name); strings.HasPrefix(name, "stormguard_") && !ok {
			t.Errorf("%s is exported but not in the schema", name)
		}
	}
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
