package sweep

import (
	"context"
	"math"
	"testing"

	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep/plan"
)

// BenchmarkPhaseSearchCeiling measures how much of a phase search's work
// a better search order could save (issue 16, target 3): for every column
// of examples/hotos-sweep.yaml and examples/three-tier.yaml it runs the
// sweep's own search, then two others against the same simulations (each
// probe a real run, its engine events counted):
//
//   - gallop: probe 0, then sizes 1, 2, 4, 8 … grid steps up until a
//     probe is disturbed, bisect that bracket, then gallop on from there
//     for the metastable threshold (the top size is probed first, as the
//     sweep does, to tell "none up to the maximum");
//   - oracle: a search told both thresholds in advance, which only checks
//     them (the top, each threshold and the step below it): the least any
//     bracket, a fluid model's included, could cost.
//
// and, for each of the sweep's search and the oracle's, what it would cost
// if every run that is not metastable stopped 1 s after it recovered (an
// oracle too: such a run is run again, cut there, and its events counted;
// "stop" and "oracle+stop").
//
// Every search must find the sweep's thresholds (the columns are
// monotone; the benchmark fails if one is not). It reports the runs and
// events of each, and the events of the sweep's search over each
// other's ("x-fewer-events"), and the same over the whole sweep, its two
// ramps included ("x-whole"). One op is the whole comparison; run it with
// -benchtime 1x.
func BenchmarkPhaseSearchCeiling(b *testing.B) {
	for _, name := range []string{"hotos-sweep", "three-tier"} {
		b.Run(name, func(b *testing.B) { benchSearchCeiling(b, "../examples/"+name+".yaml") })
	}
}

