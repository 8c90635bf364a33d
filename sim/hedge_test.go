package sim

import (
	"testing"

	"github.com/stormguard/stormguard/sim/result"
)

// TestHedgingAmplification: examples/hedging.yaml, over 5 seeds. Without
// hedging the service rides out the load episode (not metastable); hedging
// without a budget collapses it (metastable, offered load ≥ 2× demand over
// the last 40 s, long after the episode); hedging charged to stormguard's budget is not
// metastable, offers at most 1.2× the attempts of no hedging before the
// episode, and cuts the p99 latency below the unhedged one's.
func TestHedgingAmplification(t *testing.T) {
	f := loadExample(t, "hedging.yaml")
	p99 := func(r result.Result) float64 {
		return meanOver(r.Clients[0].Bins, cliT, func(b result.ClientBin) float64 { return b.LatencyP99 }, 10, 40)
	}
	for seed := uint64(1); seed <= 5; seed++ {
		rs := map[string]result.Result{}
		for _, name := range []string{"no-hedging", "hedging", "hedging-with-budget"} {
			s := runSpec(t, f, name)
			s.Seed = seed
			rs[name] = mustRun(t, s, name)
		}
		pre := func(r result.Result) float64 { return meanOver(r.Services[0].Bins, svcT, offered, 10, 40) }
		plain, naive, budget := rs["no-hedging"], rs["hedging"], rs["hedging-with-budget"]
		d := meanOver(plain.Clients[0].Bins, cliT, demand, 10, 40)
		if plain.Verdict == "metastable" {
			t.Errorf("seed %d: no hedging is metastable (%s)", seed, plain.Why)
		}
		late := meanOver(naive.Services[0].Bins, svcT, offered, 80, 120)
		if naive.Verdict != "metastable" || late < 2*d {
			t.Errorf("seed %d: hedging without a budget: %s, offered %.0f/s at the end for %.0f/s of demand; want metastable, ≥ 2×", seed, naive.Verdict, late, d)
		}
		if budget.Verdict == "metastable" || pre(budget) > 1.2*pre(plain) || p99(budget) >= p99(plain) {
			t.Errorf("seed %d: hedging with a budget: %s, offered %.0f/s (unhedged %.0f), p99 %.3f s (unhedged %.3f)",
				seed, budget.Verdict, pre(budget), pre(plain), p99(budget), p99(plain))
		}
	}
}
