package sim

import "testing"

// TestBreakerVsBudget: examples/breaker-vs-budget.yaml, Brooker 2022's
// comparison under a partial failure (20 % errors from 30 s to 90 s). The
// retry budget keeps at least 97 % of requests succeeding (1 − 0.2³ ≈ 99 %
// while its retries are allowed); the breaker that opens at a 10 % failure
// rate refuses the calls that would have succeeded and serves under half.
func TestBreakerVsBudget(t *testing.T) {
	f := loadExample(t, "breaker-vs-budget.yaml")
	share := func(r Result) float64 {
		c := r.Clients[0].Bins
		return meanOver(c, cliT, good, 35, 90) / meanOver(c, cliT, demand, 35, 90)
	}
	budget := mustRun(t, runSpec(t, f, "budget"), "budget")
	brk := mustRun(t, runSpec(t, f, "breaker"), "breaker")
	t.Logf("success during the partial failure: budget %.1f%%, breaker %.1f%%", 100*share(budget), 100*share(brk))
	if share(budget) < 0.97 {
		t.Errorf("budget: %.1f%% succeeded during the partial failure, want ≥ 97%%", 100*share(budget))
	}
	if share(brk) > 0.5 || brk.Clients[0].Total.GaveUp.BreakerOpen == 0 {
		t.Errorf("breaker: %.1f%% succeeded, %v refused by the breaker; want under 50%% and refusals",
			100*share(brk), brk.Clients[0].Total.GaveUp.BreakerOpen)
	}
}
