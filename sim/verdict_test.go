package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// mm1 is a single-worker service with exponential service times at rate mu
// per second, called by one Poisson client at rate lambda whose policy makes
// at most attempts tries without backoff, each abandoned after timeout.
func mm1(lambda, mu float64, attempts int, timeout, duration time.Duration, seed uint64) Scenario {
	p, _ := retry.Preset("naive")
	p.MaxAttempts = attempts
	return Scenario{
		Name: "mm1", Duration: duration, Seed: seed,
		Clients: []Client{{Name: "app", Target: "db", Arrivals: Arrivals{Kind: "poisson", Rate: lambda},
			Policy: PolicySpec{Preset: "naive", Policy: p}, Timeout: timeout}},
		Services: []Service{{Name: "db", Workers: 1, ServiceTime: Dist{Kind: "exponential", Mean: time.Duration(float64(time.Second) / mu)}}},
	}
}

// storm is a small system that a trigger or a load episode can tip, and
// that stays tipped: a worker that serves 10 requests/s (constant 100 ms),
// clients that make 3 attempts without backoff, each abandoned after 2 s,
// and a queue of 40 (4 s of work). Amplification 3 makes it vulnerable above
// 3.3 requests/s; at 5/s it is stuck at 15 attempts/s once tipped, while a
// queue of 20 (the timeout) almost never forms by chance. Once the load
// falls below 3.3/s the backlog drains within seconds.
func storm(rate float64, duration time.Duration, seed uint64) Scenario {
	s := mm1(rate, 10, 3, 2*time.Second, duration, seed)
	s.Services[0].ServiceTime = Dist{Kind: "constant", Mean: 100 * time.Millisecond}
	s.Services[0].Queue.Capacity = 40
	return s
}

// stormAt is storm scaled up by x: x workers, a queue x times as long and
// x times the rate, so the same storm at x times the counts.
func stormAt(x int, rate float64, duration time.Duration, seed uint64) Scenario {
	s := storm(rate*float64(x), duration, seed)
	s.Services[0].Workers = x
	s.Services[0].Queue.Capacity = 40 * x
	return s
}

// oracle labels a run from its series by rules independent of the
// verdict's: long-window means with wide margins, for scenarios built to be
// unambiguous. It returns "" when the run does not fit its intended label
// clearly (the corpus is then wrong, not the verdict).
func oracle(r Result) string {
	c := r.Clients[0]
	mean := func(from, to float64, f func(ClientBin) float64) float64 {
		sum, n := 0.0, 0
		for _, b := range c.Bins {
			if b.T >= from && b.T < to {
				sum += f(b)
				n++
			}
		}
		return sum / float64(max(n, 1))
	}
	demand := func(b ClientBin) float64 { return b.Demand }
	good := func(b ClientBin) float64 { return b.Goodput }
	// The tail is the last fifth of the time the load lasted: a run whose
	// load stops is judged on what it did while requests still came.
	end := 0.0
	for _, b := range c.Bins {
		if b.Demand > 0 {
			end = b.T + r.BinS
		}
	}
	tail := mean(0.8*end, end, good) / mean(0.8*end, end, demand)
	worst := 1.0
	for t := 0.0; t+10 <= end; t += 5 {
		if d := mean(t, t+10, demand); d > 0 {
			worst = min(worst, mean(t, t+10, good)/d)
		}
	}
	switch {
	case c.Total.Failed == 0 && tail > 0.9:
		return "stable"
	case tail > 0.95 && worst < 0.5:
		return "recovered"
	case tail < 0.5:
		return "metastable"
	}
	return ""
}

