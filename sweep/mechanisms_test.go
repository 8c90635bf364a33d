package sweep

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// loadExample reads examples/NAME, keeping only the runs named (all
// without names).
func loadExample(t *testing.T, name string, runs ...string) scenario.File {
	t.Helper()
	f, err := scenario.Load(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) > 0 {
		var keep []scenario.RunSpec
		for _, want := range runs {
			for _, r := range f.Runs {
				if r.Name == want {
					keep = append(keep, r)
				}
			}
		}
		if len(keep) != len(runs) {
			t.Fatalf("%s: runs %q not all found", name, runs)
		}
		f.Runs = keep
	}
	return f
}

// TestPhaseHang: a hang trigger's duration grows by default; its factor,
// the hang probability, grows from 0 to at most 1 like an error
// probability, and probability 0 is no trigger in the same window.
func TestPhaseHang(t *testing.T) {
	f := loadExample(t, "hung-threads.yaml")
	p, err := NewPlan(f, Options{NoRamp: true})
	if err != nil {
		t.Fatal(err)
	}
	if ph := p.Runs[0].Phase; ph.Vary != VaryDuration || ph.Max != 80 || ph.Trigger.Kind != "hang" {
		t.Errorf("default: vary %s, max %v, trigger %s; want duration, 4 × 20 s, hang", ph.Vary, ph.Max, ph.Trigger.Kind)
	}
	p, err = NewPlan(f, Options{NoRamp: true, Vary: VaryFactor})
	if err != nil {
		t.Fatal(err)
	}
	rp := p.Runs[0]
	ph := rp.Phase
	if ph.Unit != "" || ph.Min != 0 || ph.Max != 1 || ph.Label() != "hang of api: hang probability" {
		t.Errorf("vary factor: unit %q, sizes %v to %v, label %q", ph.Unit, ph.Min, ph.Max, ph.Label())
	}
	for _, c := range []struct {
		size float64
		want scenario.Trigger
	}{
		{0.3, scenario.Trigger{Kind: "hang", Target: "api", At: 20 * time.Second, Duration: 20 * time.Second, Factor: 0.3, Release: 30 * time.Second}},
		{0, scenario.Trigger{Kind: "load", At: 20 * time.Second, Duration: 20 * time.Second, Factor: 1}},
	} {
		s := rp.ProbeScenario(500, c.size)
		if len(s.Triggers) != 1 || s.Triggers[0] != c.want {
			t.Errorf("size %v: triggers %+v, want %+v", c.size, s.Triggers, c.want)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("size %v: %v", c.size, err)
		}
	}
	var oe *OptionError
	if _, err := NewPlan(f, Options{NoRamp: true, Vary: VaryFactor, Max: 2}); !errors.As(err, &oe) || oe.Option != "max" || !strings.Contains(err.Error(), "a hang probability is at most 1") {
		t.Errorf("max 2: %v", err)
	}
}

