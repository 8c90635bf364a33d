package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/scenario"
)

// TestPlanOptionLimits: options that would overflow the simulator's clock
// or make an endless grid are an *OptionError naming the option, not a
// negative duration somewhere downstream.
func TestPlanOptionLimits(t *testing.T) {
	f, err := scenario.Parse("tiny.yaml", []byte(tinyYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o      Options
		option string
		want   string
	}{
		{Options{Hold: 1000000 * time.Hour, NoPhase: true}, "hold", "hold 1000000h: 81 steps of it last longer than the simulator's clock holds"},
		{Options{From: 100, To: 200, Step: 50, Hold: 1000000 * time.Hour, NoPhase: true}, "hold", "hold 1000000h: 5 steps of it"},
		{Options{NoRamp: true, After: time.Duration(math.MaxInt64), Max: 40}, "after", "lasts longer than the simulator's clock holds"},
		{Options{NoRamp: true, Max: 1e10}, "max", "max 1e+10s: longer than the simulator's clock allows a trigger"},
		{Options{NoRamp: true, Max: 3e9}, "max", "max 833333h20m: longer than the simulator's clock allows a trigger"},
		{Options{NoRamp: true, Max: 4, Resolution: 1e-9}, "resolution", "resolution 1e-09: want > 0 and at most 2²⁰ steps"},
		{Options{From: 1, To: 1e9, Step: 1, NoPhase: true}, "ramp", "ramp 1:1e+09:1: more than 10000 steps"},
		{Options{NoRamp: true, Loads: make([]float64, 10001)}, "loads", "loads 0: loads must be positive"},
	} {
		_, err := NewPlan(f, c.o)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an OptionError on %s: %q", c.o, err, c.option, c.want)
		}
	}
	many := make([]float64, MaxSteps+1)
	for i := range many {
		many[i] = float64(i + 1)
	}
	if _, err := NewPlan(f, Options{NoRamp: true, Loads: many}); err == nil || !strings.Contains(err.Error(), "more than 10000 loads") {
		t.Errorf("10001 loads: %v", err)
	}
}

// TestExecuteRefusesHugeSweeps: a sweep beyond its limits is refused
// before any simulation, naming the part and the option that drive it.
func TestExecuteRefusesHugeSweeps(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		e    Exec
		want string
	}{
		{"loads", Options{NoRamp: true, Loads: []float64{1e9}, Max: 4, Resolution: 0.5, After: 10 * time.Second}, Exec{Workers: 1},
			"the sweep would need about 6.08 TB of memory (run stormguard's phase search at 1e9/s (--loads), up to 9 simulations: triggers.0 (an outage in hold mode) keeps 1e9/s × triggers.0.duration 4s of messages); the limit is 4 GB"},
		{"loads events", Options{NoRamp: true, Loads: []float64{1e9}, Max: 4, Resolution: 0.5, After: 10 * time.Second}, Exec{Workers: 1, Limits: sim.Limits{Memory: math.Inf(1)}},
			"the sweep would simulate about 1.2e12 events (run naive's phase search at 1e9/s (--loads), up to 9 simulations: clients.app.arrivals.rate 1e9/s × duration 17s); the limit is 2e9"},
		{"ramp", Options{From: 100, To: 1e9, NoPhase: true}, Exec{},
			"the sweep would simulate about 8.7e12 events (run naive's ramp, 101 steps of 20s up to 1e9/s (--ramp, --hold)"},
		{"shard", Options{From: 100, To: 1e9, NoPhase: true}, Exec{Shard: Shard{Index: 2, Count: 2}},
			"shard 2/2 of the sweep would simulate about 4.3e12 events (run stormguard's ramp"},
		{"workers", Options{NoRamp: true, Loads: []float64{1e9}, Max: 4, Resolution: 0.5, After: 10 * time.Second}, Exec{Workers: 2},
			"the sweep would need about 12.2 TB of memory (run stormguard's phase search at 1e9/s (--loads), up to 9 simulations: triggers.0 (an outage in hold mode) keeps 1e9/s × triggers.0.duration 4s of messages; 2 simulations at once (--workers)); the limit is 4 GB"},
		{"lowered", tinyOptions, Exec{Limits: sim.Limits{Events: 1000}}, "the sweep would simulate about"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := tinyPlan(t, c.o)
			sims := 0
			c.e.Progress = func(pr Progress) { sims = pr.Simulations }
			start := time.Now()
			_, err := Execute(t.Context(), p, c.e)
			var le *sim.LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a *sim.LimitError %q", err, c.want)
			}
			if sims != 0 {
				t.Errorf("%d simulations ran before the refusal", sims)
			}
			if took := time.Since(start); took > hostspeed.Scale(100*time.Millisecond) {
				t.Errorf("the refusal took %v", took)
			}
		})
	}
	// The same sweep within raised limits is not refused by the estimate.
	p := tinyPlan(t, tinyOptions)
	if err := check(p, Exec{}); err != nil {
		t.Errorf("the tiny sweep: %v", err)
	}
}

