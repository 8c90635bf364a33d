package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// The runbook questions: what an operator can do during a storm, asked of
// every run of a file.
//
//   - AddCapacity: the smallest capacity factor F that, set at a given
//     time T on the swept client's target (a sim `capacity` action of
//     value F), lets the run recover: a bisection over F in [1, Max].
//   - Latest: for a given factor F, the latest time T in [the end of the
//     run's first trigger, the end of the run] at which setting it still
//     lets the run recover: a bisection over T.
//   - Compare: every run of the file over N seeds, ranked by time to
//     recover.
//
// "Recovers" is the simulator's verdict: not metastable at the end of the
// run (stable or recovered). Each search's action replaces the run's own
// capacity actions on the same service, so that the factor tried is the
// factor in effect.

// Defaults and bounds of the runbook questions.
const (
	// DefaultCapacityMax is the largest capacity factor tried.
	DefaultCapacityMax = 4
	// MaxCapacityFactor is the largest capacity factor a sim action takes.
	MaxCapacityFactor = 1e6
	// MaxCompareSeeds bounds the seeds of a comparison.
	MaxCompareSeeds = 1000
	// runbookSteps is about how many grid steps a runbook search's
	// default resolution makes: its bisection then takes 2 + ⌈log₂ 50⌉ = 8
	// simulations at most.
	runbookSteps = 50
)

// CapacityPlan is the search for the smallest capacity factor that, set
// at AtS on the run's target, lets the run recover: factors Min + k ×
// Resolution (the last clamped to Max) for k in [0, Sizes()].
type CapacityPlan struct {
	AtS        float64 `json:"at_s"`
	Min        float64 `json:"min"` // 1: nothing added
	Max        float64 `json:"max"`
	Resolution float64 `json:"resolution"`
}

// Sizes returns the number of grid steps K.
func (p CapacityPlan) Sizes() int { return gridSteps(p.Min, p.Max, p.Resolution) }

// Size returns the k-th factor of the grid.
func (p CapacityPlan) Size(k int) float64 { return gridValue(p.Min, p.Max, p.Resolution, k) }

// LatestPlan is the search for the latest time, in [FromS, ToS] by
// ResolutionS, at which setting the capacity factor Factor on the run's
// target still lets the run recover.
type LatestPlan struct {
	Factor      float64 `json:"factor"`
	FromS       float64 `json:"from_s"` // the end of the run's first trigger (0 without one)
	ToS         float64 `json:"to_s"`   // the end of the run
	ResolutionS float64 `json:"resolution_s"`
}

// Sizes returns the number of grid steps K.
func (p LatestPlan) Sizes() int { return gridSteps(p.FromS, p.ToS, p.ResolutionS) }

// Size returns the k-th time of the grid, seconds.
func (p LatestPlan) Size(k int) float64 { return gridValue(p.FromS, p.ToS, p.ResolutionS, k) }

// ComparePlan is the comparison of the runs: each run with Seeds seeds,
// its own seed and the Seeds − 1 that follow it.
type ComparePlan struct {
	Seeds int `json:"seeds"`
}

// CapacitySearch is a run's answer to the capacity question.
type CapacitySearch struct {
	CapacityPlan
	// Factor is the smallest factor on the grid with which the run
	// recovered; nil if it stayed metastable even at Max. Factor = Min
	// (1) means it recovers without added capacity.
	Factor *float64 `json:"factor"`
	// Probes are the runs made, by factor (Size: the factor).
	Probes      []Probe `json:"probes"`
	Simulations int     `json:"simulations"`
	VirtualS    float64 `json:"virtual_s"`
}

// LatestSearch is a run's answer to the latest-time question.
type LatestSearch struct {
	LatestPlan
	// LatestS is the latest time on the grid at which adding Factor let
	// the run recover; nil if even at FromS it stayed metastable, or if
	// it recovers without the added capacity (Unneeded).
	LatestS *float64 `json:"latest_s"`
	// Unneeded: the run recovered with the capacity set at the very end,
	// that is without it.
	Unneeded bool `json:"unneeded,omitempty"`
	// Probes are the runs made, by time (Size: the time, seconds).
	Probes      []Probe `json:"probes"`
	Simulations int     `json:"simulations"`
	VirtualS    float64 `json:"virtual_s"`
}

// SeedRun is one run of the comparison with one seed.
type SeedRun struct {
	Seed    uint64 `json:"seed"`
	Verdict string `json:"verdict"`
	// RecoveryS and CollapseS as in result.Result.
	RecoveryS *float64 `json:"recovery_s"`
	CollapseS *float64 `json:"collapse_s"`
	// ToRecoverS: seconds from the start of the incident (the run's first
	// trigger, or its collapse when earlier or without one) until it was
	// back for good (see the comparison's rule); 0 when stable, nil when
	// metastable.
	ToRecoverS *float64 `json:"to_recover_s"`
	// Relapsed: the run had come back once, after an earlier collapse,
	// before the collapse the verdict reports.
	Relapsed bool    `json:"relapsed"`
	VirtualS float64 `json:"virtual_s"`
}