// TestVerdictCorpus runs a corpus of labelled runs — low and high rates,
// with and without triggers, stable, recovered and metastable, several
// seeds each — and asserts every label, the collapse's start and the
// recovery time where the construction fixes them.
func TestVerdictCorpus(t *testing.T) {
	type tc struct {
		name     string
		build    func(seed uint64) Scenario
		seeds    int
		want     string
		collapse [2]float64 // accepted range of collapse_s (recovered, metastable)
		recovery [2]float64 // accepted range of recovery_s (recovered)
		why      string     // a phrase the why must hold, if any
	}
	cases := []tc{
		{name: "mm1 9.3/s rho 0.93 no retries", seeds: 20, want: "stable",
			build: func(s uint64) Scenario { return mm1(9.3, 10, 1, time.Minute, 300*time.Second, s) }},
		{name: "mm1 1/s rho 0.5", seeds: 5, want: "stable",
			build: func(s uint64) Scenario { return mm1(1, 2, 1, 30*time.Second, 300*time.Second, s) }},
		{name: "mm1 930/s rho 0.93", seeds: 3, want: "stable",
			build: func(s uint64) Scenario { return mm1(930, 1000, 3, time.Second, 60*time.Second, s) }},
		{name: "low rate, 10 s refusal outage", seeds: 5, want: "recovered", collapse: [2]float64{58, 72}, recovery: [2]float64{0, 5},
			build: func(s uint64) Scenario {
				sc := mm1(5, 10, 2, 2*time.Second, 200*time.Second, s)
				sc.Triggers = []Trigger{{Kind: "outage", Target: "db", At: 60 * time.Second, Duration: 10 * time.Second, Mode: "drop"}}
				return sc
			}},
		{name: "low rate storm after 20 s at 30 % capacity", seeds: 5, want: "metastable", collapse: [2]float64{58, 82},
			build: func(s uint64) Scenario {
				sc := storm(5, 300*time.Second, s)
				sc.Triggers = []Trigger{{Kind: "capacity", Target: "db", At: 60 * time.Second, Duration: 20 * time.Second, Factor: 0.3}}
				return sc
			}},
		{name: "no trigger: a load episode at 60 s, load falls at 215 s", seeds: 5, want: "recovered", collapse: [2]float64{58, 72}, recovery: [2]float64{150, 175},
			build: func(s uint64) Scenario {
				sc := storm(5, 300*time.Second, s)
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 60 * time.Second, Rate: 15}, {At: 70 * time.Second, Rate: 5}, {At: 215 * time.Second, Rate: 2}}
				return sc
			}},
		{name: "no trigger: a load episode that never ends its storm", seeds: 3, want: "metastable", collapse: [2]float64{58, 72},
			build: func(s uint64) Scenario {
				sc := storm(5, 200*time.Second, s)
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 60 * time.Second, Rate: 15}, {At: 70 * time.Second, Rate: 5}}
				return sc
			}},
		{name: "a collapse long after the last trigger", seeds: 5, want: "recovered", collapse: [2]float64{98, 112}, recovery: [2]float64{45, 75},
			build: func(s uint64) Scenario {
				sc := storm(5, 250*time.Second, s)
				sc.Triggers = []Trigger{{Kind: "outage", Target: "db", At: 10 * time.Second, Duration: 2 * time.Second, Mode: "drop"}}
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 100 * time.Second, Rate: 15}, {At: 110 * time.Second, Rate: 5}, {At: 150 * time.Second, Rate: 2}}
				return sc
			}},
		{name: "no trigger: load falls to zero while collapsed", seeds: 3, want: "metastable", collapse: [2]float64{58, 72}, why: "still down when its load stopped at 18",
			build: func(s uint64) Scenario {
				sc := storm(5, 250*time.Second, s)
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 60 * time.Second, Rate: 15}, {At: 70 * time.Second, Rate: 5}, {At: 180 * time.Second, Rate: 0}}
				return sc
			}},
		{name: "after a trigger: load falls to zero while collapsed", seeds: 3, want: "metastable", collapse: [2]float64{58, 82}, why: "still down when its load stopped at 15",
			build: func(s uint64) Scenario {
				sc := storm(5, 200*time.Second, s)
				sc.Triggers = []Trigger{{Kind: "capacity", Target: "db", At: 60 * time.Second, Duration: 20 * time.Second, Factor: 0.3}}
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 150 * time.Second, Rate: 0}}
				return sc
			}},
		{name: "load falls to zero after it recovered", seeds: 3, want: "recovered", collapse: [2]float64{58, 72}, recovery: [2]float64{0, 5},
			build: func(s uint64) Scenario {
				sc := mm1(5, 10, 2, 2*time.Second, 200*time.Second, s)
				sc.Triggers = []Trigger{{Kind: "outage", Target: "db", At: 60 * time.Second, Duration: 10 * time.Second, Mode: "drop"}}
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 150 * time.Second, Rate: 0}}
				return sc
			}},
		{name: "high rate, no trigger: a load episode at 60 s, load falls at 215 s", seeds: 3, want: "recovered", collapse: [2]float64{58, 72}, recovery: [2]float64{150, 165},
			build: func(s uint64) Scenario {
				sc := stormAt(100, 5, 300*time.Second, s)
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 60 * time.Second, Rate: 1500}, {At: 70 * time.Second, Rate: 500}, {At: 215 * time.Second, Rate: 200}}
				return sc
			}},
		{name: "high rate, no trigger: a load episode that never ends its storm", seeds: 2, want: "metastable", collapse: [2]float64{58, 72},
			build: func(s uint64) Scenario {
				sc := stormAt(100, 5, 200*time.Second, s)
				sc.Clients[0].Arrivals.Schedule = []RatePoint{{At: 60 * time.Second, Rate: 1500}, {At: 70 * time.Second, Rate: 500}}
				return sc
			}},
		{name: "brooker ramp 40 → 80 → 0", seeds: 3, want: "metastable", collapse: [2]float64{10, 30}, why: "still down when its load stopped",
			build: func(s uint64) Scenario {
				sc := brookerRamp
				sc.Seed = s
				return sc
			}},
		{name: "hotos toy naive", seeds: 3, want: "metastable", collapse: [2]float64{19, 32},
			build: func(s uint64) Scenario { return hotos(s, false) }},
		{name: "hotos toy stormguard", seeds: 3, want: "recovered", collapse: [2]float64{19, 32}, recovery: [2]float64{0, 3},
			build: func(s uint64) Scenario { return hotos(s, true) }},
	}
	brookerRamp = runSpec(t, loadExample(t, "brooker-ramp.yaml"), "no-backoff")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= uint64(c.seeds); seed++ {
				r, err := Run(context.Background(), c.build(seed), c.name, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := oracle(r); got != c.want {
					t.Fatalf("seed %d: the corpus is wrong: the oracle labels the run %q, want %q", seed, got, c.want)
				}
				if r.Verdict != c.want {
					t.Errorf("seed %d: verdict %s (%s), want %s", seed, r.Verdict, r.Why, c.want)
					continue
				}
				if c.want == "stable" {
					continue
				}
				if !strings.Contains(r.Why, c.why) {
					t.Errorf("seed %d: why %q lacks %q", seed, r.Why, c.why)
				}
				if r.CollapseS == nil || *r.CollapseS < c.collapse[0] || *r.CollapseS > c.collapse[1] {
					t.Errorf("seed %d: collapse_s %v, want within %v (%s)", seed, fmtPtr(r.CollapseS), c.collapse, r.Why)
				}
				if c.want == "recovered" && (r.RecoveryS == nil || *r.RecoveryS < c.recovery[0] || *r.RecoveryS > c.recovery[1]) {
					t.Errorf("seed %d: recovery_s %v, want within %v (%s)", seed, fmtPtr(r.RecoveryS), c.recovery, r.Why)
				}
			}
		})
	}
}

