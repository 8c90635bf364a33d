package analyze

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// The simulator's mechanisms in the fluid model (docs/analyze.md,
// "Mechanisms in the fluid model"), each against the simulator.

// runAll runs scenarios in parallel (two at a time) and fails on an error.
func runAll(t *testing.T, ss ...scenario.Scenario) []result.Result {
	t.Helper()
	out := make([]result.Result, len(ss))
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, s := range ss {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = sim.Run(context.Background(), s, s.Name, nil)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// meanOver is the mean of a bin series between from and to seconds.
func meanOver[B any](bins []B, t func(B) float64, v func(B) float64, from, to float64) float64 {
	sum, n := 0.0, 0
	for _, b := range bins {
		if t(b) >= from && t(b) < to {
			sum += v(b)
			n++
		}
	}
	return sum / float64(n)
}

func clientGoodput(r result.Result, from, to float64) float64 {
	return meanOver(r.Clients[0].Bins, func(b result.ClientBin) float64 { return b.T },
		func(b result.ClientBin) float64 { return b.Goodput }, from, to)
}

func serviceMean(r result.Result, v func(result.ServiceBin) float64, from, to float64) float64 {
	return meanOver(r.Services[0].Bins, func(b result.ServiceBin) float64 { return b.T }, v, from, to)
}

func parseScenario(t *testing.T, y string) scenario.Scenario {
	t.Helper()
	f, err := scenario.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return f.Runs[0].Scenario
}

func fluidOf(t *testing.T, s scenario.Scenario, client string) (Params, Thresholds) {
	t.Helper()
	p, err := FluidParams(s, client)
	if err != nil {
		t.Fatal(err)
	}
	th, err := StaticThresholds(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, th
}

// top is the stable equilibrium a collapsed service settles in.
func top(eq []Equilibrium) Equilibrium {
	var e Equilibrium
	for _, x := range eq {
		if x.Stable {
			e = x
		}
	}
	return e
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s: %.1f, want %.1f ± %.0f %%", what, got, want, 100*tol)
	} else {
		t.Logf("%s: %.1f, fluid %.1f (± %.0f %%)", what, got, want, 100*tol)
	}
}

// TestFluidParamsMechanisms: what each mechanism becomes in the model's
// parameters, and the ones it refuses, with their reason.
func TestFluidParamsMechanisms(t *testing.T) {
	const client = `{name: c, target: s, arrivals: {kind: poisson, rate: 10}, timeout: 1s}`
	for _, c := range []struct {
		service string
		want    string // the params' mechanism fields, or "error: …"
	}{
		{`{name: s, workers: 5, service_time: {mean: 100ms}, replicas: 3, queue: {capacity: 40}}`,
			"capacity 150 queue 120 replicas 3"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, replicas: 3, balancer: least-outstanding}`,
			"capacity 150 queue 0 replicas 3"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, cache: {hit_rate: 0.9}}`,
			"capacity 50 queue 0 hit 0.9"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, failure_cost: {refuse: 20ms, shed: 1s, expire: 1s, timeout: 1s, error: 1s}}`,
			"capacity 50 queue 0 refuse 20ms"},
		// A law that changes nothing is left out.
		{`{name: s, workers: 5, service_time: {mean: 100ms}, capacity_law: {kind: processor-sharing, cores: 8}}`,
			"capacity 50 queue 0"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, capacity_law: {kind: fixed, knee: 5, drop: 0.5}}`,
			"capacity 50 queue 0"},
		// Processor sharing: 2 cores of 20 threads; past 10 in service half speed.
		{`{name: s, workers: 20, service_time: {mean: 100ms}, capacity_law: {kind: processor-sharing, cores: 2, knee: 10, drop: 0.5}}`,
			"capacity 10 queue 0 law processor-sharing workers 20"},
		// Linear: 10 × 1 / (0.1 + 0.01 × 10) = 50.
		{`{name: s, workers: 10, service_time: {mean: 100ms}, capacity_law: {kind: linear, per_request: 10ms}}`,
			"capacity 50 queue 0 law linear workers 10"},
		// A fixed law with a curve: 10 workers at speed 0.4 = 40.
		{`{name: s, workers: 10, service_time: {mean: 100ms}, capacity_law: {curve: [{in_service: 2, speed: 1}, {in_service: 10, speed: 0.4}]}}`,
			"capacity 40 queue 0 law  workers 10"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, replicas: 2, crash: {queue: 10, restart: 1s}}`,
			"error: its replicas crash"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, hang: {probability: 0.1}}`,
			"error: its attempts hang"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, cache: {keys: 100, size: 10}}`,
			"error: its cache has keys"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, cache: {hit_rate: 0.5, latency: {mean: 2s}}}`,
			"error: its cache answers no sooner than the timeout"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, error_rate: 0.1, failure_cost: {error: 1ms}}`,
			"error: its error answers cost work"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, failure_cost: {refuse: 100ms}}`,
			"error: a refusal costs 100ms, no less than serving"},
		{`{name: s, workers: 5, service_time: {mean: 100ms}, replicas: 2, limiter: {kind: vegas}}`,
			"error: it has a concurrency limiter"},
	} {
		p, err := FluidParams(sc(t, client, c.service), "c")
		var got string
		if err != nil {
			got = "error: " + err.Error()
		} else {
			got = fmt.Sprintf("capacity %.4g queue %.0f", p.Capacity, p.QueueCap)
			if p.Replicas != 0 {
				got += fmt.Sprintf(" replicas %d", p.Replicas)
			}
			if p.HitRate != 0 {
				got += fmt.Sprintf(" hit %v", p.HitRate)
			}
			if p.RefuseCost != 0 {
				got += fmt.Sprintf(" refuse %v", p.RefuseCost)
			}
			if p.Law != nil {
				got += fmt.Sprintf(" law %s workers %d", p.Law.Kind, p.Workers)
			}
		}
		if strings.HasPrefix(c.want, "error: ") && strings.HasPrefix(got, "error: ") {
			if !strings.Contains(got, strings.TrimPrefix(c.want, "error: ")) {
				t.Errorf("%s:\n got %s\nwant %s", c.service, got, c.want)
			}
		} else if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.service, got, c.want)
		}
	}
}

