package otelx_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/internal/outcomes"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/otelx"
)

// Requests collapsed by supersession are counted under outcome superseded,
// by reason, on the same instrument as every other outcome (the schema's
// name and unit, as the Prometheus exporter uses).
func TestServerSuperseded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	st := admit.Stats{Arrived: 8, Goodput: 1, Superseded: 4, Joined: 3}
	if _, err := otelx.RegisterServer(mp, "bank", func() admit.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	for _, c := range []struct {
		reason string
		want   float64
	}{{schema.ReasonReplaced, 4}, {schema.ReasonJoined, 3}} {
		k := outcomes.Key(schema.ServerRequests.Name, "target", "bank", "outcome", schema.OutcomeSuperseded, "reason", c.reason)
		if v, ok := got[k]; !ok || v != c.want {
			t.Errorf("%s = %v (exported: %v); want %v", k, v, ok, c.want)
		}
	}
}
