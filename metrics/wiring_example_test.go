package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

// Wiring a service to Prometheus: the client of its dependency "orders"
// and its own server "shop", on one /metrics endpoint.
func Example_wiring() {
	// The snippet of README.md and docs/metrics.md, from here…
	reg := prometheus.NewRegistry()
	p, _ := retry.Preset("stormguard")
	r := retry.MustNew(p, retry.WithHooks(metrics.RetryHooks(reg, metrics.Labels{Target: "orders"})))
	sg, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{OnQueueWait: metrics.QueueWait(reg, metrics.Labels{Target: "shop"})}})
	if err != nil {
		log.Fatal(err)
	}
	err = errors.Join(
		metrics.RegisterBudget(reg, metrics.Labels{Target: "orders"}, r.Budget()),
		metrics.RegisterServer(reg, metrics.Labels{Target: "shop"}, sg.Stats),
	)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// …to here.
	mux.HandleFunc("/orders", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(sg.Wrap(mux)) // in production: http.ListenAndServe(addr, sg.Wrap(mux))
	defer srv.Close()

	// One request through the client, then a scrape.
	client := httpx.Client(nil, r)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/orders", nil)
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `stormguard_client_attempts_total{class="success",target="orders",try="first"}`) ||
			strings.HasPrefix(line, `stormguard_server_requests_total{outcome="goodput"`) {
			fmt.Println(line)
		}
	}
	// Output:
	// stormguard_client_attempts_total{class="success",target="orders",try="first"} 1
	// stormguard_server_requests_total{outcome="goodput",reason="",target="shop"} 1
}