// TestParamsValidateMechanisms: the mechanisms' parameters the model
// refuses, each naming its field.
func TestParamsValidateMechanisms(t *testing.T) {
	ok := Params{Capacity: 100, ServiceTime: 10 * time.Millisecond, Timeout: time.Second}
	for _, c := range []struct {
		set  func(p *Params)
		want string
	}{
		{func(p *Params) { p.Replicas = -1 }, "replicas -1"},
		{func(p *Params) { p.HitRate = 1 }, "hit rate 1"},
		{func(p *Params) { p.HitRate = math.NaN() }, "hit rate NaN"},
		{func(p *Params) { p.RefuseCost = 10 * time.Millisecond }, "refuse cost 10ms"},
		{func(p *Params) { p.Law = &scenario.CapacityLaw{Kind: "quadratic"} }, `capacity law "quadratic"`},
		{func(p *Params) { p.Law, p.ServiceTime = &scenario.CapacityLaw{Kind: "linear"}, 0 }, "needs a service time"},
		{func(p *Params) {
			p.Law = &scenario.CapacityLaw{Curve: []scenario.CurvePoint{{InService: 5, Speed: 1}, {InService: 5, Speed: 0.5}}}
		}, "curve point 1"},
	} {
		p := ok
		c.set(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", p, err, c.want)
		}
	}
	p := ok
	p.Replicas, p.HitRate, p.RefuseCost, p.Law, p.Workers = 3, 0.5, time.Millisecond, &scenario.CapacityLaw{Kind: "processor-sharing", Cores: 2}, 8
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}

