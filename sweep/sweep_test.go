package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// tinyYAML is a small system that tips over: a service of 200/s (4
// workers × 20 ms) behind a queue of 0.5 s of work, clients that time out
// after 200 ms and retry once at once.
const tinyYAML = `
name: tiny
clients:
  - name: app
    target: db
    arrivals: {rate: 100}
    policy: {preset: naive, max_attempts: 2}
    timeout: 200ms
services:
  - name: db
    workers: 4
    service_time: {mean: 20ms}
    queue: {capacity: 100}
triggers:
  - {kind: outage, target: db, at: 3s, duration: 2s}
runs:
  - name: naive
  - name: stormguard
    set: {clients.app.policy: stormguard, services.db.defenses: stormguard}
`

// tinyOptions is a small grid: 8 jobs of a few short runs each.
var tinyOptions = Options{From: 100, To: 260, Step: 40, Hold: 2 * time.Second,
	Loads: []float64{80, 120, 160}, Max: 4, Resolution: 0.5, After: 10 * time.Second}

func tinyPlan(t *testing.T, o Options) Plan {
	t.Helper()
	f, err := scenario.Parse("tiny.yaml", []byte(tinyYAML))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeterministicAcrossWorkersAndShards: one worker, many workers, and
// three shards merged in any order give the same bytes.
func TestDeterministicAcrossWorkersAndShards(t *testing.T) {
	p := tinyPlan(t, tinyOptions)
	ctx := context.Background()
	one, err := Run(ctx, p, Exec{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := encode(t, one)
	many, err := Run(ctx, p, Exec{Workers: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, many); !bytes.Equal(got, want) {
		t.Errorf("5 workers differ from 1:\n%s\n%s", got, want)
	}
	var parts []Partial
	for i := 1; i <= 3; i++ {
		pt, err := Execute(ctx, p, Exec{Workers: 2, Shard: Shard{Index: i, Count: 3}})
		if err != nil {
			t.Fatal(err)
		}
		// A part survives its trip through a file.
		var back Partial
		if err := json.Unmarshal(encode(t, pt), &back); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, back)
	}
	if n := len(parts[0].Ramps) + len(parts[0].Columns); n == 0 || n == len(p.Jobs()) {
		t.Errorf("shard 1/3 holds %d of %d jobs", n, len(p.Jobs()))
	}
	slices.Reverse(parts)
	merged, err := Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, merged); !bytes.Equal(got, want) {
		t.Errorf("3 shards merged differ from one run:\n%s\n%s", got, want)
	}
	// Sanity: the sweep saw something.
	naive := one.Runs[0]
	if naive.Ramp == nil || len(naive.Ramp.Steps) != 9 || naive.Phase == nil || len(naive.Phase.Columns) != 3 {
		t.Fatalf("naive: %+v", naive)
	}
	if one.Simulations < 2+3*2 || one.VirtualS <= 0 {
		t.Errorf("simulations %d, virtual %v s", one.Simulations, one.VirtualS)
	}
}

func TestMergeRejects(t *testing.T) {
	p := tinyPlan(t, Options{From: 100, To: 200, Step: 50, Hold: 2 * time.Second, NoPhase: true})
	ctx := context.Background()
	part := func(p Plan, i, n int) Partial {
		pt, err := Execute(ctx, p, Exec{Shard: Shard{Index: i, Count: n}})
		if err != nil {
			t.Fatal(err)
		}
		return pt
	}
	a, b := part(p, 1, 2), part(p, 2, 2)
	other := part(tinyPlan(t, Options{From: 100, To: 200, Step: 50, Hold: 2 * time.Second, NoPhase: true, Seed: 9}), 2, 2)
	three := part(p, 2, 3)
	bad := a
	bad.Format = "something else"
	for _, c := range []struct {
		name  string
		parts []Partial
		want  string
	}{
		{"nothing", nil, "no partial results"},
		{"missing", []Partial{a}, "shard 2/2 missing"},
		{"twice", []Partial{a, a, b}, "shard 1/2 is given twice"},
		{"other plan", []Partial{a, other}, "comes from another sweep"},
		{"other split", []Partial{a, three}, "split the sweep differently"},
		{"format", []Partial{bad, b}, "format"},
	} {
		_, err := Merge(c.parts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Merge(b, a); err != nil {
		t.Errorf("both shards: %v", err)
	}
}

// TestPlanDefaults: the defaults of the shipped example follow from its
// capacity (15 workers × 50 ms = 300/s) and its 1 s timeout and 10 s
// outage.
func TestPlanDefaults(t *testing.T) {
	f, err := scenario.Load(filepath.Join("..", "examples", "hotos-sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 2 || p.Key == "" {
		t.Fatalf("plan %+v", p)
	}
	r := p.Runs[0]
	if r.Client != "app" || r.Target != "db" || r.Capacity != 300 || r.Seed != 1 {
		t.Errorf("run %+v", r)
	}
	if *r.Ramp != (RampPlan{From: 70, To: 380, Step: 10, HoldS: 20}) {
		t.Errorf("ramp %+v", *r.Ramp)
	}
	ph := r.Phase
	wantLoads := []float64{80, 100, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300}
	if !slices.Equal(ph.Loads, wantLoads) {
		t.Errorf("loads %v, want %v", ph.Loads, wantLoads)
	}
	if ph.Vary != VaryDuration || ph.Min != 0 || ph.Max != 40 || ph.Resolution != 0.1 || ph.AfterS != 120 || ph.Trigger.Kind != "outage" {
		t.Errorf("phase %+v", ph)
	}
	if ph.Sizes() != 400 || ph.Size(3) != 0.3 || ph.Size(400) != 40 {
		t.Errorf("grid: %d steps, size(3) = %v, size(400) = %v", ph.Sizes(), ph.Size(3), ph.Size(400))
	}
	// Another seed is another plan.
	q, err := NewPlan(f, Options{Seed: 2})
	if err != nil || q.Key == p.Key || q.Runs[0].Seed != 2 {
		t.Errorf("seed 2: key %s (was %s), seed %d, %v", q.Key, p.Key, q.Runs[0].Seed, err)
	}
}

func TestPlanErrors(t *testing.T) {
	f, err := scenario.Parse("tiny.yaml", []byte(tinyYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Client: "web"}, `no client "web" (have app)`},
		{Options{Vary: "size"}, `vary "size" is not one of duration, factor, add, keys`},
		{Options{Vary: VaryAdd}, "vary add grows a latency trigger"},
		{Options{Vary: VaryFactor}, "vary factor grows a load, errors or hang trigger"},
		{Options{From: 300, To: 100}, "want 0 < from < to"},
		{Options{Hold: time.Second}, "shorter than two bins"},
		{Options{Loads: []float64{100, -5}}, "loads must be positive"},
		{Options{Max: 1, Resolution: -1}, "resolution"},
		{Options{NoRamp: true, NoPhase: true}, "nothing to do"},
	} {
		_, err := NewPlan(f, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
	closed := strings.Replace(tinyYAML, "arrivals: {rate: 100}", "arrivals: {kind: closed, users: 10, think: {mean: 1s}}", 1)
	f, err = scenario.Parse("closed.yaml", []byte(closed))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(f, Options{}); err == nil || !strings.Contains(err.Error(), "closed arrivals") {
		t.Errorf("closed-loop client: %v", err)
	}
}

func TestThresholds(t *testing.T) {
	steps := func(goodput ...float64) []Step {
		loads := []float64{100, 200, 300, 400, 300, 200, 100}
		out := make([]Step, len(loads))
		for i, l := range loads {
			b := "up"
			if i > 3 {
				b = "down"
			}
			out[i] = Step{Branch: b, Load: l, Demand: l, Goodput: goodput[i]}
		}
		return out
	}
	for _, c := range []struct {
		name               string
		steps              []Step
		collapse, recovery *float64
	}{
		{"loop", steps(100, 200, 100, 0, 0, 0, 95), ptr(300), ptr(100)},
		{"no collapse", steps(100, 200, 290, 380, 290, 200, 100), nil, nil},
		{"no recovery", steps(100, 200, 100, 0, 0, 0, 0), ptr(300), nil},
		{"straight back", steps(100, 200, 290, 100, 290, 200, 100), ptr(400), ptr(300)},
	} {
		col, rec := thresholds(c.steps)
		if !eqPtr(col, c.collapse) || !eqPtr(rec, c.recovery) {
			t.Errorf("%s: collapse %v recovery %v, want %v %v", c.name, show(col), show(rec), show(c.collapse), show(c.recovery))
		}
	}
}

// TestHotOSThresholds measures the shipped example's hysteresis loop:
// naive clients collapse near the capacity (300/s) and recover only near
// half of it (every request is tried twice), stormguard's defaults do not
// collapse. Tolerances: one or two 10/s steps of the ramp.
func TestHotOSThresholds(t *testing.T) {
	f, err := scenario.Load(filepath.Join("..", "examples", "hotos-sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, Options{NoPhase: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	naive, sg := res.Runs[0].Ramp, res.Runs[1].Ramp
	if naive.Collapse == nil || naive.Recovery == nil {
		t.Fatalf("naive: collapse %v, recovery %v", show(naive.Collapse), show(naive.Recovery))
	}
	t.Logf("naive: collapse %v/s, recovery %v/s", *naive.Collapse, *naive.Recovery)
	if c := *naive.Collapse; c < 300 || c > 330 {
		t.Errorf("naive collapse at %v/s, want 300–330 (capacity 300)", c)
	}
	if r := *naive.Recovery; r < 120 || r > 150 {
		t.Errorf("naive recovery at %v/s, want 120–150 (capacity ÷ 2 attempts)", r)
	}
	if sg.Collapse != nil {
		t.Errorf("stormguard collapsed at %v/s", *sg.Collapse)
	}
}

// TestHotOSPhase bisects the outage that tips the example over at 200/s:
// past about 1 s of outage the held backlog (2 × 200/s) is more than the
// queue drains before the clients time out.
func TestHotOSPhase(t *testing.T) {
	f, err := scenario.Load(filepath.Join("..", "examples", "hotos-sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, Options{NoRamp: true, Loads: []float64{100, 200}, Max: 8, Resolution: 0.25, After: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	cols := res.Runs[0].Phase.Columns
	if cols[0].Tips != nil {
		t.Errorf("naive at 100/s: tipped by a %v s outage, want never (below recovery)", *cols[0].Tips)
	}
	if tip := cols[1].Tips; tip == nil || *tip < 0.75 || *tip > 2 {
		t.Errorf("naive at 200/s: tipped by %v, want 0.75–2 s", show(tip))
	}
	for _, c := range res.Runs[1].Phase.Columns {
		if c.Tips != nil {
			t.Errorf("stormguard at %v/s: tipped by %v s", c.Load, *c.Tips)
		}
	}
}

func TestProgress(t *testing.T) {
	p := tinyPlan(t, Options{From: 100, To: 200, Step: 50, Hold: 2 * time.Second, Loads: []float64{100}, Max: 2, Resolution: 1, After: 5 * time.Second})
	var last Progress
	calls := 0
	res, err := Run(context.Background(), p, Exec{Progress: func(pr Progress) { last, calls = pr, calls+1 }})
	if err != nil {
		t.Fatal(err)
	}
	if last.Done != last.Total || last.Total != 4 || last.Simulations != res.Simulations || calls < res.Simulations {
		t.Errorf("last progress %+v after %d calls; %d simulations", last, calls, res.Simulations)
	}
}

func TestCancel(t *testing.T) {
	p := tinyPlan(t, tinyOptions)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, p, Exec{}); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("cancelled: %v", err)
	}
}

func TestExecuteNeedsScenarios(t *testing.T) {
	p := tinyPlan(t, tinyOptions)
	var back Plan
	if err := json.Unmarshal(encode(t, p), &back); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), back, Exec{}); err == nil || !strings.Contains(err.Error(), "NewPlan") {
		t.Errorf("a plan read back from JSON: %v", err)
	}
}