// brookerRamp is examples/brooker-ramp.yaml's no-backoff run, loaded by
// TestVerdictCorpus.
var brookerRamp Scenario

func fmtPtr(f *float64) string {
	if f == nil {
		return "null"
	}
	return fmt.Sprintf("%.1f", *f)
}

// hotos is the HotOS '21 toy (examples/hotos-toy.yaml) built in code.
func hotos(seed uint64, defended bool) Scenario {
	p, _ := retry.Preset("naive")
	p.MaxAttempts = 2
	s := Scenario{Name: "hotos", Duration: 120 * time.Second, Seed: seed,
		Clients: []Client{{Name: "app", Target: "db", Arrivals: Arrivals{Kind: "poisson", Rate: 280},
			Policy: PolicySpec{Preset: "naive", Policy: p}, Timeout: time.Second}},
		Services: []Service{{Name: "db", Workers: 15, ServiceTime: Dist{Kind: "constant", Mean: 50 * time.Millisecond}}},
		Triggers: []Trigger{{Kind: "outage", Target: "db", At: 20 * time.Second, Duration: 10 * time.Second, Mode: "hold"}},
	}
	if defended {
		sg, _ := retry.Preset("stormguard")
		s.Clients[0].Policy = PolicySpec{Preset: "stormguard", Policy: sg}
		s.Clients[0].PropagateDeadline = true
		s.Services[0].Defenses = "stormguard"
	}
	return s
}

