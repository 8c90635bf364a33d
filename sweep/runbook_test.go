package sweep

import (
	"context"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// TestAddCapacityMoreCapacity: the HotOS toy of examples/more-capacity.yaml
// stuck at 280/s after its outage. The capacity that, added at 40 s, brings
// it back is between +50 % (which stays stuck, as 003 says) and 2.5×
// (doubling recovers). Its grid is coarse (steps of 0.25) to keep the test
// short; the bisection's probes bracket the answer.
func TestAddCapacityMoreCapacity(t *testing.T) {
	f := loadExample(t, "more-capacity.yaml", "waiting")
	p, err := NewPlan(f, Options{NoRamp: true, NoPhase: true, CapacityAt: 40 * time.Second, CapacityResolution: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	cs := res.Runs[0].AddCapacity
	if cs == nil || cs.Factor == nil {
		t.Fatalf("no factor found: %+v", cs)
	}
	t.Logf("capacity to add at 40 s: %v× (probes %s)", *cs.Factor, probesText(cs.Probes))
	if f := *cs.Factor; f <= 1.5 || f > 2.5 {
		t.Errorf("factor %v, want above 1.5 (+50%% stays stuck) and at most 2.5", f)
	}
	for _, pr := range cs.Probes {
		if rec := pr.Verdict != "metastable"; rec != (pr.Size >= *cs.Factor) {
			t.Errorf("probe %v×: %s, but the answer is %v×", pr.Size, pr.Verdict, *cs.Factor)
		}
	}
	if res.Simulations != cs.Simulations || cs.Simulations > bisectAtMost(cs.Sizes()) || cs.Simulations != len(cs.Probes) {
		t.Errorf("%d simulations (result %d), %d probes; at most %d", cs.Simulations, res.Simulations, len(cs.Probes), bisectAtMost(cs.Sizes()))
	}
}

// TestLatestMoreCapacity: doubling the stuck toy's database brings it back
// if it comes soon enough: the latest time is found after the outage
// (30 s) and not before 40 s (doubling at 40 s recovers), and doubling one
// step later stays stuck to the end of the run.
func TestLatestMoreCapacity(t *testing.T) {
	f := loadExample(t, "more-capacity.yaml", "waiting")
	p, err := NewPlan(f, Options{NoRamp: true, NoPhase: true, LatestFactor: 2, LatestResolution: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l := p.Runs[0].Latest; l.FromS != 30 || l.ToS != 300 {
		t.Fatalf("plan %+v, want from the end of the outage (30 s) to the end of the run (300 s)", l)
	}
	res, err := Run(context.Background(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	ls := res.Runs[0].Latest
	if ls.LatestS == nil || ls.Unneeded {
		t.Fatalf("no latest time: %+v", ls)
	}
	t.Logf("latest time to double: %v s (probes %s)", *ls.LatestS, probesText(ls.Probes))
	if *ls.LatestS < 40 {
		t.Errorf("latest %v s, want at least 40 s", *ls.LatestS)
	}
	later := false
	for _, pr := range ls.Probes {
		if rec := pr.Verdict != "metastable"; rec != (pr.Size <= *ls.LatestS) {
			t.Errorf("doubled at %v s: %s, but the latest is %v s", pr.Size, pr.Verdict, *ls.LatestS)
		}
		later = later || math.Abs(pr.Size-(*ls.LatestS+ls.ResolutionS)) < 1e-9
	}
	if !later {
		t.Errorf("no probe one step after the latest time: %+v", ls.Probes)
	}
}

// TestCompareDynamoDB: examples/dynamodb-2015.yaml over three seeds. The
// operators' order (pause, add capacity, resume) comes back when the
// capacity has arrived; resuming too early relapses in every seed and
// ranks after it: its storage servers are back at the same time, but the
// operators' own requests fail until about 165 s (the operators' order
// lets them through from the pause on), and a run is back when its last
// client is (sim/result's Judge). Doing nothing never recovers and ranks
// last.
func TestCompareDynamoDB(t *testing.T) {
	f := loadExample(t, "dynamodb-2015.yaml")
	p, err := NewPlan(f, Options{NoRamp: true, NoPhase: true, CompareSeeds: 3})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), p, Exec{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Compare
	if c == nil || len(c.Rows) != 3 || res.Simulations != 9 {
		t.Fatalf("comparison %+v after %d simulations", c, res.Simulations)
	}
	var order []string
	for _, r := range c.Rows {
		order = append(order, r.Run)
		t.Logf("%s: %d/%d/%d stable/recovered/metastable, to recover %v median, %v worst, %d relapses; recovery_s median %v",
			r.Run, r.Stable, r.Recovered, r.Metastable, show(r.MedianS), show(r.WorstS), r.Relapses, show(r.MedianRecoveryS))
	}
	if got := strings.Join(order, " > "); got != "pause-capacity-resume > resume-too-early > nothing" {
		t.Errorf("ranking %s", got)
	}
	right, early, nothing := c.Rows[0], c.Rows[1], c.Rows[2]
	if right.Recovered != 3 || right.Relapses != 0 || early.Recovered != 3 || early.Relapses != 3 || nothing.Metastable != 3 || nothing.MedianS != nil {
		t.Errorf("verdicts: %+v / %+v / %+v", right, early, nothing)
	}
	// The operators' order is back once the capacity serves (150 s): 130 s
	// after the slowdown began at 20 s, to within a few bins; resuming
	// early, once the operators' requests succeed again, 5 to 30 s later.
	if right.MedianS == nil || math.Abs(*right.MedianS-130) > 10 {
		t.Errorf("%s: back %v s after the incident began, want 120–140", right.Run, show(right.MedianS))
	}
	if early.MedianS == nil || right.MedianS == nil || *early.MedianS < *right.MedianS+5 || *early.MedianS > *right.MedianS+30 {
		t.Errorf("%s: back %v s after the incident began, want 5–30 s after %s (%v s)", early.Run, show(early.MedianS), right.Run, show(right.MedianS))
	}
}

// TestRecoveredAt: the moment recoveredAt reads off a result is the one
// the verdict's why states ("again from N s"), for recoveries after the
// trigger ended (at its very end too), before it ended (a runbook), after a
// relapse, and without a trigger.
func TestRecoveredAt(t *testing.T) {
	from := regexp.MustCompile(`again from (\d+) s`)
	cases := []struct{ file, run string }{
		{"hotos-toy.yaml", "stormguard"},
		{"more-capacity.yaml", "double"},
		{"dynamodb-2015.yaml", "pause-capacity-resume"},
		{"dynamodb-2015.yaml", "resume-too-early"},
		{"paper08-sim-b.yaml", "paper08-sim-b"},
		{"hung-threads.yaml", "server-timeout"},
	}
	for _, c := range cases {
		f := loadExample(t, c.file, c.run)
		s := f.Runs[0].Scenario
		r, err := sim.Run(context.Background(), s, c.run, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := from.FindStringSubmatch(r.Why)
		if r.Verdict != "recovered" || m == nil {
			t.Fatalf("%s %s: %s (%s), want a recovery", c.file, c.run, r.Verdict, r.Why)
		}
		want, _ := strconv.ParseFloat(m[1], 64)
		if got := recoveredAt(r, s); math.Abs(got-want) > 1e-6 {
			t.Errorf("%s %s: recoveredAt %v, the verdict says %v (%s)", c.file, c.run, got, want, r.Why)
		}
	}
}

// TestRunbookOptionErrors: each bad value of a runbook question is an
// *OptionError naming its option.
func TestRunbookOptionErrors(t *testing.T) {
	f := loadExample(t, "more-capacity.yaml", "waiting")
	for _, c := range []struct {
		o      Options
		option string
		want   string
	}{
		{Options{CapacityAt: 300 * time.Second}, "capacity-at", "before the end of the run (5m)"},
		{Options{CapacityAt: -time.Second}, "capacity-at", "want a time after 0"},
		{Options{CapacityAt: time.Second, CapacityMax: 1}, "capacity-max", "above 1"},
		{Options{CapacityAt: time.Second, CapacityMax: 2e6}, "capacity-max", "at most 1e+06"},
		{Options{CapacityAt: time.Second, CapacityResolution: 1e-9}, "capacity-resolution", "at most 2²⁰ steps"},
		{Options{LatestFactor: 0.5}, "capacity-latest", "above 1"},
		{Options{LatestFactor: 2, LatestResolution: time.Nanosecond}, "latest-resolution", "at most 2²⁰ steps"},
		{Options{CompareSeeds: 1001}, "compare-seeds", "want 1 to 1000 seeds"},
		{Options{CompareSeeds: -1}, "compare-seeds", "want 1 to 1000"},
		{Options{CompareSeeds: 3, Seed: math.MaxUint64 - 1}, "compare-seeds", "do not fit in 64 bits"},
	} {
		c.o.NoRamp, c.o.NoPhase = true, true
		_, err := NewPlan(f, c.o)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an OptionError on %s: %q", c.o, err, c.option, c.want)
		}
	}
	// A trigger that lasts to the end leaves no time to search.
	_, err := NewPlan(loadExample(t, "dynamodb-2015.yaml", "nothing"), Options{NoRamp: true, NoPhase: true, LatestFactor: 2})
	if err == nil || !strings.Contains(err.Error(), "the trigger lasts until 5m, the end of the run") {
		t.Errorf("latest on dynamodb: %v", err)
	}
}

// TestRunbookShards: the runbook questions split over shards and merge to
// the bytes of the whole, like the ramp and the phase search.
func TestRunbookShards(t *testing.T) {
	p := tinyPlan(t, Options{NoRamp: true, NoPhase: true, CapacityAt: 4 * time.Second, CapacityResolution: 0.5,
		LatestFactor: 2, LatestResolution: 2 * time.Second, CompareSeeds: 2})
	ctx := context.Background()
	whole, err := Run(ctx, p, Exec{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := encode(t, whole)
	var parts []Partial
	for i := 1; i <= 3; i++ {
		pt, err := Execute(ctx, p, Exec{Workers: 1, Shard: Shard{Index: i, Count: 3}})
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadPartial(strings.NewReader(string(encode(t, pt))))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, back)
	}
	merged, err := Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, merged); string(got) != string(want) {
		t.Errorf("merged shards differ from the whole:\n%s\n%s", got, want)
	}
	if len(whole.Runs) != 2 || whole.Runs[0].AddCapacity == nil || whole.Runs[0].Latest == nil || whole.Compare == nil || len(whole.Compare.Rows) != 2 {
		t.Fatalf("result %+v", whole)
	}
	// 2 runs × (capacity search + latest-time search) + 2 runs × 2 seeds.
	if n := len(p.Jobs()); n != 8 {
		t.Errorf("%d jobs, want 8", n)
	}
	est := Estimate(p, Exec{Workers: 1})
	if !(est.Events > 0) || !strings.Contains(est.EventsDriver, "(--capacity-at)") && !strings.Contains(est.EventsDriver, "(--capacity-latest)") {
		t.Errorf("estimate %+v", est)
	}
}

// probesText writes probes as "size: verdict, …".
func probesText(ps []Probe) string {
	var out []string
	for _, p := range ps {
		out = append(out, strconv.FormatFloat(p.Size, 'g', 6, 64)+": "+p.Verdict)
	}
	return strings.Join(out, ", ")
}