func benchSearchCeiling(b *testing.B, file string) {
	f, err := scenario.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPlan(f, Options{})
	if err != nil {
		b.Fatal(err)
	}
	var sweep, gallop, oracle, stop, both, ramps tally
	// A plain loop: with b.Loop, go1.26.8 fails to compile this package
	// (an internal compiler error in supersede's generic entry type).
	for range b.N {
		sweep, gallop, oracle, stop, both, ramps = tally{}, tally{}, tally{}, tally{}, tally{}, tally{}
		for _, rp := range p.Runs {
			// The ramp (a whole run, as the sweep runs it) is the same
			// whatever the search: counted in the whole-sweep ratios.
			_, err := runRamp(rp, func(s scenario.Scenario, name string) (result.Result, error) {
				r, err := sim.RunWithin(context.Background(), s, name, nil, sim.DefaultLimits)
				ramps.runs++
				ramps.events += r.Events
				return r, err
			})
			if err != nil {
				b.Fatal(err)
			}
			ph := *rp.Phase
			n := ph.Sizes()
			for _, load := range ph.Loads {
				verdicts := map[int]string{}
				events := map[int]uint64{}
				recovered := map[int]float64{} // seconds after the trigger's end
				run := func(k int) string {
					if v, ok := verdicts[k]; ok {
						return v
					}
					r, err := sim.RunJudged(context.Background(), rp.ProbeScenario(load, ph.Size(k)), "probe", sim.DefaultLimits)
					if err != nil {
						b.Fatal(err)
					}
					verdicts[k], events[k] = r.Verdict, r.Events
					if r.RecoveryS != nil {
						recovered[k] = *r.RecoveryS
					}
					return r.Verdict
				}
				// stopped adds a search's probes to t as if every run that
				// is not metastable stopped 1 s after it recovered: each
				// such run again, cut there, its events counted.
				stopped := func(t *tally, probed map[int]bool) {
					for k := range probed {
						t.runs++
						if verdicts[k] == "metastable" {
							t.events += events[k]
							continue
						}
						s := rp.ProbeScenario(load, ph.Size(k))
						tr := s.Triggers[0]
						s.Duration = min(s.Duration, tr.At+tr.Duration+plan.Seconds(recovered[k]+1))
						r, err := sim.RunWithin(context.Background(), s, "cut", nil, sim.DefaultLimits)
						if err != nil {
							b.Fatal(err)
						}
						t.events += r.Events
					}
				}
				// count adds a search's probes (from its own memo) to t.
				count := func(t *tally, probed map[int]bool) {
					for k := range probed {
						t.runs++
						t.events += events[k]
					}
				}
				probe := func(probed map[int]bool) func(k int) (Probe, error) {
					return func(k int) (Probe, error) {
						probed[k] = true
						return Probe{Size: ph.Size(k), Verdict: run(k)}, nil
					}
				}

				// The sweep's search.
				mine := map[int]bool{}
				col, err := searchColumn(n, ph.Size, probe(mine))
				if err != nil {
					b.Fatal(err)
				}
				count(&sweep, mine)
				stopped(&stop, mine)
				kt, kd := n+1, n+1
				if col.Tips != nil {
					kt = gridStep(ph, *col.Tips)
				}
				if col.Disturbs != nil {
					kd = gridStep(ph, *col.Disturbs)
				}

				// Gallop from the bottom.
				g := map[int]bool{}
				gp := probe(g)
				tips := func(k int) bool { gp(k); return run(k) == "metastable" }
				dist := func(k int) bool { gp(k); return run(k) != "stable" }
				gt, gd := n+1, n+1
				top := tips(n)
				switch {
				case dist(0):
					gd = 0
				case dist(n):
					gd = gallopUp(0, n, dist)
				}
				if top {
					if gd <= n && tips(gd) {
						gt = gd
					} else {
						gt = gallopUp(gd, n, tips)
					}
				}
				if gt != kt || gd != kd {
					b.Fatalf("load %v: gallop found tips %d, disturbs %d; the sweep %d, %d", load, gt, gd, kt, kd)
				}
				count(&gallop, g)

				// The oracle checks the thresholds only.
				o := map[int]bool{}
				op := probe(o)
				op(n)
				for _, k := range []int{kt, kd} {
					if k <= n {
						op(k)
						if k > 0 {
							op(k - 1)
						}
					}
				}
				count(&oracle, o)
				stopped(&both, o)
			}
		}
	}
	b.ReportMetric(float64(sweep.runs), "sweep-runs")
	b.ReportMetric(float64(gallop.runs), "gallop-runs")
	b.ReportMetric(float64(oracle.runs), "oracle-runs")
	b.ReportMetric(float64(sweep.events), "sweep-events")
	b.ReportMetric(float64(sweep.events)/float64(gallop.events), "gallop-x-fewer-events")
	b.ReportMetric(float64(sweep.events)/float64(oracle.events), "oracle-x-fewer-events")
	b.ReportMetric(float64(ramps.events), "ramp-events")
	whole := func(t tally) float64 { return float64(sweep.events+ramps.events) / float64(t.events+ramps.events) }
	b.ReportMetric(whole(gallop), "gallop-x-whole")
	b.ReportMetric(whole(oracle), "oracle-x-whole")
	b.ReportMetric(whole(stop), "stop-x-whole")
	b.ReportMetric(whole(both), "oracle+stop-x-whole")
}

// tally counts a search's simulations and their engine events.
type tally struct{ runs, events uint64 }

// gridStep is the grid step of a threshold size.
func gridStep(ph PhasePlan, size float64) int {
	for k := 0; k <= ph.Sizes(); k++ {
		if math.Abs(ph.Size(k)-size) < 1e-9 {
			return k
		}
	}
	panic("size off the grid")
}

// gallopUp returns the smallest k in (lo, n] with f(k), given f(lo) false
// and f(n) true: steps of 1, 2, 4 … up from lo, then a bisection.
func gallopUp(lo, n int, f func(int) bool) int {
	step := 1
	for {
		hi := min(n, lo+step)
		if f(hi) {
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if f(mid) {
					hi = mid
				} else {
					lo = mid
				}
			}
			return hi
		}
		lo, step = hi, step*2
	}
}