// TestWilsonUpper checks the interval against hand-computed values.
func TestWilsonUpper(t *testing.T) {
	for _, c := range []struct{ s, m, z, lo, hi float64 }{
		{0, 20, 3, 0.25, 0.35},   // nothing succeeded: clearly below 0.9
		{20, 20, 3, 1, 1.000001}, // all succeeded
		{45, 50, 3, 0.96, 0.99},  // 90 % observed: cannot reject 0.9
	} {
		if got := wilsonUpper(c.s, c.m, c.z); got < c.lo || got > c.hi {
			t.Errorf("wilsonUpper(%v, %v, %v) = %.4f, want in [%v, %v]", c.s, c.m, c.z, got, c.lo, c.hi)
		}
	}
}

// TestJudgeRules judges hand-made series of 1 s bins, 100 requests each
// unless the segment says otherwise, to pin the rules on bins without
// evidence (nothing arrived, nothing ended) and on relapses.
func TestJudgeRules(t *testing.T) {
	// seg: bins [from, to) in which n requests arrived and ok of them
	// succeeded; n − ok failed unless pending, in which case they are still
	// in flight at the end.
	type seg struct {
		from, to, n, ok int
		pending         bool
	}
	build := func(n int, trig [][2]float64, segs ...seg) Result {
		r := Result{BinS: 1, DurationS: float64(n), TriggerS: trig}
		bins := make([]ClientBin, n)
		for i := range bins {
			bins[i].T = float64(i)
		}
		for _, s := range segs {
			for b := s.from; b < s.to; b++ {
				bins[b].Demand, bins[b].ArrivedOK = float64(s.n), float64(s.ok)
				if !s.pending {
					bins[b].ArrivedFailed = float64(s.n - s.ok)
				}
			}
		}
		r.Clients = []ClientSeries{{Bins: bins}}
		return r
	}
	type want struct {
		verdict                  string
		collapse, first, recover float64 // -1: null
		why                      string
	}
	tests := []struct {
		name string
		r    Result
		want want
	}{
		{"load stops while collapsed", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 60, 100, 0, false}),
			want{"metastable", 30, 30, -1, "still down when its load stopped at 60 s"}},
		{"load stops while collapsed, the last requests still in flight", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 60, 100, 0, false}, seg{60, 65, 5, 0, true}),
			want{"metastable", 30, 30, -1, "still down when its load stopped at 65 s"}},
		{"load stops after it came back", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 40, 100, 0, false}, seg{40, 60, 100, 100, false}),
			want{"recovered", 30, 30, 10, "again from 40 s, 10.0 s after the collapse began"}},
		{"a lull with no load is no evidence of recovery", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 40, 100, 0, false}, seg{50, 80, 100, 100, false}),
			want{"recovered", 30, 30, 20, "again from 50 s"}},
		{"a lull, then the collapse goes on", build(100, nil, seg{0, 30, 100, 100, false}, seg{30, 40, 100, 0, false}, seg{50, 100, 100, 0, false}),
			want{"metastable", 30, 30, -1, "had not come back by the end"}},
		{"a collapse in the last judged bins is not a recovery after them", build(140, nil, seg{0, 135, 100, 100, false}, seg{135, 137, 100, 0, false}, seg{137, 140, 100, 0, true}),
			want{"metastable", 135, 135, -1, "had not come back by the end"}},
		{"a relapse during a trigger counts from the first collapse", build(120, [][2]float64{{20, 110}},
			seg{0, 22, 100, 100, false}, seg{22, 40, 100, 0, false}, seg{40, 50, 100, 100, false}, seg{50, 60, 100, 0, false}, seg{60, 120, 100, 100, false}),
			want{"recovered", 50, 22, 38, "collapsed at 22 s (during a trigger), came back, and collapsed again at 50 s; requests succeeded ≥ 90% again from 60 s, 38.0 s after the first collapse began"}},
		{"two triggers: the second collapse is its own incident", build(120, [][2]float64{{20, 25}, {50, 110}},
			seg{0, 22, 100, 100, false}, seg{22, 40, 100, 0, false}, seg{40, 50, 100, 100, false}, seg{50, 60, 100, 0, false}, seg{60, 120, 100, 100, false}),
			want{"recovered", 50, 50, 10, "collapsed at 50 s (during a trigger); requests succeeded ≥ 90% again from 60 s, 10.0 s after the collapse began"}},
	}
	opt := func(f *float64) float64 {
		if f == nil {
			return -1
		}
		return *f
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			judge(&r, Scenario{Verdict: Verdict{Healthy: DefaultHealthy}})
			got := want{r.Verdict, opt(r.CollapseS), opt(r.FirstCollapseS), opt(r.RecoveryS), tt.want.why}
			if got != tt.want || !strings.Contains(r.Why, tt.want.why) {
				t.Errorf("got %+v (%s), want %+v", got, r.Why, tt.want)
			}
		})
	}
}