// TestFluidLawMatchesFixed: the model with a capacity law, given the fixed
// law of Sim B (10 workers × 10 ms) through its state of attempts present,
// gives the thresholds and the equilibria's queues of the model without
// one. Tolerance 0.5 %: the two locate their fixed points differently
// (bisection on a grid against a closed form).
func TestFluidLawMatchesFixed(t *testing.T) {
	law := simB
	law.Law, law.Workers, law.Capacity = &scenario.CapacityLaw{Kind: "fixed"}, 10, 0
	a, err := StaticThresholds(simB)
	if err != nil {
		t.Fatal(err)
	}
	b, err := StaticThresholds(law)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(a.Collapse-b.Collapse) > 0.005*a.Collapse || math.Abs(a.Recovery-b.Recovery) > 0.005*a.Recovery {
		t.Errorf("with the fixed law %+v, without %+v", b, a)
	}
	for _, load := range []float64{300, 500, 900, 1100} {
		x, y := Equilibria(simB, load), Equilibria(law, load)
		if len(x) != len(y) {
			t.Errorf("load %v: %d equilibria with the law, %d without", load, len(y), len(x))
			continue
		}
		for i := range x {
			if math.Abs(x[i].Queue-y[i].Queue) > 0.5 || x[i].Stable != y[i].Stable || x[i].Collapsed != y[i].Collapsed {
				t.Errorf("load %v: equilibrium %d with the law %+v, without %+v", load, i, y[i], x[i])
			}
		}
	}
	// The derived capacity is the law's throughput with every worker busy.
	if got := law.withDefaults().Capacity; math.Abs(got-1000) > 1e-9 {
		t.Errorf("derived capacity %v, want 1000", got)
	}
}

// TestFluidCache: a look-aside cache with a fixed hit rate of 75 % in
// front of a database of 100 queries/s (10 workers × 100 ms), clients with
// 2 attempts and a 1 s timeout. The database sees a quarter of the first
// tries, so the model moves its thresholds by 1 / (1 − h) = 4: collapse at
// 400/s, recovery at 50 / 0.25 = 200/s. A 10 s flush (every lookup misses)
// at 20 s fills the database's queue past the timeout: at 120/s, in the
// model's stable region (without the cache it would be above capacity),
// the run recovers;
// at 300/s, vulnerable, it stays collapsed, and the collapsed goodput is
// the cache's hits, 225/s, as the model's collapsed state has it
// (tolerance 5 %: Poisson noise on about 7,000 hits in 30 s is 1 %).
func TestFluidCache(t *testing.T) {
	scenario := func(rate float64) scenario.Scenario {
		return parseScenario(t, fmt.Sprintf(`
name: cache-%v
duration: 90s
clients:
  - {name: app, target: db, arrivals: {kind: poisson, rate: %v}, policy: {preset: naive, max_attempts: 2}, timeout: 1s}
services:
  - {name: db, workers: 10, service_time: {kind: constant, mean: 100ms}, cache: {hit_rate: 0.75}}
triggers:
  - {kind: cache-flush, target: db, at: 20s, duration: 10s}
`, rate, rate))
	}
	low, high := scenario(120), scenario(300)
	p, th := fluidOf(t, high, "app")
	if math.Abs(th.Collapse-400) > 1 || math.Abs(th.Recovery-200) > 1 {
		t.Errorf("thresholds %+v, want collapse 400 and recovery 200", th)
	}
	rs := runAll(t, low, high)
	for i, c := range []struct {
		rate    float64
		region  Region
		verdict string
	}{{120, Stable, "recovered"}, {300, Vulnerable, "metastable"}} {
		if r := th.Classify(c.rate); r != c.region {
			t.Errorf("%v/s: the model's region %v, want %v", c.rate, r, c.region)
		}
		if rs[i].Verdict != c.verdict {
			t.Errorf("%v/s: the simulator's verdict %s (%s), want %s", c.rate, rs[i].Verdict, rs[i].Why, c.verdict)
		}
	}
	within(t, "healthy goodput at 120/s, 60–90 s", clientGoodput(rs[0], 60, 90), top(Equilibria(p, 120)).Goodput, 0.05)
	within(t, "collapsed goodput at 300/s, 60–90 s", clientGoodput(rs[1], 60, 90), top(Equilibria(p, 300)).Goodput, 0.05)
}

