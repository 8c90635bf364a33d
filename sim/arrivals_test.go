package sim

import (
	"math"
	"testing"

	"github.com/stormguard/stormguard/sim/scenario"
)

// TestLoadTriggerTakesEffectAtOnce: a load spike from 0.2/s to 200/s (a
// factor 1000) brings its rate from the trigger's start: the first 100 ms
// of the spike holds about 20 arrivals, where a gap drawn before it at
// 0.2/s would hold the first arrival back for seconds.
func TestLoadTriggerTakesEffectAtOnce(t *testing.T) {
	const yaml = `
name: spike
duration: 12s
bin: 100ms
clients:
  - {name: app, target: s, arrivals: {kind: poisson, rate: 0.2}}
services:
  - {name: s, workers: 100, service_time: {kind: constant, mean: 1ms}}
triggers:
  - {kind: load, at: 10s, duration: 1s, factor: 1000}
`
	sum := 0.0
	const seeds = 50
	for seed := range seeds {
		f, err := scenario.Parse("spike.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		s := f.Runs[0].Scenario
		s.Seed = uint64(seed + 1)
		r := run(t, s)
		sum += r.Clients[0].Bins[100].Demand * 0.1 // the bin [10 s, 10.1 s), per second → count
	}
	if got := sum / seeds; math.Abs(got-20) > 4*math.Sqrt(20.0/seeds) {
		t.Errorf("first 100 ms of the spike: %.2f arrivals on average, want 20 ± %.2f", got, 4*math.Sqrt(20.0/seeds))
	}
}