// Comparison ranks the runs of a file by time to recover, best first.
type Comparison struct {
	Seeds int          `json:"seeds"`
	Rows  []CompareRow `json:"rows"`
}

// CompareRow is one run over every seed of the comparison.
type CompareRow struct {
	Run string `json:"run"`
	// Verdicts: how many seeds ended stable, recovered, and otherwise
	// (Metastable: metastable, or degraded or not judged, which no
	// runbook comparison has yet shown).
	Stable     int `json:"stable"`
	Recovered  int `json:"recovered"`
	Metastable int `json:"metastable"`
	// Relapses: how many seeds relapsed (see SeedRun.Relapsed).
	Relapses int `json:"relapses"`
	// MedianS and WorstS: the median and the largest ToRecoverS over the
	// seeds; nil (never) when that many seeds stayed metastable.
	MedianS *float64 `json:"median_to_recover_s"`
	WorstS  *float64 `json:"worst_to_recover_s"`
	// MedianRecoveryS, WorstRecoveryS: the same of sim's recovery_s.
	MedianRecoveryS *float64 `json:"median_recovery_s"`
	WorstRecoveryS  *float64 `json:"worst_recovery_s"`
	// Outcomes: the run with each seed, in seed order.
	Outcomes []SeedRun `json:"outcomes"`
}

// runbookAsked reports whether o asks a runbook question.
func (o Options) runbookAsked() bool {
	return o.CapacityAt != 0 || o.LatestFactor != 0 || o.CompareSeeds != 0
}

// runDuration is how long the run's scenario lasts.
func runDuration(s scenario.Scenario) time.Duration {
	if s.Duration == 0 {
		return scenario.DefaultDuration
	}
	return s.Duration
}

// planCapacity plans the capacity question of a run.
func planCapacity(o Options, s scenario.Scenario) (*CapacityPlan, error) {
	if o.CapacityAt == 0 {
		return nil, nil
	}
	end := runDuration(s)
	if o.CapacityAt < 0 || o.CapacityAt >= end {
		return nil, optionErr("capacity-at", FormatDuration(o.CapacityAt), "want a time after 0 and before the end of the run (%s)", FormatDuration(end))
	}
	p := &CapacityPlan{AtS: o.CapacityAt.Seconds(), Min: 1, Max: o.CapacityMax, Resolution: o.CapacityResolution}
	if p.Max == 0 {
		p.Max = DefaultCapacityMax
	}
	if !(p.Max > 1) || p.Max > MaxCapacityFactor {
		return nil, optionErr("capacity-max", FormatNumber(p.Max), "want a factor above 1 and at most %g", float64(MaxCapacityFactor))
	}
	if p.Resolution == 0 {
		p.Resolution = niceFloor((p.Max - p.Min) / runbookSteps)
	}
	if !(p.Resolution > 0) || (p.Max-p.Min)/p.Resolution > MaxSizes {
		return nil, optionErr("capacity-resolution", FormatNumber(p.Resolution), "want > 0 and at most 2²⁰ steps from 1 to %v", p.Max)
	}
	return p, nil
}

// planLatest plans the latest-time question of a run.
func planLatest(o Options, s scenario.Scenario) (*LatestPlan, error) {
	if o.LatestFactor == 0 {
		return nil, nil
	}
	if !(o.LatestFactor > 1) || o.LatestFactor > MaxCapacityFactor {
		return nil, optionErr("capacity-latest", FormatNumber(o.LatestFactor), "want a capacity factor above 1 (more capacity) and at most %g", float64(MaxCapacityFactor))
	}
	end := runDuration(s)
	from := time.Duration(0)
	if len(s.Triggers) > 0 {
		from = s.Triggers[0].At + s.Triggers[0].Duration
	}
	if from >= end {
		return nil, fmt.Errorf("capacity-latest: the trigger lasts until %s, the end of the run (%s): there is no time after it to add capacity", FormatDuration(from), FormatDuration(end))
	}
	p := &LatestPlan{Factor: o.LatestFactor, FromS: from.Seconds(), ToS: end.Seconds(), ResolutionS: o.LatestResolution.Seconds()}
	if o.LatestResolution == 0 {
		bin := s.Bin
		if bin == 0 {
			bin = scenario.DefaultBin
		}
		p.ResolutionS = math.Max(bin.Seconds(), niceFloor((p.ToS-p.FromS)/runbookSteps))
	}
	if !(p.ResolutionS > 0) || (p.ToS-p.FromS)/p.ResolutionS > MaxSizes {
		return nil, optionErr("latest-resolution", FormatDuration(Seconds(p.ResolutionS)), "want > 0 and at most 2²⁰ steps from %s to %s", FormatDuration(from), FormatDuration(end))
	}
	return p, nil
}

