package sim

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/autoscale"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Runbook actions and autoscalers: each action drives the dial or the
// count it names, and the seeds' two incidents and failed fixes come out
// as the seeds tell them (REFERENCES.md §4).

// TestActions: every kind of action, on a service of 10 workers × 10 ms
// (1,000/s) under 500 requests/s, measured over the 10 s after it.
func TestActions(t *testing.T) {
	base := func() scenario.Scenario {
		s := oneService(500, scenario.Service{Workers: 10, ServiceTime: scenario.Dist{Kind: "constant", Mean: 10 * time.Millisecond}}, 40*time.Second, 1)
		s.Clients[0].Timeout = time.Second
		return s
	}
	served := func(r result.Result) float64 {
		return meanOver(r.Services[0].Bins, svcT, func(b result.ServiceBin) float64 { return b.Throughput }, 22, 32)
	}
	for _, c := range []struct {
		name   string
		action scenario.Action
		check  func(t *testing.T, r result.Result)
	}{
		{"shed half", scenario.Action{At: 20 * time.Second, Kind: "shed", Target: "s", Value: 0.5}, func(t *testing.T, r result.Result) {
			within(t, "throughput after shedding half (1/s)", served(r), 250, 0.05)
		}},
		{"limit 1", scenario.Action{At: 20 * time.Second, Kind: "limit", Target: "s", Value: 1}, nil},
		{"capacity halved", scenario.Action{At: 20 * time.Second, Kind: "capacity", Target: "s", Value: 0.4}, func(t *testing.T, r result.Result) {
			// 400/s of capacity under 500/s.
			within(t, "throughput at 40 % capacity (1/s)", served(r), 400, 0.05)
		}},
		{"replicas 2", scenario.Action{At: 20 * time.Second, Kind: "replicas", Target: "s", Value: 2, Delay: 5 * time.Second}, func(t *testing.T, r result.Result) {
			if up := r.Services[0].Bins[22].ReplicasUp; up != 1 {
				t.Errorf("replicas up 2 s after the action: %v, want 1 (the new one serves 5 s later)", up)
			}
			if up := r.Services[0].Bins[26].ReplicasUp; up != 2 {
				t.Errorf("replicas up 6 s after the action: %v, want 2", up)
			}
		}},
		{"pause the client", scenario.Action{At: 20 * time.Second, Kind: "pause", Target: "c"}, func(t *testing.T, r result.Result) {
			if got := served(r); got != 0 {
				t.Errorf("throughput while paused %v, want 0", got)
			}
		}},
		{"pause the service", scenario.Action{At: 20 * time.Second, Kind: "pause", Target: "s"}, func(t *testing.T, r result.Result) {
			if got := served(r); got != 0 {
				t.Errorf("throughput while every edge into it is paused %v, want 0", got)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base()
			s.Actions = []scenario.Action{c.action}
			if c.name == "limit 1" {
				s.Services[0].Limiter = &limit.Spec{Kind: limit.KindFixed, Limit: 100}
			}
			r := run(t, s)
			if len(r.Actions) != 1 || r.Actions[0].T != 20 || r.Actions[0].Kind != c.action.Kind {
				t.Fatalf("actions reported %+v, want the one at 20 s", r.Actions)
			}
			if c.name == "limit 1" {
				if l := r.Services[0].Bins[25].Limit; l != 1 {
					t.Errorf("limit after the override %v, want 1", l)
				}
				// One in flight: each holds the slot 10 ms, then the slot
				// waits for the next arrival, 2 ms on average: 1 / 12 ms.
				within(t, "throughput at a limit of 1 (1/s)", served(r), 1/0.012, 0.05)
				return
			}
			c.check(t, r)
		})
	}
}

// TestRetriesOff: the action turns off the client's retries through the
// same dials the production retrier reads: the toy's storm stops retrying,
// its backlog drains at 300 − 280 = 20/s, and it recovers.
func TestRetriesOff(t *testing.T) {
	s := hotos(1, false)
	s.Duration = 900 * time.Second
	s.Actions = []scenario.Action{{At: 40 * time.Second, Kind: "retries-off", Target: "app"}}
	r := run(t, s)
	retries := meanOver(r.Services[0].Bins, svcT, func(b result.ServiceBin) float64 { return b.OfferedRetries }, 41, 900)
	if retries != 0 {
		t.Errorf("retries/s after retries-off: %v, want 0", retries)
	}
	if r.Clients[0].Total.GaveUp.Disabled == 0 {
		t.Error("no request gave up as retries_disabled")
	}
	if r.Verdict != "recovered" {
		t.Errorf("verdict %s (%s): turning retries off must end the toy's storm", r.Verdict, r.Why)
	}
}

// TestAutoscalerMetrics: what the simulator measures for an autoscaler.
// A tier of 10 workers × 1 ms of work that waits 99 ms on a call, at
// 50 requests/s: CPU (workers doing local work) is 50 × 1 ms / 10 = 0.5 %
// while in-flight concurrency is 50 × 100 ms = 5.
func TestAutoscalerMetrics(t *testing.T) {
	for _, c := range []struct {
		metric autoscale.Metric
		want   float64
	}{{autoscale.CPU, 0.005}, {autoscale.Concurrency, 5}, {autoscale.Rate, 50}} {
		s := oneService(50, scenario.Service{Workers: 10, ServiceTime: scenario.Dist{Kind: "constant", Mean: time.Millisecond},
			Calls: []scenario.Call{{Service: "db", Timeout: time.Second}}}, 100*time.Second, 1)
		s.Services = append(s.Services, scenario.Service{Name: "db", Workers: 100, ServiceTime: scenario.Dist{Kind: "constant", Mean: 99 * time.Millisecond}})
		// The first evaluation is past the end: the meter sees 95 s. The
		// replica has served 95 s, less than the default readiness delay
		// (one interval): with cpu it counts only without one.
		zero := time.Duration(0)
		s.Services[0].Autoscale = &scenario.Autoscale{Policy: autoscale.Policy{Metric: c.metric, Target: c.want, Min: 1, Max: 1,
			Interval: 200 * time.Second, ReadinessDelay: &zero}}
		w, err := newWorld(s.WithDefaults(), nil)
		if err != nil {
			t.Fatal(err)
		}
		w.startEvents()
		var ev engine.Event
		for w.eng.NextUntil(engine.Time(95*time.Second), &ev) {
			w.Handle(&w.eng, ev)
		}
		o := w.observe(&w.services[0])
		if o.Replicas != 1 || o.Ready != 1 {
			t.Errorf("%s: observed %+v, want 1 replica, ready", c.metric, o)
		}
		within(t, string(c.metric), o.Value, c.want, 0.05)
	}
}

// TestAutoscalerReadiness: which replicas' metric counts. A service of 2
// replicas scaled to 4 at 10 s by a runbook (the new ones serve 20 s
// later, at 30 s): at 25 s two are starting (not ready); at 40 s all four
// serve, but with cpu the new ones count only after the readiness delay
// (one interval, 15 s, by default: from 45 s), with concurrency at once.
func TestAutoscalerReadiness(t *testing.T) {
	for _, c := range []struct {
		metric autoscale.Metric
		delay  *time.Duration
		at     time.Duration
		ready  int
	}{
		{autoscale.CPU, nil, 25 * time.Second, 2},
		{autoscale.CPU, nil, 40 * time.Second, 2},
		{autoscale.CPU, nil, 46 * time.Second, 4},
		{autoscale.Concurrency, nil, 25 * time.Second, 2},
		{autoscale.Concurrency, nil, 40 * time.Second, 4},
		{autoscale.CPU, new(time.Duration), 40 * time.Second, 4},
	} {
		s := oneService(100, scenario.Service{Replicas: 2, Workers: 10, ServiceTime: scenario.Dist{Kind: "constant", Mean: 10 * time.Millisecond}}, 100*time.Second, 1)
		// Evaluated every 15 s, it changes nothing: the load is low, and
		// its scale-down stabilization keeps the 4 it first saw.
		s.Services[0].Autoscale = &scenario.Autoscale{Policy: autoscale.Policy{Metric: c.metric, Target: 0.5, Min: 1, Max: 8,
			ReadinessDelay: c.delay}}
		s.Actions = []scenario.Action{{At: 10 * time.Second, Kind: "replicas", Target: "s", Value: 4, Delay: 20 * time.Second}}
		w, err := newWorld(s.WithDefaults(), nil)
		if err != nil {
			t.Fatal(err)
		}
		w.startEvents()
		var ev engine.Event
		for w.eng.NextUntil(engine.Time(c.at), &ev) {
			w.Handle(&w.eng, ev)
		}
		o := w.observe(&w.services[0])
		if o.Replicas != 4 || o.Ready != c.ready || !(o.Value > 0) {
			t.Errorf("%s (delay %v) at %v: observed %+v, want 4 replicas, %d ready, a value", c.metric, c.delay, c.at, o, c.ready)
		}
	}
}

// TestMoreCapacity: 003's "more capacity, mid-storm" on the HotOS toy
// (examples/more-capacity.yaml): waiting and +50 % stay stuck, doubling
// recovers, the CPU autoscaler with a realistic delay has not recovered by
// the end (270 s after the trigger).
func TestMoreCapacity(t *testing.T) {
	f := loadExample(t, "more-capacity.yaml")
	// Over three seeds, the share of demand served from a time to the end
	// (300 s): waiting serves under 10 % over the whole 270 s after the
	// outage; +50 % under 10 % in the last 60 s; doubling at least 90 %;
	// the CPU autoscaler, whose replicas reach double only near 240 s, is
	// still not back at the end: under 60 % in the last 60 s (42–46 %
	// measured).
	for _, seed := range []uint64{1, 2, 3} {
		for _, c := range []struct {
			run      string
			verdict  string
			from     float64
			min, max float64
		}{
			{"waiting", "metastable", 30, 0, 0.1},
			{"plus-50%", "metastable", 240, 0, 0.1},
			{"double", "recovered", 240, 0.9, 1.01},
			{"cpu-autoscaler", "metastable", 240, 0, 0.6},
		} {
			s := runSpec(t, f, c.run)
			s.Seed = seed
			r := mustRun(t, s, c.run)
			bins := r.Clients[0].Bins
			served := meanOver(bins, cliT, good, c.from, 300) / meanOver(bins, cliT, demand, c.from, 300)
			if r.Verdict != c.verdict || served < c.min || served >= c.max {
				t.Errorf("seed %d, %s: %s, %.0f%% of demand served from %.0f s; want %s, in [%.0f%%, %.0f%%)",
					seed, c.run, r.Verdict, 100*served, c.from, c.verdict, 100*c.min, 100*c.max)
			}
		}
	}
}

// TestDynamoDB2015: examples/dynamodb-2015.yaml. Doing nothing stays down.
// The operators' order recovers, and their admin commands get through while
// the membership requests are paused (≥ 90 % of them from 70 s to 90 s);
// once resumed after the capacity, the membership requests are served
// (≥ 90 % of demand from 155 s). Resuming before the capacity arrives
// relapses (< 10 % from 95 s to 145 s).
func TestDynamoDB2015(t *testing.T) {
	f := loadExample(t, "dynamodb-2015.yaml")
	share := func(r result.Result, client int, from, to float64) float64 {
		c := r.Clients[client].Bins
		return meanOver(c, cliT, good, from, to) / meanOver(c, cliT, demand, from, to)
	}
	nothing := mustRun(t, runSpec(t, f, "nothing"), "nothing")
	if nothing.Verdict != "metastable" {
		t.Errorf("nothing: %s, want metastable", nothing.Verdict)
	}
	right := mustRun(t, runSpec(t, f, "pause-capacity-resume"), "pause-capacity-resume")
	if right.Verdict != "recovered" || share(right, 1, 70, 90) < 0.9 || share(right, 0, 155, 300) < 0.9 {
		t.Errorf("pause → capacity → resume: %s; admin %.0f%% while paused, membership %.0f%% after; want recovered, ≥ 90%%, ≥ 90%%",
			right.Verdict, 100*share(right, 1, 70, 90), 100*share(right, 0, 155, 300))
	}
	if len(right.Actions) != 3 {
		t.Errorf("actions reported: %+v", right.Actions)
	}
	early := mustRun(t, runSpec(t, f, "resume-too-early"), "resume-too-early")
	if got := share(early, 0, 95, 145); got > 0.1 {
		t.Errorf("resume too early: %.0f%% of membership requests served from 95 s to 145 s, want a relapse (< 10%%)", 100*got)
	}
}
