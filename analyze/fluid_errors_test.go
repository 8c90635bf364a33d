package analyze

import (
	"testing"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// errorsYAML: a database of 100 attempts/s (10 workers × 100 ms) whose
// answers fail with probability 0.4, called by naive clients (3 attempts,
// 1 s timeout) at 50/s.
const errorsYAML = `
name: errors
duration: 120s
clients:
  - {name: app, target: db, arrivals: {kind: poisson, rate: 50}, policy: naive, timeout: 1s}
services:
  - {name: db, workers: 10, service_time: {kind: constant, mean: 100ms}, queue: {capacity: 400}, error_rate: 0.4}
`

// TestFluidErrorRate: errors are failures the callers retry, so the fluid
// model multiplies the load by 1 + e + e² for 3 attempts (e = 0.4: 1.56,
// 78 attempts/s for 50 first tries) and succeeds with 1 − e³ (46.8 of
// 50/s) in its healthy state, as the simulator does within 5 %; the collapse load falls to
// about capacity ÷ 1.56 = 64/s, where without errors it is near the
// capacity.
func TestFluidErrorRate(t *testing.T) {
	f, err := scenario.Parse("errors.yaml", []byte(errorsYAML))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Runs[0].Scenario
	p, th := fluidOf(t, s, "app")
	if p.ErrorRate != 0.4 {
		t.Fatalf("ErrorRate %v, want the service's 0.4", p.ErrorRate)
	}
	eq := Equilibria(p, 50)[0] // the healthy state (the load is vulnerable: a full queue also holds)
	if eq.Queue != 0 || !eq.Stable {
		t.Fatalf("first equilibrium at 50/s %+v, want the empty queue, stable", eq)
	}
	within(t, "fluid: attempts offered/s", eq.Offered, 78, 0.01)
	within(t, "fluid: goodput/s", eq.Goodput, 50*(1-0.4*0.4*0.4), 0.01)
	if !(th.Collapse > 58 && th.Collapse < 66) {
		t.Errorf("collapse at %.1f/s with errors, want about 64", th.Collapse)
	}
	clean := s
	clean.Services = append([]scenario.Service(nil), s.Services...)
	clean.Services[0].ErrorRate = 0
	if _, thClean := fluidOf(t, clean, "app"); !(thClean.Collapse > 90) {
		t.Errorf("collapse at %.1f/s without errors, want above 90", thClean.Collapse)
	}

	r := runAll(t, s)[0]
	offered := serviceMean(r, func(b result.ServiceBin) float64 { return b.OfferedFirst + b.OfferedRetries }, 10, 110)
	within(t, "simulated attempts offered/s", offered, eq.Offered, 0.05)
	goodput := meanOver(r.Clients[0].Bins, func(b result.ClientBin) float64 { return b.T }, func(b result.ClientBin) float64 { return b.Goodput }, 10, 110)
	within(t, "simulated goodput/s", goodput, eq.Goodput, 0.05)
}