// TestVerdictRelapse: examples/dynamodb-2015.yaml's two runbooks are back
// when the added capacity serves (150 s), 126 s after the collapse at about
// 24 s. Resuming too early relapses at about 93 s; its recovery_s counts
// from the incident's first collapse like the operators' order, so the two
// agree within 5 s (from the relapse it would be about 57 s), and only the
// early one is marked as relapsed.
func TestVerdictRelapse(t *testing.T) {
	f := loadExample(t, "dynamodb-2015.yaml")
	for seed := uint64(1); seed <= 2; seed++ {
		var rec [2]float64
		for i, name := range []string{"pause-capacity-resume", "resume-too-early"} {
			s := runSpec(t, f, name)
			s.Seed = seed
			r := mustRun(t, s, name)
			if r.Verdict != "recovered" || r.FirstCollapseS == nil || r.CollapseS == nil || r.RecoveryS == nil {
				t.Fatalf("seed %d %s: %s (%s), want recovered", seed, name, r.Verdict, r.Why)
			}
			relapsed := *r.FirstCollapseS < *r.CollapseS
			if relapsed != (i == 1) || relapsed != strings.Contains(r.Why, "collapsed again") {
				t.Errorf("seed %d %s: first collapse %v, collapse %v (%s): want a relapse only when resuming early", seed, name, *r.FirstCollapseS, *r.CollapseS, r.Why)
			}
			if *r.FirstCollapseS < 20 || *r.FirstCollapseS > 30 {
				t.Errorf("seed %d %s: first collapse at %v s, want 20–30", seed, name, *r.FirstCollapseS)
			}
			rec[i] = *r.RecoveryS
		}
		if rec[0] < 115 || rec[0] > 135 || math.Abs(rec[1]-rec[0]) > 5 {
			t.Errorf("seed %d: recovery_s %v (operators' order), %v (resume too early): want 115–135, within 5 s of each other", seed, rec[0], rec[1])
		}
	}
}