// TestFluidReplicas: Paper 08's Sim B served by 2 replicas of 5 workers,
// each with its own queue of 100, behind round-robin. The model splits the
// load evenly; its ramp's thresholds against the simulator's, read with
// the same rule, with TestFluidVersusSimulator's tolerance: within 10 %
// of the mean of 3 seeds, 15 % of each.
func TestFluidReplicas(t *testing.T) {
	f := loadExample(t, "paper08-sim-b.yaml")
	s := f.Runs[0].Scenario
	s.Services[0].Workers, s.Services[0].Replicas, s.Services[0].Queue.Capacity = 5, 2, 100
	p, err := FluidParams(s, "users")
	if err != nil {
		t.Fatal(err)
	}
	if p.Replicas != 2 || p.Capacity != 1000 || p.QueueCap != 200 {
		t.Errorf("params %+v", p)
	}
	fl, err := Ramp(p, simBRamp)
	if err != nil {
		t.Fatal(err)
	}
	var ss []scenario.Scenario
	for seed := range 3 {
		x := s
		x.Seed = uint64(seed + 1)
		ss = append(ss, x)
	}
	var collapse, recovery float64
	for i, r := range runAll(t, ss...) {
		if up := r.Services[0].Bins[10].ReplicasUp; up != 2 {
			t.Fatalf("seed %d: %v replicas up, want 2", i+1, up)
		}
		h := result.FindHysteresis(r.Clients[0].Bins)
		within(t, fmt.Sprintf("collapse, seed %d", i+1), h.Collapse, fl.Collapse, 0.15)
		within(t, fmt.Sprintf("recovery, seed %d", i+1), h.Recovery, fl.Recovery, 0.15)
		collapse += h.Collapse / 3
		recovery += h.Recovery / 3
	}
	within(t, "collapse, mean", collapse, fl.Collapse, 0.10)
	within(t, "recovery, mean", recovery, fl.Recovery, 0.10)
}

// TestFluidThrashing: examples/paper08-thrash.yaml, an API of 4 cores
// shared by 200 threads whose speed halves past 50 in service, at 90/s
// with 2 attempts. In the model its throughput is 200/s up to the knee and
// 100/s beyond it, so at 90/s it is vulnerable (recovery at 100 ÷ 2 =
// 50/s), and the same server without the knee is stable (recovery at
// 100/s); the simulator's runs are metastable and recovered. In the
// collapsed state the model offers 2 × 90 = 180 attempts/s and serves 100;
// the simulator, after the trigger (60–120 s), within 5 %.
func TestFluidThrashing(t *testing.T) {
	f := loadExample(t, "paper08-thrash.yaml")
	thrash, fixed := f.Runs[0].Scenario, f.Runs[1].Scenario
	p, th := fluidOf(t, thrash, "users")
	_, thFixed := fluidOf(t, fixed, "users")
	if r := th.Classify(90); r != Vulnerable {
		t.Errorf("thrashing at 90/s: %v (%+v), want vulnerable", r, th)
	}
	if r := thFixed.Classify(90); r != Stable {
		t.Errorf("fixed capacity at 90/s: %v (%+v), want stable", r, thFixed)
	}
	if math.Abs(th.Recovery-50) > 0.5 || math.Abs(thFixed.Recovery-100) > 1 || math.Abs(th.Collapse-200) > 2 {
		t.Errorf("thresholds: thrashing %+v, fixed %+v; want recovery 50 and 100, collapse 200", th, thFixed)
	}
	rs := runAll(t, thrash, fixed)
	if rs[0].Verdict != "metastable" || rs[1].Verdict != "recovered" {
		t.Errorf("the simulator's verdicts %s and %s, want metastable and recovered", rs[0].Verdict, rs[1].Verdict)
	}
	c := top(Equilibria(p, 90))
	offered := serviceMean(rs[0], func(b result.ServiceBin) float64 { return b.OfferedFirst + b.OfferedRetries }, 60, 120)
	served := serviceMean(rs[0], func(b result.ServiceBin) float64 { return b.Throughput }, 60, 120)
	within(t, "collapsed: attempts offered/s", offered, c.Offered, 0.05)
	within(t, "collapsed: attempts served/s", served, c.Offered*(1-c.Shed), 0.05)
}

