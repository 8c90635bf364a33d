package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/redistest"
)

// benchBudgets returns the local aws-2026 token bucket and a fleet budget
// of the same spec on a fresh redis-server, its lease held.
func benchBudgets(b *testing.B) (local budget.Budget, fleet *Budget) {
	b.Helper()
	spec := aws2026(b)
	local, err := spec.New()
	if err != nil {
		b.Fatal(err)
	}
	srv := redistest.Start(b)
	logger, _ := testLogger()
	prefill(b, srv.Addr(), "bench", spec)
	fleet, err = New(context.Background(), newClient(b, srv.Addr()), Config{Key: "bench", Spec: spec, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fleet.Close() })
	if fleet.Mode() != ModeFleet {
		b.Fatalf("fleet budget in mode %v", fleet.Mode())
	}
	return local, fleet
}

// BenchmarkFleetBudget measures the success path of a retry, RetryAt then
// EndAt(Success) with the ticket, on one goroutine — the loop of
// BenchmarkBudget/stormguard in the bench module — for the local aws-2026
// token bucket and for a fleet budget of the same spec with its lease held,
// in one run so the two can be compared. The fleet one reports the round
// trips to Redis per 100 budget operations.
func BenchmarkFleetBudget(b *testing.B) {
	local, fleet := benchBudgets(b)
	var now time.Time
	b.Run("local", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t, ok := local.RetryAt(now, budget.Transient)
			if !ok {
				b.Fatal("refused")
			}
			local.EndAt(now, budget.Success, t)
		}
	})
	b.Run("fleet", func(b *testing.B) {
		rt := fleet.Stats().RoundTrips
		b.ReportAllocs()
		for b.Loop() {
			t, ok := fleet.RetryAt(now, budget.Transient)
			if !ok {
				b.Fatal("refused")
			}
			fleet.EndAt(now, budget.Success, t)
		}
		b.ReportMetric(100*float64(fleet.Stats().RoundTrips-rt)/float64(2*b.N), "roundtrips/100ops")
	})
}

// BenchmarkFleetBudgetParallel is BenchmarkFleetBudget with every
// goroutine of b.RunParallel sharing the budget.
func BenchmarkFleetBudgetParallel(b *testing.B) {
	local, fleet := benchBudgets(b)
	var now time.Time
	for _, c := range []struct {
		name string
		bud  budget.Budget
	}{{"local", local}, {"fleet", fleet}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, ok := c.bud.RetryAt(now, budget.Transient)
					if !ok {
						panic("refused")
					}
					c.bud.EndAt(now, budget.Success, t)
				}
			})
		})
	}
}

// BenchmarkFleetSteady is a steady state: nine requests in ten succeed at
// the first try (earning tokens, sent to Redis in batches), the tenth is
// retried once, successfully. It runs the token bucket (local and fleet)
// and the finagle window (retries ≤ 20 % of requests + 10/s, fleet), and
// reports the round trips per 100 budget operations. The window's lease is
// sized for the rate a benchmark runs at (1000 retries: a loop of a few
// million requests a second retries some hundred thousand times a second,
// and the lease must outlast a round trip); with the default of 20 it runs
// dry between refills and RetryAt waits for them.
func BenchmarkFleetSteady(b *testing.B) {
	local, fleet := benchBudgets(b)
	srv := redistest.Start(b)
	logger, _ := testLogger()
	win, err := budget.Preset("finagle")
	if err != nil {
		b.Fatal(err)
	}
	window, err := New(context.Background(), newClient(b, srv.Addr()), Config{Key: "bench-window", Spec: win, Logger: logger, LeaseSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { window.Close() })
	for _, c := range []struct {
		name string
		bud  budget.Budget
	}{{"local", local}, {"fleet", fleet}, {"fleet-window", window}} {
		b.Run(c.name, func(b *testing.B) {
			fb, _ := c.bud.(*Budget)
			var rt uint64
			if fb != nil {
				rt = fb.Stats().RoundTrips
			}
			var now time.Time
			ops := 0
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				c.bud.BeginAt(now)
				if i%10 != 0 {
					c.bud.EndAt(now, budget.Success, budget.Ticket{})
					ops += 2
					continue
				}
				c.bud.EndAt(now, budget.Failure, budget.Ticket{})
				t, ok := c.bud.RetryAt(now, budget.Transient)
				if ok {
					c.bud.EndAt(now, budget.Success, t)
					ops++
				}
				ops += 3
			}
			if fb != nil {
				b.ReportMetric(100*float64(fb.Stats().RoundTrips-rt)/float64(ops), "roundtrips/100ops")
			}
		})
	}
}
