package metrics_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

// BenchmarkRetryHooks measures retry.Do's success path with no hooks, with
// RetryHooks and with LogHooks at a level that discards everything. The
// first is the cost of stormguard with no collector registered: the hooks
// are not even tested for.
func BenchmarkRetryHooks(b *testing.B) {
	ok := func(context.Context) error { return nil }
	for _, bc := range []struct {
		name  string
		hooks []retry.Hooks
	}{
		{"none", nil},
		{"metrics", []retry.Hooks{metrics.RetryHooks(prometheus.NewRegistry(), metrics.Labels{Target: "t"})}},
		{"log-discarded", []retry.Hooks{metrics.LogHooks(slog.New(slog.DiscardHandler))}},
		{"metrics+log", []retry.Hooks{
			metrics.RetryHooks(prometheus.NewRegistry(), metrics.Labels{Target: "t"}),
			metrics.LogHooks(slog.New(slog.DiscardHandler)),
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := noWait(b, bc.hooks...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = retry.Do(ctx, r, ok)
			}
		})
	}
}
