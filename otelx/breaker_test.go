package otelx_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/internal/outcomes"
	"github.com/stormguard/stormguard/otelx"
	"github.com/stormguard/stormguard/retry"
)

// The breaker's series through OpenTelemetry: the same names and values
// as package metrics gives Prometheus (TestRegisterBreaker there), read
// with the SDK's in-memory reader.
func TestRegisterBreakerOTel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	zero := 0.0
	b := breaker.MustNew(breaker.Spec{Failures: 2, Delay: time.Hour, Jitter: &zero})
	reg, err := otelx.RegisterBreaker(mp, "payments", b)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	series := func(name string, kv ...string) string {
		return outcomes.Key(name, append([]string{"target", "payments"}, kv...)...)
	}
	check := func(when string, state, opens, refused float64) {
		t.Helper()
		got := collect(t, reader)
		want := map[string]float64{
			series("stormguard_breaker_state"):                                state,
			series("stormguard_breaker_transitions_total", "to", "open"):      opens,
			series("stormguard_breaker_transitions_total", "to", "half-open"): 0,
			series("stormguard_breaker_transitions_total", "to", "closed"):    0,
			series("stormguard_breaker_refused_total"):                        refused,
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("%s: %s = %v (exported %v), want %v", when, k, g, ok, w)
			}
		}
	}
	check("at the start", 0, 0, 0)
	r := retry.MustNew(retry.Policy{MaxAttempts: 1}, retry.WithBreaker(b))
	for range 3 {
		_ = retry.Do(context.Background(), r, func(context.Context) error { return classed(retry.Transient) })
	}
	check("after two failures and a refusal", 2, 1, 1)
}
