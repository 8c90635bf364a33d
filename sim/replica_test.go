package sim

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// driveProbe runs s as Run does, with two ways to look inside: probe is called
// before each event with the seconds since the previous one (the state is
// constant in between), and at(w) once when the clock reaches atS seconds
// (after the events of that instant). It drives the same world, events and
// handlers as Run.
func driveProbe(t *testing.T, s scenario.Scenario, atS float64, at func(*world), probe func(w *world, dt float64)) result.Result {
	t.Helper()
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := newWorld(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.startEvents()
	var ev engine.Event
	prev := engine.Time(0)
	step := func(until engine.Time) {
		for w.eng.NextUntil(until, &ev) {
			probe(w, float64(w.eng.Now()-prev)/1e9)
			prev = w.eng.Now()
			w.Handle(&w.eng, ev)
		}
		probe(w, float64(until-prev)/1e9)
		prev = until
	}
	if at != nil {
		step(engine.Time(atS * 1e9))
		at(w)
	}
	step(w.end)
	return w.finish(s.Name)
}

// busyMeter integrates each replica's busy workers over windows of time.
type busyMeter struct {
	from, to float64   // the window, seconds
	busy     []float64 // worker-seconds per replica
}

func (m *busyMeter) probe(w *world, dt float64) {
	end := float64(w.eng.Now()) / 1e9
	start := end - dt
	lo, hi := max(start, m.from), min(end, m.to)
	if hi <= lo {
		return
	}
	for i := range w.services[0].reps {
		m.busy[i] += float64(w.services[0].reps[i].busy) * (hi - lo)
	}
}

// utilisation returns each replica's busy share of its workers over the
// window.
func (m *busyMeter) utilisation(workers int) []float64 {
	out := make([]float64, len(m.busy))
	for i, b := range m.busy {
		out[i] = b / (m.to - m.from) / float64(workers)
	}
	return out
}

// TestPickReplica: the balancers' choice, step by step. Round-robin takes
// the next replica in turn that is up and not draining; least-outstanding
// takes the one with the fewest queued + in service, ties to the next in
// turn; with none up, none.
func TestPickReplica(t *testing.T) {
	mk := func(lo bool, inSvc ...int) *service {
		v := &service{spec: scenario.Service{Queue: scenario.QueueSpec{Capacity: 10}}, leastOutstanding: lo}
		for _, n := range inSvc {
			r, err := v.newReplica()
			if err != nil {
				t.Fatal(err)
			}
			r.inSvc = n
			v.reps = append(v.reps, r)
		}
		return v
	}
	seq := func(v *service, n int) []int32 {
		var out []int32
		for range n {
			out = append(out, v.pickReplica())
		}
		return out
	}
	eq := func(a, b []int32) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	rr := mk(false, 0, 0, 0, 0)
	if got, want := seq(rr, 6), []int32{0, 1, 2, 3, 0, 1}; !eq(got, want) {
		t.Errorf("round-robin: %v, want %v", got, want)
	}
	rr.reps[2].down, rr.reps[3].draining = true, true
	if got, want := seq(rr, 4), []int32{0, 1, 0, 1}; !eq(got, want) {
		t.Errorf("round-robin, 2 down and 3 draining: %v, want %v", got, want)
	}
	lo := mk(true, 3, 1, 2, 1)
	if got := lo.pickReplica(); got != 1 {
		t.Errorf("least-outstanding of 3, 1, 2, 1 in service: %d, want 1", got)
	}
	if got := lo.pickReplica(); got != 3 {
		t.Errorf("least-outstanding again (tie between 1 and 3, next in turn after 1): %d, want 3", got)
	}
	lo.reps[1].down, lo.reps[3].down = true, true
	if got := lo.pickReplica(); got != 2 {
		t.Errorf("least-outstanding with 1 and 3 down: %d, want 2", got)
	}
	for i := range lo.reps {
		lo.reps[i].down = true
	}
	if got := lo.pickReplica(); got != noID {
		t.Errorf("none up: %d, want none", got)
	}
}

// TestBalancersSplitEvenly: 4 replicas of 1 worker × 10 ms at 200
// requests/s: each is busy λ·s/4 = 50 % of the time, with either balancer,
// to ±3 % (measured over 10–190 s).
func TestBalancersSplitEvenly(t *testing.T) {
	for _, bal := range []string{"round-robin", "least-outstanding"} {
		v := scenario.Service{Workers: 1, Replicas: 4, Balancer: bal, ServiceTime: scenario.Dist{Kind: "exponential", Mean: 10 * time.Millisecond}}
		m := &busyMeter{from: 10, to: 190, busy: make([]float64, 4)}
		driveProbe(t, oneService(200, v, 200*time.Second, 1), 0, nil, m.probe)
		for i, u := range m.utilisation(1) {
			within(t, bal+": busy share of replica "+itoa(i), u, 0.5, 0.03)
		}
	}
}

// TestCrashMovesShare: 4 replicas of 1 worker × 10 ms at 240 requests/s,
// each busy 60 %; replica 0 crashes at 50 s and stays down. Its share moves
// to the 3 survivors, each busy 240 × 0.01 / 3 = 80 % (±3 %, over
// 60–190 s), replica 0 is idle, and no request is refused for want of a
// replica — with either balancer.
func TestCrashMovesShare(t *testing.T) {
	for _, bal := range []string{"round-robin", "least-outstanding"} {
		v := scenario.Service{Workers: 1, Replicas: 4, Balancer: bal, ServiceTime: scenario.Dist{Kind: "constant", Mean: 10 * time.Millisecond},
			Crash: &scenario.Crash{Queue: 1_000_000, Restart: time.Hour}}
		before := &busyMeter{from: 10, to: 50, busy: make([]float64, 4)}
		after := &busyMeter{from: 60, to: 190, busy: make([]float64, 4)}
		probe := func(w *world, dt float64) { before.probe(w, dt); after.probe(w, dt) }
		r := driveProbe(t, oneService(240, v, 200*time.Second, 1), 50, func(w *world) { w.crash(&w.services[0], 0) }, probe)
		for i, u := range before.utilisation(1) {
			within(t, bal+": before the crash, busy share of replica "+itoa(i), u, 0.6, 0.03)
		}
		for i, u := range after.utilisation(1) {
			if i == 0 {
				if u != 0 {
					t.Errorf("%s: the crashed replica is busy %.3f of the time, want 0", bal, u)
				}
				continue
			}
			within(t, bal+": after the crash, busy share of survivor "+itoa(i), u, 0.8, 0.03)
		}
		tot := r.Services[0].Total
		if tot.Crashes != 1 || tot.Lost != 0 || tot.Crashed > 2 {
			t.Errorf("%s: %d crashes, %d lost, %d lost in the crash; want 1, 0 and at most 2 (what replica 0 held)", bal, tot.Crashes, tot.Lost, tot.Crashed)
		}
	}
}

// TestColdRestart: a replica restarted cold runs at speed Speed + (1 −
// Speed) × u / Duration at u seconds after it came up, and at full speed
// after Duration; a request alone on a worker law takes its service time ÷
// the speed when it starts. One worker × 100 ms, a request a second (at
// whole seconds), a pause from 10 to 13 s (it takes effect before the
// request at 10 s, which queues; the one at 11 s makes 2 > 1: a crash at
// 11 s), back 4.5 s later at 15.5 s, cold for 10 s from a quarter speed:
// the request at 16 s (u = 0.5) takes 0.1 / 0.2875 s, and so on, exactly.
func TestColdRestart(t *testing.T) {
	v := scenario.Service{Workers: 1, ServiceTime: scenario.Dist{Kind: "constant", Mean: 100 * time.Millisecond},
		Crash: &scenario.Crash{Queue: 1, Restart: 4500 * time.Millisecond, Cold: &scenario.Cold{Duration: 10 * time.Second, Speed: 0.25}}}
	s := oneService(1, v, 40*time.Second, 1)
	s.Clients[0].Arrivals.Kind = "constant"
	s.Triggers = []scenario.Trigger{{Kind: "pause", Target: "s", At: 10 * time.Second, Duration: 3 * time.Second}}
	r := run(t, s)
	if n := r.Services[0].Total.Crashes; n != 1 {
		t.Fatalf("%d crashes, want 1", n)
	}
	for sec := 16; sec < 40; sec++ {
		u := float64(sec) - 15.5
		speed := 1.0
		if u < 10 {
			speed = 0.25 + 0.75*u/10
		}
		got := r.Clients[0].Bins[sec].LatencyP50
		within(t, "latency of the request at "+itoa(sec)+" s", got, 0.1/speed, 1e-6)
	}
	// While it was down (11 to 15.5 s) the requests at 12 to 15 s were refused.
	if lost := r.Services[0].Total.Lost; lost != 4 {
		t.Errorf("%d attempts refused while down, want 4", lost)
	}
}
