package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterBudget registers, in reg, gauges that read the retry budget b
// when scraped, as the client of l.Target:
// stormguard_client_retry_budget_tokens and
// stormguard_client_retry_budget_capacity_tokens. Pass a retrier's budget,
// r.Budget().
//
// Only budgets that have a level are exported: budget.TokenBucket (Level,
// Capacity) and budget.TokenRatio (Level, MaxTokens), or any budget with a
// Level() float64 method. For the others (windows, concurrency shares, no
// budget) RegisterBudget registers nothing and returns nil. It returns the
// registry's error if reg refuses the gauges; registering the same
// target's budget twice is such an error.
//
// A budget shared by a fleet (fleet.Budget, or any budget with a
// Fallback() bool method) also gets stormguard_client_retry_budget_fallback:
// 1 while this process has fallen back to its local share because the
// shared store is unreachable, 0 while it uses the fleet's budget.
func RegisterBudget(reg prometheus.Registerer, l Labels, b budget.Budget) error {
	level, capacity, fallback := schema.BudgetReaders(b)
	gauge := func(m schema.Metric, f func() float64) error {
		return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.Name, Help: m.Help, ConstLabels: constLabels(l)}, f))
	}
	if fallback != nil {
		if err := gauge(schema.ClientBudgetFallback, func() float64 {
			if fallback() {
				return 1
			}
			return 0
		}); err != nil {
			return err
		}
	}
	if level != nil {
		if err := gauge(schema.ClientBudgetTokens, level); err != nil {
			return err
		}
	}
	if capacity != nil {
		return gauge(schema.ClientBudgetCapacity, capacity)
	}
	return nil
}