// TestFluidLinear: Brooker's server (latency 1 s + 10 ms × concurrency,
// network exp(100 ms), timeout 3 s, 3 attempts). In the model the
// concurrency at equilibrium follows from Little's law, n = λ (1 + 0.01 n),
// so the latency 1 / (1 − 0.01 λ) passes the 2.8 s left by the network at
// about 64/s; the collapse comes a little before, where the spread of the
// latency makes retries add load. At 40/s it is vulnerable (recovery below
// 3 × 40 = 120 > 100, the most the law completes), as the spike runs of
// TestBrookerSpike are. On examples/brooker-ramp.yaml's way up (40 → 80/s
// over 25 s) the model's ramp collapses where the simulator's typically
// does: over 9 seeds, at least 6 collapse on the way up, their median
// collapse load is within 10 % of the model's and each within 15 % (the
// collapse of a system near its threshold is a random event: over seeds
// 1–15 the simulator's spread from 72.8 to 80.8/s, and 3 of 15 held to the
// top, against the model's 71.2/s). Both are read with result.FindHysteresis from
// 5 s on (before, the simulator's first answers, 1.9 s after the first
// requests, have not come back yet), and at the schedule's rate at the
// middle of the collapse's bin: a 1 s bin's measured demand has Poisson
// noise of ±8/s at 70/s.
func TestFluidLinear(t *testing.T) {
	f := loadExample(t, "brooker-ramp.yaml")
	s := f.Runs[0].Scenario
	p, th := fluidOf(t, s, "clients")
	if r := th.Classify(40); r != Vulnerable {
		t.Errorf("at 40/s: %v (%+v), want vulnerable", r, th)
	}
	if !(th.Collapse > 50 && th.Collapse < 64) || !(th.Recovery > 20 && th.Recovery < 33.4) {
		t.Errorf("thresholds %+v: want collapse in (50, 64) and recovery in (20, 33.4)", th)
	}
	fl, err := Ramp(p, RampSpec{From: 40, Peak: 80, Duration: 25 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var ss []scenario.Scenario
	for seed := range 9 {
		x := s
		x.Seed = uint64(seed + 1)
		ss = append(ss, x)
	}
	rate := func(t float64) float64 { return 40 + 1.6*(t+0.5) }
	fb := make([]result.ClientBin, len(fl.Bins))
	for i, b := range fl.Bins {
		fb[i] = result.ClientBin{T: b.T, Demand: b.Demand, Goodput: b.Goodput}
	}
	want := rate(result.FindHysteresis(fb[5:]).CollapseT)
	var loads []float64
	for i, r := range runAll(t, ss...) {
		h := result.FindHysteresis(r.Clients[0].Bins[5:])
		if h.CollapseT < 0 {
			continue // held to the top of the ramp
		}
		loads = append(loads, rate(h.CollapseT))
		within(t, fmt.Sprintf("collapse, seed %d (at %.0f s)", i+1, h.CollapseT), rate(h.CollapseT), want, 0.15)
	}
	if len(loads) < 6 {
		t.Fatalf("%d of 9 seeds collapsed on the way up, want at least 6", len(loads))
	}
	slices.Sort(loads)
	within(t, "median collapse", loads[len(loads)/2], want, 0.10)
}

// TestFluidCostlyRefusals: examples/costly-rejections.yaml, a service of
// 1,000/s (10 workers × 10 ms, a queue of 20) at 3,000/s for 30 s, one
// attempt. At its full queue the model serves X = μ (1 − x κ) / (1 − μ κ)
// with κ = refuse cost ÷ workers: 1,000/s when a refusal is free, 500/s
// when it costs 2 ms; the simulator's goodput during the trigger (35–58 s),
// within 5 %.
func TestFluidCostlyRefusals(t *testing.T) {
	f := loadExample(t, "costly-rejections.yaml")
	var ss []scenario.Scenario
	for _, r := range f.Runs {
		ss = append(ss, r.Scenario)
	}
	rs := runAll(t, ss...)
	for i, want := range []float64{1000, 500} {
		p, _ := fluidOf(t, ss[i], "users")
		c := top(Equilibria(p, 3000))
		if math.Abs(c.Goodput-want) > 1e-6*want {
			t.Errorf("%s: the model's goodput at 3,000/s %v, want %v", f.Runs[i].Name, c.Goodput, want)
		}
		within(t, f.Runs[i].Name+": goodput during the trigger", clientGoodput(rs[i], 35, 58), c.Goodput, 0.05)
	}
}

// BenchmarkLawThresholds: the thresholds of Brooker's server
// (examples/brooker-spike.yaml), found by bisection over the load.
func BenchmarkLawThresholds(b *testing.B) {
	f, err := scenario.Load("../examples/brooker-spike.yaml")
	if err != nil {
		b.Fatal(err)
	}
	p, err := FluidParams(f.Runs[0].Scenario, "clients")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := StaticThresholds(p); err != nil {
			b.Fatal(err)
		}
	}
}
