package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/sim/scenario"
)

// supersedeOutcome is how a key's requests fared at a server: the one
// that ran, those that joined it, those refused (the supersede core's
// Refuse) and those served as if they had no key.
type supersedeOutcome struct {
	ran, joined, refused, servedAnyway int
}

// TestSupersedeRefuseAsProduction: one person taps maxWaiters + 2 times
// while the first tap is in service. The production gate and the simulated
// service both run the supersede core, which joins maxWaiters taps to the
// first and refuses the last (Refuse); both refuse it (the gate: Throttled,
// counted shed with reason key-busy; the simulator: answered shed, counted
// Shed), neither serves it without its key.
func TestSupersedeRefuseAsProduction(t *testing.T) {
	for _, mw := range []int{1, 3} {
		want := supersedeOutcome{ran: 1, joined: mw, refused: 1}
		if got := gateRefuse(t, mw); got != want {
			t.Errorf("max_waiters %d: admit gate %+v, want %+v", mw, got, want)
		}
		for _, gate := range []bool{false, true} {
			if got := simRefuse(t, mw, gate); got != want {
				t.Errorf("max_waiters %d, admission through admit.Core %v: simulator %+v, want %+v", mw, gate, got, want)
			}
		}
	}
}

// gateRefuse drives the production gate: a keyed request in service,
// mw requests joining it, one more.
func gateRefuse(t *testing.T, mw int) supersedeOutcome {
	t.Helper()
	g, err := admit.New(admit.Config{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 10},
		Supersede: &admit.SupersedeConfig{MaxWaiters: mw}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := admit.Request{Key: "tap", KeyScope: "POST /transfer"}
	var out supersedeOutcome
	tk, d := g.Admit(ctx, time.Now(), r)
	if !d.Admitted() {
		t.Fatalf("first tap: %v, want admitted", d.Answer)
	}
	out.ran++
	joins := make(chan admit.Decision, mw)
	for range mw {
		go func() {
			_, d := g.Admit(ctx, time.Now(), r)
			joins <- d
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); g.Stats().Joining < mw; {
		if time.Now().After(deadline) {
			t.Fatalf("joining %d, want %d", g.Stats().Joining, mw)
		}
		time.Sleep(time.Millisecond)
	}
	switch _, d := g.Admit(ctx, time.Now(), r); {
	case d.Answer == admit.Throttled && d.Reason == admit.ShedKeyBusy:
		out.refused++
	case d.Admitted():
		out.servedAnyway++
	default:
		t.Errorf("last tap: %v (%v)", d.Answer, d.Reason)
	}
	tk.ReleaseWith(ctx, time.Now(), admit.Succeeded, "done")
	for range mw {
		if d := <-joins; d.Answer == admit.Joined {
			out.joined++
		}
	}
	if st := g.Stats(); st.Shed[admit.ShedKeyBusy] != uint64(out.refused) {
		t.Errorf("gate counted %d key-busy sheds, want %d", st.Shed[admit.ShedKeyBusy], out.refused)
	}
	return out
}

// simRefuse drives the simulator: one person, patience 1 s, mw + 2 taps,
// a service time of 10 s; with gate, the service admits through a server
// block (as a policy_file's, see ServerRef) with the same limit.
func simRefuse(t *testing.T, mw int, gate bool) supersedeOutcome {
	t.Helper()
	s := oneService(0, scenario.Service{Workers: 10, ServiceTime: scenario.Dist{Kind: "constant", Mean: 10 * time.Second},
		Supersede: &scenario.Supersede{MaxWaiters: mw}}, 30*time.Second, 1)
	if gate {
		s.Services[0].Server = &admit.Config{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 10},
			Supersede: &admit.SupersedeConfig{MaxWaiters: mw}}
	}
	s.Clients[0].Arrivals = scenario.Arrivals{Kind: "burst", Count: 1, At: 0}
	s.Clients[0].Humans = &scenario.Humans{Patience: scenario.Dist{Kind: "constant", Mean: time.Second}, Taps: mw + 2}
	s.Clients[0].IdempotencyKey = true
	v := run(t, s).Services[0].Total
	// Completed counts the attempts that ran: the first, and any refused
	// tap served without its key.
	return supersedeOutcome{ran: 1, joined: int(v.Joined), refused: int(v.Shed), servedAnyway: int(v.Completed) - 1}
}
