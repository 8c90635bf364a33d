package sweep

import (
	"context"
	"reflect"
	"testing"

	"github.com/stormguard/stormguard/sim"
)

// judgedYAML: naive clients and a database with an unbounded FIFO queue
// (see sim's TestRunJudgedStopsOnlyWhenSettled): its storms are proven
// stuck and stopped early by the phase search's runs.
const judgedYAML = `
name: judged
duration: 120s
clients:
  - name: app
    target: db
    arrivals: {kind: poisson, rate: 30}
    policy: naive
    timeout: 1s
services:
  - name: db
    workers: 2
    service_time: {kind: constant, mean: 40ms}
triggers:
  - {kind: outage, target: db, at: 20s, duration: 5s, mode: hold}
`

// TestJudgedSearchesMatchWholeRuns: the phase search with runs that stop
// once their verdict is settled (the sweep's way) finds the same columns,
// probe by probe, as with every run simulated to its end; only the virtual
// time simulated shrinks.
func TestJudgedSearchesMatchWholeRuns(t *testing.T) {
	f, err := sim.Parse("judged.yaml", []byte(judgedYAML))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f, Options{NoRamp: true, Loads: []float64{15, 25, 35, 45}, Max: 20, Resolution: 1})
	if err != nil {
		t.Fatal(err)
	}
	rp := p.Runs[0]
	whole := func(s sim.Scenario, name string) (sim.Result, error) {
		return sim.RunWithin(context.Background(), s, name, nil, sim.DefaultLimits)
	}
	judged := func(s sim.Scenario, name string) (sim.Result, error) {
		return sim.RunJudged(context.Background(), s, name, sim.DefaultLimits)
	}
	var stopped, metastable int
	counting := func(s sim.Scenario, name string) (sim.Result, error) {
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
