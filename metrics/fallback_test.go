package metrics_test

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/metrics"
)

// fallbackBudget is a budget that says whether it has fallen back, as
// fleet.Budget does when Redis is unreachable.
type fallbackBudget struct {
	budget.Unlimited
	down atomic.Bool
}

func (b *fallbackBudget) Fallback() bool { return b.down.Load() }

func TestRegisterBudgetFallback(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := new(fallbackBudget)
	if err := metrics.RegisterBudget(reg, metrics.Labels{Target: "payments"}, b); err != nil {
		t.Fatal(err)
	}
	read := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "stormguard_client_retry_budget_fallback" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("stormguard_client_retry_budget_fallback is not exported")
		return 0
	}
	for _, tt := range []struct {
		down bool
		want float64
	}{{false, 0}, {true, 1}, {false, 0}} {
		b.down.Store(tt.down)
		if got := read(); got != tt.want {
			t.Errorf("fallback %v: gauge %v, want %v", tt.down, got, tt.want)
		}
	}
}
