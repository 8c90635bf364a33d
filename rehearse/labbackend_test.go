package rehearse

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/scenario"
)

// backendStorm: 200 requests/s to the lab's backend (15 workers × 50 ms =
// 300/s, serving everything it took), the network held for 2 s; clients
// retry once after 1 s.
const backendStorm = `
name: backend-storm
duration: 16s
seed: 1
rehearse: {calm: 3s}
clients:
  - name: app
    target: backend
    arrivals: {kind: poisson, rate: 200}
    timeout: 1s
    policy: {preset: naive, max_attempts: 2}
services:
  - name: backend
    target: http://%s/
triggers:
  - {kind: outage, target: backend, at: 3s, duration: 2s, mode: hold}
runs:
  - name: naive
  - name: stormguard
    set: {clients.app.policy: stormguard}
`

// Against the lab's backend started as a separate process (the role
// stormguard lab starts): naive clients keep the storm going after the
// hold, stormguard's recover (with STORMGUARD_REHEARSE_LONG=1); with --predict's calm phase, the fitted
// model finds the backend's service time and workers, and the simulator's
// run of it agrees with what was measured.
func TestLabBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	cfg := lab.ServiceConfig{Workers: 15, ServiceTime: scenario.Dist{Kind: "constant", Mean: 50 * time.Millisecond},
		Queue: scenario.QueueSpec{}.ShedConfig(0)} // the queue of a scenario that sets none
	var ps []Plan
	fresh := func() { // a fresh backend: a naive one stays busy with the last storm
		addr := startBackend(t, cfg, 5*time.Minute)
		ps = rehearseFile(t, fmt.Sprintf(backendStorm, addr), t.TempDir(), Limits{})
	}
	fresh()
	fits, err := Calibrate(t.Context(), ps[0])
	if err != nil {
		t.Fatal(err)
	}
	f := fits[0]
	t.Logf("fit: %s; levels %+v", f, f.Levels)
	if math.Abs(f.ServiceTimeS-0.050) > 0.010 || f.Workers < 12 || f.Workers > 18 {
		t.Errorf("fitted %s; want a service time of 50 ms ± 10 and 15 ± 3 workers", f)
	}
	naive := rehearseConclusive(t, ps[0], nil)
	t.Log(summary(naive))
	if v := naive.Result.Verdict; v != "metastable" {
		t.Errorf("naive: %s, want metastable: %s", v, naive.Result.Why)
	}
	model, notes := Model(ps[0], fits)
	simRun, err := sim.Run(t.Context(), model, "naive", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	out.Add(ps[0], naive)
	out.AddPrediction(fits, simRun, notes)
	c := out.Comparisons[0]
	t.Logf("prediction: %s", c)
	if c.SimVerdict != c.LabVerdict || math.Abs(c.LabAfter-c.SimAfter) > 0.15 {
		t.Errorf("the fitted model's run (%s, %.0f%% after the hold) does not agree with the rehearsal's (%s, %.0f%%)",
			c.SimVerdict, 100*c.SimAfter, c.LabVerdict, 100*c.LabAfter)
	}
	if !long {
		t.Log("the stormguard run (recovered in 1.1 s when measured) runs with STORMGUARD_REHEARSE_LONG=1; TestNginxStorm checks a recovery")
		return
	}
	sg := rehearseConclusive(t, ps[1], fresh)
	t.Log(summary(sg))
	if v := sg.Result.Verdict; v != "recovered" && v != "stable" {
		t.Errorf("stormguard: %s, want recovered: %s", v, sg.Result.Why)
	}
	if a := after(sg.Result, 12); a < 0.9 {
		t.Errorf("stormguard: goodput from 12 s on %.0f%% of demand, want ≥ 90%%", 100*a)
	}
}
