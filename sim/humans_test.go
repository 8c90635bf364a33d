package sim

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// TestBankingApp: examples/banking-app.yaml (Paper 08's banking app).
// Without a defense and with first tries first alone the bank stays down
// (metastable); with supersession it is not metastable, a person's taps
// collapse into one transfer (the bank, which has no admission queue of
// its own, admits the first and the others join it, as a production gate
// without a limit would), and its queue holds at most one request per
// person waiting (the peak queue is below the people who arrived in the
// 30 s spike, 500/s × 30 s).
func TestBankingApp(t *testing.T) {
	f := loadExample(t, "banking-app.yaml")
	for _, name := range []string{"no-defense", "first-tries-first"} {
		if r := mustRun(t, runSpec(t, f, name), name); r.Verdict != "metastable" {
			t.Errorf("%s: %s (%s), want metastable", name, r.Verdict, r.Why)
		}
	}
	r := mustRun(t, runSpec(t, f, "supersession"), "supersession")
	peak := 0.0
	for _, b := range r.Services[0].Bins {
		peak = max(peak, b.Queue)
	}
	if v := r.Services[0].Total; r.Verdict == "metastable" || peak > 15000 || v.Joined == 0 {
		t.Errorf("supersession: %s, peak queue %.0f, joined %d; want not metastable, ≤ 15000, some", r.Verdict, peak, v.Joined)
	}
}

// TestHumansTapAgain: a person taps again after their patience, up to Taps
// times, and succeeds when any tap does; demand counts people, not taps.
func TestHumansTapAgain(t *testing.T) {
	// One person; the service takes 10 s; patience 1 s, 3 taps: taps at 0,
	// 1 and 2 s, the first answers at 10 s and the person succeeds then.
	s := oneService(0, scenario.Service{Workers: 10, ServiceTime: scenario.Dist{Kind: "constant", Mean: 10 * time.Second}}, 30*time.Second, 1)
	s.Clients[0].Arrivals = scenario.Arrivals{Kind: "burst", Count: 1, At: 0}
	s.Clients[0].Humans = &scenario.Humans{Patience: scenario.Dist{Kind: "constant", Mean: time.Second}, Taps: 3}
	r := run(t, s)
	c := r.Clients[0].Total
	if c.Requests != 1 || c.Succeeded != 1 || c.HumanRetries != 2 || r.Services[0].Total.Arrived != 3 {
		t.Errorf("person %+v, service arrived %d; want 1 request, 1 success, 2 human retries, 3 taps arriving", c, r.Services[0].Total.Arrived)
	}
	if c.SuccessLatencyS != 10 {
		t.Errorf("the person waited %v s, want 10 (the first tap's answer)", c.SuccessLatencyS)
	}
	// With supersession and keys: the three taps cost one unit of work
	// (the first starts at once, the others join it).
	s.Clients[0].IdempotencyKey = true
	s.Services[0].Supersede = &scenario.Supersede{}
	r = run(t, s)
	if v := r.Services[0].Total; v.Completed != 1 || v.Joined != 2 {
		t.Errorf("with supersession: completed %d, joined %d; want 1 and 2", v.Completed, v.Joined)
	}
}
