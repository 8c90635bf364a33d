package fleet

import (
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/redistest"
)

// benchBudgets returns the local aws-2026 token bucket and a fleet budget
// of the same spec on a fresh redis-server whose pool is full, busy (a few
// hundred retries made, so that it holds a lease).
func benchBudgets(b *testing.B) (local budget.Budget, fleet *Budget) {
	b.Helper()
	spec := aws2026(b)
	local, err := spec.New()
	if err != nil {
		b.Fatal(err)
	}
	srv := redistest.Start(b)
	credit(b, srv.Addr(), "bench", 500)
	fleet, _ = newBudget(b, srv.Addr(), Config{Key: "bench", MaxWait: time.Second})
	for range 300 {
		t, ok := fleet.RetryAt(time.Time{}, budget.Transient)
		if !ok {
			b.Fatal("refused while warming up")
		}
		fleet.EndAt(time.Time{}, budget.Success, t)
	}
	if fleet.Mode() != ModeFleet || fleet.Stats().Hold == 0 {
		b.Fatalf("fleet budget in mode %v, holding %g", fleet.Mode(), fleet.Stats().Hold)
	}
	return local, fleet
}

// BenchmarkFleetBudget measures the success path of a retry, RetryAt then
// EndAt(Success) with the ticket, on one goroutine — the loop of
// BenchmarkBudget/stormguard in the bench module — for the local aws-2026
// token bucket and for a busy fleet budget of the same spec (it holds a
// lease, and a refund goes back into it), in one run so the two can be
// compared. The fleet one reports the round trips to Redis per 100 budget
// operations.
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
						panic(fmt.Sprintf("refused: %+v", fleet.Stats()))
					}
					c.bud.EndAt(now, budget.Success, t)
				}
			})
		})
	}
}

// BenchmarkFleetSteady is a steady state: nine requests in ten succeed at
// the first try (earning tokens, which the full pool does not need), the
// tenth is retried once, successfully. It reports the round trips per 100
// budget operations of the local and the fleet token bucket.
func BenchmarkFleetSteady(b *testing.B) {
	local, fleet := benchBudgets(b)
	for _, c := range []struct {
		name string
		bud  budget.Budget
	}{{"local", local}, {"fleet", fleet}} {
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
