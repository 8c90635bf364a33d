package budget

import (
	"testing"
	"time"
)

// benchKinds are the budgets the benchmarks run, one preset per kind.
var benchKinds = []struct{ kind, preset string }{
	{"none", "none"},
	{"token-bucket", "aws-2026"},
	{"token-ratio", "grpc"},
	{"window", "sre"},
	{"concurrency", "envoy"},
}

// BenchmarkBudget measures one retry decision and its end, through the
// Budget interface, on one goroutine: RetryAt then EndAt(Success) with the
// ticket. The window budget is given 1,000 requests first so that it grants
// retries; the others grant every one (the token ratio because it charges
// nothing and the others because successes refund them).
func BenchmarkBudget(b *testing.B) {
	for _, k := range benchKinds {
		b.Run(k.kind, func(b *testing.B) {
			bud := mustPreset(b, k.preset)
			now := t0
			for range 1000 {
				bud.BeginAt(now)
			}
			b.ReportAllocs()
			for b.Loop() {
				t, _ := bud.RetryAt(now, Transient)
				bud.EndAt(now, Success, t)
			}
		})
	}
}

// BenchmarkBudgetParallel is BenchmarkBudget with every goroutine of
// b.RunParallel sharing one budget, as the requests of one client do.
func BenchmarkBudgetParallel(b *testing.B) {
	for _, k := range benchKinds {
		b.Run(k.kind, func(b *testing.B) {
			bud := mustPreset(b, k.preset)
			now := t0
			for range 1000 {
				bud.BeginAt(now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, _ := bud.RetryAt(now, Transient)
					bud.EndAt(now, Success, t)
				}
			})
		})
	}
}

// BenchmarkRequest measures a whole retried request through the protocol:
// BeginAt, EndAt(Failure) of the first try, RetryAt, EndAt(Success) of the
// retry, with the clock moving 1 µs per request (so the window rotates).
func BenchmarkRequest(b *testing.B) {
	for _, k := range benchKinds {
		b.Run(k.kind, func(b *testing.B) {
			bud := mustPreset(b, k.preset)
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				bud.BeginAt(now)
				bud.EndAt(now, Failure, Ticket{})
				if t, ok := bud.RetryAt(now, Transient); ok {
					bud.EndAt(now, Success, t)
				}
			}
		})
	}
}
