package sweep

import (
	"context"
	"reflect"
	"testing"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// TestJudgedSearchesMatchWholeRuns: the phase search with runs that stop
// once their verdict is settled (the sweep's way) finds the same columns,
// probe by probe, as with every run simulated to its end; only the virtual
// time simulated shrinks.
func TestJudgedSearchesMatchWholeRuns(t *testing.T) {
	// sim's scenario of a storm its queue keeps (see its stuck tests).
	f, err := scenario.Load("../sim/testdata/stuck.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, Options{NoRamp: true, Loads: []float64{15, 25, 35, 45}, Max: 20, Resolution: 1})
	if err != nil {
		t.Fatal(err)
	}
	rp := p.Runs[0]
	whole := func(s scenario.Scenario, name string) (result.Result, error) {
		return sim.RunWithin(context.Background(), s, name, nil, sim.DefaultLimits)
	}
	judged := func(s scenario.Scenario, name string) (result.Result, error) {
		return sim.RunJudged(context.Background(), s, name, sim.DefaultLimits)
	}
	var stopped, metastable int
	counting := func(s scenario.Scenario, name string) (result.Result, error) {
		r, err := judged(s, name)
		if r.StoppedS != nil {
			stopped++
		}
		if r.Verdict == "metastable" {
			metastable++
		}
		return r, err
	}
	for _, load := range rp.Phase.Loads {
		want, err := runColumn(rp, load, whole)
		if err != nil {
			t.Fatal(err)
		}
		got, err := runColumn(rp, load, counting)
		if err != nil {
			t.Fatal(err)
		}
		if got.VirtualS > want.VirtualS {
			t.Errorf("load %v: %v virtual s judged, more than the %v s of whole runs", load, got.VirtualS, want.VirtualS)
		}
		got.VirtualS = want.VirtualS
		if !reflect.DeepEqual(got, want) {
			t.Errorf("load %v: judged column\n%+v\nwant\n%+v", load, got, want)
		}
	}
	// The test means something only if the searches met stuck runs.
	if stopped == 0 || stopped > metastable {
		t.Errorf("%d runs stopped early of %d metastable: want some, and only metastable ones", stopped, metastable)
	}
	t.Logf("%d of %d metastable runs stopped early", stopped, metastable)
}