// planCompare plans the comparison; seed is the first run's seed, the
// largest one must not wrap.
func planCompare(o Options, seeds []uint64) (*ComparePlan, error) {
	if o.CompareSeeds == 0 {
		return nil, nil
	}
	n := o.CompareSeeds
	if n < 0 || n > MaxCompareSeeds {
		return nil, optionErr("compare-seeds", fmt.Sprint(n), "want 1 to %d seeds", MaxCompareSeeds)
	}
	for _, s := range seeds {
		if s > math.MaxUint64-uint64(n-1) {
			return nil, optionErr("compare-seeds", fmt.Sprint(n), "seed %d and the %d after it do not fit in 64 bits: give a smaller --seed", s, n-1)
		}
	}
	return &ComparePlan{Seeds: n}, nil
}

// compare ranks the runs by their outcomes (one slice per run, in file
// order), best first:
//
//  1. more seeds recovered (stable or recovered);
//  2. the smaller median time to recover (never: after every time);
//  3. the smaller worst time to recover;
//  4. fewer relapses;
//  5. file order.
func compare(names []string, outcomes [][]SeedRun, seeds int) *Comparison {
	c := &Comparison{Seeds: seeds}
	for i, name := range names {
		row := CompareRow{Run: name, Outcomes: outcomes[i]}
		var ttr, rec []*float64
		for _, o := range outcomes[i] {
			switch o.Verdict {
			case "stable":
				row.Stable++
			case "recovered":
				row.Recovered++
			default:
				row.Metastable++
			}
			if o.Relapsed {
				row.Relapses++
			}
			ttr, rec = append(ttr, o.ToRecoverS), append(rec, o.RecoveryS)
		}
		row.MedianS, row.WorstS = medianWorst(ttr)
		row.MedianRecoveryS, row.WorstRecoveryS = medianWorst(rec)
		c.Rows = append(c.Rows, row)
	}
	never := func(v *float64) float64 {
		if v == nil {
			return math.Inf(1)
		}
		return *v
	}
	slices.SortStableFunc(c.Rows, func(a, b CompareRow) int {
		return cmp.Or(
			cmp.Compare(b.Stable+b.Recovered, a.Stable+a.Recovered),
			cmp.Compare(never(a.MedianS), never(b.MedianS)),
			cmp.Compare(never(a.WorstS), never(b.WorstS)),
			cmp.Compare(a.Relapses, b.Relapses))
	})
	return c
}

// medianWorst returns the median and the largest of xs, nil meaning
// never (after every number). The median of an even count is the mean of
// the two middle values (never if either is).
func medianWorst(xs []*float64) (median, worst *float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = math.Inf(1)
		if x != nil {
			v[i] = *x
		}
	}
	slices.Sort(v)
	opt := func(x float64) *float64 {
		if math.IsInf(x, 1) {
			return nil
		}
		return &x
	}
	n := len(v)
	m := v[n/2]
	if n%2 == 0 {
		m = (v[n/2-1] + v[n/2]) / 2
	}
	return opt(m), opt(v[n-1])
}

// gridSteps is the number of steps K of a grid from lo to hi by step:
// the values are lo + k × step for k in [0, K], the last clamped to hi.
func gridSteps(lo, hi, step float64) int {
	return int(math.Ceil((hi-lo)/step - 1e-9))
}

// gridValue is the k-th value of that grid.
func gridValue(lo, hi, step float64, k int) float64 {
	return math.Min(hi, roundTo(lo+float64(k)*step, step))
}

// validateRunbook checks the runbook plans of a run read from a file.
func (rp RunPlan) validateRunbook() error {
	if c := rp.AddCapacity; c != nil {
		switch {
		case !finite(c.AtS, c.Min, c.Max, c.Resolution) || c.AtS <= 0 || c.AtS > MaxDuration.Seconds():
			return fmt.Errorf("add_capacity: at %v s", c.AtS)
		case c.Min != 1 || !(c.Max > c.Min) || c.Max > MaxCapacityFactor || !(c.Resolution > 0) || (c.Max-c.Min)/c.Resolution > MaxSizes:
			return fmt.Errorf("add_capacity: factors %v to %v by %v", c.Min, c.Max, c.Resolution)
		}
	}
	if l := rp.Latest; l != nil {
		switch {
		case !finite(l.Factor, l.FromS, l.ToS, l.ResolutionS) || !(l.Factor > 1) || l.Factor > MaxCapacityFactor:
			return fmt.Errorf("latest: factor %v", l.Factor)
		case l.FromS < 0 || !(l.ToS > l.FromS) || l.ToS > MaxDuration.Seconds() || !(l.ResolutionS > 0) || (l.ToS-l.FromS)/l.ResolutionS > MaxSizes:
			return fmt.Errorf("latest: times %v to %v s by %v", l.FromS, l.ToS, l.ResolutionS)
		}
	}
	return nil
}
