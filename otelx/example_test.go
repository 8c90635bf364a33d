package otelx_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/otelx"
	"github.com/stormguard/stormguard/retry"
)

// Wiring a service to OpenTelemetry: the client of its dependency "orders"
// and its own server "shop". mp is your meter provider (nil: the global
// one, otel.GetMeterProvider()); here an SDK provider with an in-memory
// reader stands in for an exporter.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	// The snippet of README.md and docs/metrics.md, from here…
	hooks, err := otelx.RetryHooks(mp, "orders")
	if err != nil {
		log.Fatal(err)
	}
	p, _ := retry.Preset("stormguard")
	r := retry.MustNew(p, retry.WithHooks(hooks))
	wait, err := otelx.QueueWait(mp, "shop")
	if err != nil {
		log.Fatal(err)
	}
	sg, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{OnQueueWait: wait, OnRefuse: otelx.ServerEvents("shop")}})
	if err != nil {
		log.Fatal(err)
	}
	_, err1 := otelx.RegisterBudget(mp, "orders", r.Budget())
	_, err2 := otelx.RegisterServer(mp, "shop", sg.Stats)
	if err := errors.Join(err1, err2); err != nil {
		log.Fatal(err)
	}
	// …to here.
	srv := httptest.NewServer(sg.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()

	// One request through the client, then a collection.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/orders", nil)
	resp, err := httpx.Client(nil, r).Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "stormguard_client_request_duration_seconds" {
			outcome, _ := h.DataPoints[0].Attributes.Value("outcome")
			fmt.Printf("%s (%s): %d request, outcome %s\n", m.Name, m.Unit, h.DataPoints[0].Count, outcome.AsString())
		}
	}
	// Output:
	// stormguard_client_request_duration_seconds (s): 1 request, outcome success
}
