package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/budget"
)

// RegisterBudget registers, in reg, gauges that read the level of the retry
// budget b when scraped, as the client side of l.Target:
// stormguard_budget_level and stormguard_budget_capacity. Pass a retrier's
// budget, r.Budget().
//
// Only budgets that have a level are exported: budget.TokenBucket (Level,
// Capacity) and budget.TokenRatio (Level, MaxTokens), or any budget with a
// Level() float64 method. For the others (windows, concurrency shares, no
// budget) RegisterBudget registers nothing and returns nil. It returns the
// registry's error if reg refuses the gauges; registering the same
// target's budget twice is such an error.
//
// A budget shared by a fleet (fleet.Budget, or any budget with a
// Fallback() bool method) also gets stormguard_budget_fallback: 1 while this
// process has fallen back to its local share because the shared store is
// unreachable, 0 while it uses the fleet's budget.
func RegisterBudget(reg prometheus.Registerer, l Labels, b budget.Budget) error {
	if fb, ok := b.(interface{ Fallback() bool }); ok {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: nameFallback, Help: helpFallback, ConstLabels: constLabels(sideClient, l)},
			func() float64 {
				if fb.Fallback() {
					return 1
				}
				return 0
			})
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	lv, ok := b.(interface{ Level() float64 })
	if !ok {
		return nil
	}
	cl := constLabels(sideClient, l)
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: nameBudget, Help: helpBudget, ConstLabels: cl}, lv.Level)); err != nil {
		return err
	}
	var capacity func() float64
	switch c := b.(type) {
	case interface{ Capacity() float64 }:
		capacity = c.Capacity
	case interface{ MaxTokens() float64 }:
		capacity = c.MaxTokens
	default:
		return nil
	}
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: nameBudgetCap, Help: helpBudgetCap, ConstLabels: cl}, capacity))
}