// TestPhaseCacheFlush: a flush of a keyed cache is instantaneous, so its
// keys grow (0 to the cache's keys, whole numbers) and its duration may
// not; a cache with a fixed hit rate misses while the flush lasts, so its
// duration grows and it has no keys.
func TestPhaseCacheFlush(t *testing.T) {
	f := loadExample(t, "hotos-cache.yaml", "flushed", "flushed-stormguard")
	if v := PhaseVaries(f, Options{}); v[0] != VaryKeys || v[1] != VaryKeys {
		t.Errorf("PhaseVaries = %q, want keys, keys", v)
	}
	p, err := NewPlan(f, Options{NoRamp: true})
	if err != nil {
		t.Fatal(err)
	}
	rp := p.Runs[0]
	ph := rp.Phase
	if ph.Vary != VaryKeys || ph.Unit != " keys" || ph.Min != 0 || ph.Max != 100000 || ph.Resolution != 200 || ph.SizeText(5000) != "5000 keys" {
		t.Errorf("plan: vary %s, unit %q, sizes %v to %v by %v", ph.Vary, ph.Unit, ph.Min, ph.Max, ph.Resolution)
	}
	if s := rp.ProbeScenario(2000, 5000); s.Triggers[0].Keys != 5000 || s.Triggers[0].Kind != "cache-flush" {
		t.Errorf("size 5000: %+v", s.Triggers)
	}
	if s := rp.ProbeScenario(2000, 0); s.Triggers[0].Kind != "load" || s.Triggers[0].Factor != 1 || s.Triggers[0].At != 20*time.Second {
		t.Errorf("size 0 (no flush): %+v", s.Triggers)
	}
	for _, c := range []struct {
		o      Options
		option string // "" for a plan error
		want   string
	}{
		{Options{NoRamp: true, Vary: VaryDuration}, "", "a cache-flush of a keyed cache (db has 100000 keys) is instantaneous"},
		{Options{NoRamp: true, Max: 1.5}, "max", "a whole number of keys, at most the cache's 100000"},
		{Options{NoRamp: true, Max: 200000}, "max", "at most the cache's 100000"},
		{Options{NoRamp: true, Resolution: 0.5}, "resolution", "a whole number ≥ 1"},
	} {
		_, err := NewPlan(f, c.o)
		var oe *OptionError
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.option != "") != errors.As(err, &oe) || c.option != "" && oe.Option != c.option {
			t.Errorf("%+v: %v, want %q (option %q)", c.o, err, c.want, c.option)
		}
	}
	// The warm run has no trigger: the default outage, whose keys cannot grow.
	if _, err := NewPlan(loadExample(t, "hotos-cache.yaml", "warm"), Options{NoRamp: true, Vary: VaryKeys}); err == nil || !strings.Contains(err.Error(), "vary keys grows a cache-flush trigger's keys; the trigger is outage") {
		t.Errorf("vary keys on an outage: %v", err)
	}
	hit := f
	hit.Runs = []scenario.RunSpec{f.Runs[0]}
	hit.Runs[0].Scenario.Services = []scenario.Service{f.Runs[0].Scenario.Services[0]}
	hit.Runs[0].Scenario.Services[0].Cache = &scenario.Cache{HitRate: 0.9}
	if _, err := NewPlan(hit, Options{NoRamp: true, Vary: VaryKeys}); err == nil || !strings.Contains(err.Error(), "the cache of db has no keys") {
		t.Errorf("vary keys on a hit-rate cache: %v", err)
	}
	if p, err := NewPlan(hit, Options{NoRamp: true}); err != nil || p.Runs[0].Phase.Vary != VaryDuration {
		t.Errorf("a hit-rate cache's flush: %v, want vary duration", err)
	}
}

// TestPhaseCacheFlushSearch: the HotOS cache at 1000/s, a third of what it
// serves warm: flushing its most popular keys leaves the naive run stuck
// (the refills time out), stormguard's defenses recover from any flush.
// The grid is coarse (10 000 keys), to keep the test short.
func TestPhaseCacheFlushSearch(t *testing.T) {
	f := loadExample(t, "hotos-cache.yaml", "flushed", "flushed-stormguard")
	p, err := NewPlan(f, Options{NoRamp: true, Loads: []float64{1000}, Resolution: 10000, After: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	naive, sg := res.Runs[0].Phase.Columns[0], res.Runs[1].Phase.Columns[0]
	t.Logf("naive: tips at %v keys, disturbed from %v", show(naive.Tips), show(naive.Disturbs))
	if naive.Tips == nil || *naive.Tips == 0 || *naive.Tips > 50000 {
		t.Errorf("naive at 1000/s: tipped by %v keys, want a flush of 10000–50000 of the most popular", show(naive.Tips))
	}
	if naive.Overloaded() || naive.Probes[0].Size != 0 || naive.Probes[0].Verdict != "stable" {
		t.Errorf("naive without a flush: %+v, want stable", naive.Probes[0])
	}
	if sg.Tips != nil {
		t.Errorf("stormguard at 1000/s: tipped by %v keys", *sg.Tips)
	}
}

// TestRampDropsActions: a ramp has no trigger, so the runbook's steps,
// timed for it, are dropped; its autoscalers stay, and so do the actions
// of a phase search's runs, whose trigger keeps its time.
func TestRampDropsActions(t *testing.T) {
	p, err := NewPlan(loadExample(t, "dynamodb-2015.yaml", "pause-capacity-resume"), Options{Loads: []float64{500}})
	if err != nil {
		t.Fatal(err)
	}
	rp := p.Runs[0]
	if n := len(rp.RampScenario().Actions); n != 0 {
		t.Errorf("the ramp keeps %d actions", n)
	}
	if n := len(rp.ProbeScenario(500, 10).Actions); n != 3 {
		t.Errorf("a phase run keeps %d actions, want the run's 3", n)
	}
	q, err := NewPlan(loadExample(t, "more-capacity.yaml", "cpu-autoscaler"), Options{NoPhase: true})
	if err != nil {
		t.Fatal(err)
	}
	if q.Runs[0].RampScenario().Services[0].Autoscale == nil {
		t.Error("the ramp lost the autoscaler")
	}
}