// TestEstimateBoundsTheSweep: the estimate is at least the simulations
// a sweep really runs, and their virtual time.
func TestEstimateBoundsTheSweep(t *testing.T) {
	p := tinyPlan(t, tinyOptions)
	res, err := Run(t.Context(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	virtual := 0.0 // seconds the estimate counts
	for _, rp := range p.Runs {
		virtual += rp.RampScenario().Duration.Seconds()
		for _, l := range rp.Phase.Loads {
			virtual += float64(probesAtMost(rp.Phase.Sizes())) * rp.ProbeScenario(l, rp.Phase.Max).Duration.Seconds()
		}
	}
	if virtual < res.VirtualS || virtual > 4*res.VirtualS {
		t.Errorf("the estimate counts %v s of virtual time; the sweep ran %v s", virtual, res.VirtualS)
	}
	for _, r := range res.Runs {
		for _, c := range r.Phase.Columns {
			if n := probesAtMost(p.Runs[0].Phase.Sizes()); len(c.Probes) > n {
				t.Errorf("run %s at %v: %d probes, more than the %d counted", r.Name, c.Load, len(c.Probes), n)
			}
		}
	}
}

// TestExecuteStopsSoonAfterCancel: a long sweep (within its limits)
// returns within half a second of its context's end.
func TestExecuteStopsSoonAfterCancel(t *testing.T) {
	p := tinyPlan(t, Options{From: 1000, To: 30000, Step: 1000, Hold: time.Minute, NoPhase: true})
	if err := check(p, Exec{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Execute(ctx, p, Exec{})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	bound := time.Duration(float64(500*time.Millisecond) * hostspeed.Measure())
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
			t.Errorf("err = %v", err)
		}
		if took := time.Since(start); took > bound {
			t.Errorf("returned %v after the cancel, want within %v", took, bound)
		}
	case <-time.After(hostspeed.Scale(60 * time.Second)):
		t.Fatal("not done 60 s after the cancel")
	}
}

func TestReadPartial(t *testing.T) {
	p := tinyPlan(t, tinyOptions)
	part, err := Execute(t.Context(), p, Exec{Shard: Shard{Index: 1, Count: 3}})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.MarshalIndent(part, "", "  ")
	back, err := ReadPartial(bytes.NewReader(good))
	if err != nil || back.Plan.Key != p.Key || len(back.Ramps) != len(part.Ramps) || len(back.Columns) != len(part.Columns) {
		t.Fatalf("read back: %v", err)
	}
	edit := func(old, new string) []byte { return []byte(strings.Replace(string(good), old, new, 1)) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty: not a shard's part"},
		{"not JSON", []byte("shard"), "not a shard's part: invalid character"},
		{"two values", append(append([]byte(nil), good...), "{}"...), "more follows the JSON object"},
		{"format", edit(PartialFormat, "other/1"), `format "other/1"`},
		{"shard", edit(`"count": 3`, `"count": 300000`), "want 1 ≤ I ≤ N ≤ 100000"},
		{"key", edit(`"key": "`+p.Key, `"key": "`), "the plan has no key"},
		{"ramp step", edit(`"step": 40`, `"step": 0`), "want 0 < from < to and step > 0"},
		{"ramp steps", edit(`"step": 40`, `"step": 1e-9`), "more than 10000 steps"},
		{"resolution", edit(`"resolution": 0.5`, `"resolution": 1e-300`), "more than 1048576 sizes"},
		{"loads", edit(`"loads": [`, `"loads": [1e9, `), "ascending"},
		{"vary", edit(`"vary": "duration"`, `"vary": "size"`), `vary "size"`},
		{"ramp of no run", edit(`"run": 0,`, `"run": 5,`), "has no ramp in the plan"},
	} {
		_, err := ReadPartial(bytes.NewReader(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", c.name, err, c.want)
		}
	}
	// The size limit: refused once MaxPartialSize bytes are read.
	huge := append([]byte(`{"format": "`), bytes.Repeat([]byte("x"), MaxPartialSize)...)
	if _, err := ReadPartial(bytes.NewReader(huge)); err == nil || !strings.Contains(err.Error(), "larger than 64 MiB") {
		t.Errorf("a part of 64 MiB: %v", err)
	}
}

func FuzzParseShard(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"1/3", "2/4", "0/3", "4/3", "1/0", "a/b", "3", "-1/2", "", "1/100000", "1/100001", "+1/2", "1/9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "shard ") {
				t.Fatalf("ParseShard(%q): %v", s, err)
			}
			return
		}
		if sh.Index < 1 || sh.Index > sh.Count || sh.Count > MaxShards {
			t.Fatalf("ParseShard(%q) = %v", s, sh)
		}
		if back, err := ParseShard(sh.String()); err != nil || back != sh {
			t.Fatalf("ParseShard(%q) = %v, which reads back as %v, %v", s, sh, back, err)
		}
	})
}

