package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

// Wiring a client and a server to Prometheus: the retrier's hooks, its
// budget's level and the server's counters, on one /metrics endpoint.
func Example() {
	reg := prometheus.NewRegistry()

	// The client side: count the retrier's attempts and log its retries and
	// give-ups (a give-up that says nothing about the dependency, such as
	// this one, at Debug).
	payments := metrics.Labels{Target: "payments"}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) }}))
	p, _ := retry.Preset("stormguard")
	r := retry.MustNew(p, retry.WithHooks(retry.JoinHooks(
		metrics.RetryHooks(reg, payments),
		metrics.LogHooks(log),
	)))
	if err := metrics.RegisterBudget(reg, payments, r.Budget()); err != nil {
		panic(err)
	}
	_ = retry.Do(context.Background(), r, func(context.Context) error { return nil })
	_ = retry.Do(context.Background(), r, func(context.Context) error { return errors.New("invalid card") })

	// The server side: export the server's counters on every scrape.
	sg, err := httpx.NewServer(httpx.ServerConfig{})
	if err != nil {
		panic(err)
	}
	if err := metrics.RegisterServer(reg, metrics.Labels{Target: "shop"}, sg.Stats); err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(sg.Wrap(mux)) // in production: http.ListenAndServe(addr, mux)
	defer srv.Close()

	// What a scrape shows (some of it): the scrape itself is the request
	// the server has seen arrive, still in progress as it is counted.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, prefix := range []string{
			`stormguard_client_request_duration_seconds_count{outcome="success"`,
			`stormguard_client_request_duration_seconds_count{outcome="gave-up",reason="not-retryable"`,
			"stormguard_client_retry_budget_tokens",
			`stormguard_server_offered_total{target="shop",try="first"}`,
			`stormguard_server_requests_total{outcome="goodput"`,
		} {
			if strings.HasPrefix(line, prefix) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// level=DEBUG msg="stormguard: gave up" reason="error is not retryable" attempts=1 error="invalid card"
	// stormguard_client_request_duration_seconds_count{outcome="gave-up",reason="not-retryable",target="payments"} 1
	// stormguard_client_request_duration_seconds_count{outcome="success",reason="",target="payments"} 1
	// stormguard_client_retry_budget_tokens{target="payments"} 100
	// stormguard_server_offered_total{target="shop",try="first"} 1
	// stormguard_server_requests_total{outcome="goodput",reason="",target="shop"} 0
}
