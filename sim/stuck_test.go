package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// stuckFile: naive clients (3 attempts, no backoff, 1 s timeout) at 60 %
// of a database's capacity with an unbounded FIFO queue; a 5 s outage
// starts a storm of 3 attempts per request, which the queue keeps:
// metastable. sweep's TestJudgedSearchesMatchWholeRuns reads it too.
const stuckFile = "testdata/stuck.yaml"

// TestRunJudgedStopsOnlyWhenSettled: RunJudged stops a run whose
// database queue can no longer drain before the end, with the verdict the
// whole run gets; and it runs to the end, with RunWithin's very Result,
// every run in which something could still drain the queue or answer
// without it.
func TestRunJudgedStopsOnlyWhenSettled(t *testing.T) {
	base, err := scenario.Load(stuckFile)
	if err != nil {
		t.Fatal(err)
	}
	s0 := base.Runs[0].Scenario
	db := func(f func(v *scenario.Service)) func(*scenario.Scenario) {
		return func(s *scenario.Scenario) {
			s.Services = append([]scenario.Service(nil), s.Services...)
			f(&s.Services[0])
		}
	}
	cases := []struct {
		name     string
		change   func(*scenario.Scenario)
		stops    bool
		wantFull string // the whole run's verdict
	}{
		{"fifo queue, constant work", func(*scenario.Scenario) {}, true, "metastable"},
		{"expired work dropped", db(func(v *scenario.Service) { v.ExpiredDrop = true }), false, ""},
		{"exponential work (no shortest time)", db(func(v *scenario.Service) { v.ServiceTime.Kind = "exponential" }), false, ""},
		{"lifo queue", db(func(v *scenario.Service) { v.Queue.Discipline = "lifo" }), false, ""},
		{"bounded queue", db(func(v *scenario.Service) { v.Queue.Capacity = 100 }), false, ""},
		{"no storm (short outage)", func(s *scenario.Scenario) {
			s.Triggers = append([]scenario.Trigger(nil), s.Triggers...)
			s.Triggers[0].Duration = 100 * time.Millisecond
		}, false, ""},
		{"a second client the database does not serve", func(s *scenario.Scenario) {
			s.Services = append(append([]scenario.Service(nil), s.Services...), scenario.Service{Name: "cache", Workers: 4, ServiceTime: scenario.Dist{Kind: "constant", Mean: time.Millisecond}})
			c := s.Clients[0]
			c.Name, c.Target = "reader", "cache"
			s.Clients = append(append([]scenario.Client(nil), s.Clients...), c)
		}, false, ""},
		{"a front that falls back when the database fails", func(s *scenario.Scenario) {
			front := scenario.Service{Name: "front", Workers: 1000, ServiceTime: scenario.Dist{Kind: "constant", Mean: time.Millisecond},
				Calls: []scenario.Call{{Service: "db", Policy: s.Clients[0].Policy, Timeout: time.Second}}, OnCallFailure: "fallback"}
			s.Services = append([]scenario.Service{front}, s.Services...)
			s.Clients = append([]scenario.Client(nil), s.Clients...)
			s.Clients[0].Target, s.Clients[0].Timeout = "front", 5*time.Second
		}, false, ""},
		{"the same front without the fallback", func(s *scenario.Scenario) {
			front := scenario.Service{Name: "front", Workers: 1000, ServiceTime: scenario.Dist{Kind: "constant", Mean: time.Millisecond},
				Calls: []scenario.Call{{Service: "db", Policy: s.Clients[0].Policy, Timeout: time.Second}}}
			s.Services = append([]scenario.Service{front}, s.Services...)
			s.Clients = append([]scenario.Client(nil), s.Clients...)
			s.Clients[0].Target, s.Clients[0].Timeout = "front", 5*time.Second
		}, true, "metastable"},
		{"a capacity step late in the run", func(s *scenario.Scenario) {
			s.Actions = []scenario.Action{{At: 140 * time.Second, Kind: "capacity", Target: "db", Value: 4}}
		}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := s0
			c.change(&s)
			full, err := RunWithin(context.Background(), s, "full", nil, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			judged, err := RunJudged(context.Background(), s, "full", DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got := judged.StoppedS != nil; got != c.stops {
				t.Fatalf("stopped = %v (why: %s), want %v", got, judged.Why, c.stops)
			}
			if !c.stops {
				if !reflect.DeepEqual(judged, full) {
					t.Errorf("RunJudged's result differs from RunWithin's (verdict %s, %s)", judged.Verdict, full.Verdict)
				}
				return
			}
			if full.Verdict != c.wantFull || judged.Verdict != full.Verdict {
				t.Errorf("verdict: judged %s, whole run %s; want %s for both", judged.Verdict, full.Verdict, c.wantFull)
			}
			// The queue grows by at least 40 attempts/s from 25 s and can
			// start 50/s: it holds more than it can start before the end
			// from about 94 s on, or sooner.
			if *judged.StoppedS > 100 || judged.DurationS != *judged.StoppedS {
				t.Errorf("stopped at %v s (duration %v s) of %v s: want by about 94 s, duration = stop", *judged.StoppedS, judged.DurationS, full.DurationS)
			}
			if judged.RecoveryS != nil || float64(judged.Events) >= 0.7*float64(full.Events) {
				t.Errorf("recovery %v, events %d of %d: want null and under 70 %%", judged.RecoveryS, judged.Events, full.Events)
			}
			if n := len(judged.Clients[0].Bins); float64(n) != *judged.StoppedS/judged.BinS {
				t.Errorf("%d bins, want the %v s simulated", n, *judged.StoppedS)
			}
		})
	}
}

// TestRunJudgedAgreesOnRandomScenarios: over random two-tier scenarios
// (loads, outages, attempts, timeouts, service times, queue disciplines and
// bounds, fallbacks), a run that RunJudged stops early is one whose whole
// run ends metastable, and a run it does not stop gives RunWithin's very
// Result. Some of the scenarios must stop, or the test proves nothing.
func TestRunJudgedAgreesOnRandomScenarios(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	n := 150
	if testing.Short() {
		n = 30
	}
	stopped := 0
	for i := range n {
		dbWorkers := 1 + rng.IntN(4)
		st := time.Duration(20+rng.IntN(60)) * time.Millisecond
		capacity := float64(dbWorkers) / st.Seconds()
		rate := capacity * (0.4 + 0.55*rng.Float64())
		attempts := 2 + rng.IntN(3)
		queue := pick("", "", "queue: {capacity: 200}", "queue: {discipline: lifo}")
		fallback := pick("", "", "on_call_failure: fallback")
		y := fmt.Sprintf(`
name: r%d
duration: %ds
seed: %d
clients:
  - {name: app, target: front, arrivals: {kind: %s, rate: %.1f}, policy: {preset: naive, max_attempts: %d}, timeout: %dms}
services:
  - {name: front, workers: 1000, service_time: {kind: constant, mean: 1ms}, calls: [{service: db, policy: {preset: naive, max_attempts: 1}, timeout: %dms}], %s}
  - {name: db, workers: %d, service_time: {kind: %s, mean: %dms}, %s}
triggers:
  - {kind: outage, target: db, at: 10s, duration: %dms, mode: hold}
`, i, 60+rng.IntN(60), rng.IntN(1000), pick("poisson", "constant"), rate, attempts, 3000,
			500+rng.IntN(1000), fallback, dbWorkers, pick("constant", "constant", "uniform", "exponential"), st.Milliseconds(), queue,
			rng.IntN(10000))
		y = strings.ReplaceAll(y, ", }", "}")
		y = strings.ReplaceAll(y, "kind: uniform, mean: ", "kind: uniform, min: 1ms, max: ")
		f, err := scenario.Parse("random.yaml", []byte(y))
		if err != nil {
			t.Fatalf("%v\n%s", err, y)
		}
		s := f.Runs[0].Scenario
		full, err := RunWithin(context.Background(), s, "r", nil, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		judged, err := RunJudged(context.Background(), s, "r", DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case judged.StoppedS != nil:
			stopped++
			if full.Verdict != "metastable" {
				t.Errorf("scenario %d stopped at %v s as settled, but the whole run is %s (%s)\n%s", i, *judged.StoppedS, full.Verdict, full.Why, y)
			}
		case !reflect.DeepEqual(judged, full):
			t.Errorf("scenario %d: not stopped, yet its result differs from RunWithin's\n%s", i, y)
		}
	}
	if stopped == 0 {
		t.Errorf("none of %d random scenarios stopped early: the test checks nothing", n)
	}
	t.Logf("%d of %d random scenarios stopped early", stopped, n)
}