// FuzzReadPartial: whatever the bytes, a Partial or a one-line error, and
// a Partial that passes merges or fails cleanly.
func FuzzReadPartial(f *testing.F) {
	quickMinimize()
	p, err := NewPlan(mustParse(f), Options{From: 100, To: 180, Step: 40, Hold: 2 * time.Second, Loads: []float64{120}, Max: 2, Resolution: 1, After: 4 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	part, err := Execute(context.Background(), p, Exec{Shard: Shard{Index: 1, Count: 2}})
	if err != nil {
		f.Fatal(err)
	}
	data, _ := json.Marshal(part)
	f.Add(data)
	f.Add([]byte(`{"format": "stormguard-sweep-partial/1", "shard": {"index": 1, "count": 1}, "plan": {"key": "k", "runs": [{"name": "a"}]}}`))
	f.Add([]byte(`{"shard": {"index": 1, "count": -1}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pt, err := ReadPartial(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		if err := pt.Validate(); err != nil {
			t.Fatalf("read but not valid: %v", err)
		}
		Merge(pt)
	})
}

func mustParse(f *testing.F) scenario.File {
	f.Helper()
	file, err := scenario.Parse("tiny.yaml", []byte(tinyYAML))
	if err != nil {
		f.Fatal(err)
	}
	return file
}

// quickMinimize bounds, unless -fuzzminimizetime is given, how long the
// fuzzer spends minimizing each input that finds new coverage (60 s by
// default, with 0 execs/s meanwhile): parts are kilobytes long.
func quickMinimize() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		flag.Set("test.fuzzminimizetime", "3s")
	}
}

// TestEstimateCountsWorkersTogether: the memory of a sweep's simulations
// that run at once adds up, every mechanism's included: with a keyed cache
// of 10⁶ keys (17 MB a simulation), four workers are estimated at four
// simulations' worth, and the heap the sweep reaches with them stays
// below the estimate. Issue 26: sweep --workers 4 reached 840 MiB on a
// scenario whose caches the estimate did not count.
func TestEstimateCountsWorkersTogether(t *testing.T) {
	y := strings.Replace(tinyYAML, "    queue: {capacity: 100}\n", "    queue: {capacity: 100}\n    cache: {keys: 1000000, size: 500000}\n", 1)
	f, err := scenario.Parse("cache.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, Options{NoRamp: true, Loads: []float64{50, 100, 150, 200}, Max: 2, Resolution: 1, After: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	one, four := Estimate(p, Exec{Workers: 1}), Estimate(p, Exec{Workers: 4})
	if one.Memory < 17e6 || math.Abs(four.Memory-4*one.Memory) > 1 {
		t.Errorf("one worker %v B (%s), four %v B: want at least the cache's 17 MB, and four times it", one.Memory, one.MemoryDriver, four.Memory)
	}
	// The estimate counts what the simulations hold, not the garbage the
	// collector has yet to take: measure the live heap each collection
	// marks (runtime/metrics' /gc/heap/live:bytes), collecting often.
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	base := live[0].Value.Uint64()
	peak := base
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				metrics.Read(s)
				peak = max(peak, s[0].Value.Uint64())
			}
		}
	}()
	_, err = Run(t.Context(), p, Exec{Workers: 4})
	close(done)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if got := float64(peak - base); got > four.Memory {
		t.Errorf("the sweep reached %.0f MB with 4 workers, above the estimate's %.0f MB (%s)", got/1e6, four.Memory/1e6, four.MemoryDriver)
	} else {
		t.Logf("4 workers: measured %.0f MB, estimated %.0f MB", got/1e6, four.Memory/1e6)
	}
}
