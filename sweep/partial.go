package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/stormguard/stormguard/sim/scenario"
)

// MaxShards bounds the shards a sweep splits into: more shards than jobs
// leave some empty, and a sweep has at most scenario.MaxRuns × (1 + MaxSteps)
// jobs.
const MaxShards = 100_000

// MaxPartialSize bounds a Partial's JSON: ReadPartial reads at most this
// many bytes.
const MaxPartialSize = 64 << 20

// ReadPartial decodes one Partial, as Execute makes it and json encodes it,
// from r: strictly (an unknown field is an error), at most MaxPartialSize
// bytes, and checked (see Partial.Validate). The errors say what is wrong
// in one line, without the file's name.
func ReadPartial(r io.Reader) (Partial, error) {
	lr := &io.LimitedReader{R: r, N: MaxPartialSize + 1}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	var p Partial
	err := dec.Decode(&p)
	if lr.N <= 0 {
		return Partial{}, fmt.Errorf("larger than %d MiB, the most a shard's part may hold", MaxPartialSize>>20)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Partial{}, errors.New("empty: not a shard's part")
		}
		return Partial{}, fmt.Errorf("not a shard's part: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Partial{}, errors.New("not a shard's part: more follows the JSON object")
	}
	if err := p.Validate(); err != nil {
		return Partial{}, err
	}
	return p, nil
}

// Validate checks that a Partial (from a file) fits together: its format,
// its shard, a plan that NewPlan could have made (within the limits on the
// options), and results that belong to the plan's jobs.
func (pt Partial) Validate() error {
	if pt.Format != PartialFormat {
		return fmt.Errorf("format %q, want %q", pt.Format, PartialFormat)
	}
	if err := pt.Shard.validate(); err != nil {
		return err
	}
	p := pt.Plan
	if p.Key == "" {
		return errors.New("the plan has no key")
	}
	if len(p.Runs) == 0 || len(p.Runs) > scenario.MaxRuns {
		return fmt.Errorf("the plan has %d runs, want 1 to %d", len(p.Runs), scenario.MaxRuns)
	}
	for i, rp := range p.Runs {
		if err := rp.validate(); err != nil {
			return fmt.Errorf("plan: runs[%d] (%s): %w", i, rp.Name, err)
		}
	}
	for i, r := range pt.Ramps {
		if r.Run < 0 || r.Run >= len(p.Runs) || p.Runs[r.Run].Ramp == nil {
			return fmt.Errorf("ramps[%d]: run %d has no ramp in the plan", i, r.Run)
		}
		if len(r.Ramp.Steps) > 2*MaxSteps+3 {
			return fmt.Errorf("ramps[%d]: %d steps", i, len(r.Ramp.Steps))
		}
	}
	for i, c := range pt.Columns {
		if c.Run < 0 || c.Run >= len(p.Runs) || p.Runs[c.Run].Phase == nil || c.Load < 0 || c.Load >= len(p.Runs[c.Run].Phase.Loads) {
			return fmt.Errorf("columns[%d]: run %d, load %d is not a phase search of the plan", i, c.Run, c.Load)
		}
	}
	if c := p.Compare; c != nil && (c.Seeds < 1 || c.Seeds > MaxCompareSeeds) {
		return fmt.Errorf("plan: compare: %d seeds, want 1 to %d", c.Seeds, MaxCompareSeeds)
	}
	for i, c := range pt.Capacities {
		if c.Run < 0 || c.Run >= len(p.Runs) || p.Runs[c.Run].AddCapacity == nil {
			return fmt.Errorf("add_capacity[%d]: run %d has no capacity search in the plan", i, c.Run)
		}
	}
	for i, l := range pt.Latests {
		if l.Run < 0 || l.Run >= len(p.Runs) || p.Runs[l.Run].Latest == nil {
			return fmt.Errorf("latest[%d]: run %d has no latest-time search in the plan", i, l.Run)
		}
	}
	for i, c := range pt.Compares {
		if p.Compare == nil || c.Run < 0 || c.Run >= len(p.Runs) || c.Seed < 0 || c.Seed >= p.Compare.Seeds {
			return fmt.Errorf("compare[%d]: run %d, seed %d is not a run of the plan's comparison", i, c.Run, c.Seed)
		}
	}
	return nil
}

func finite(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// validate checks a run's plan as NewPlan makes them.
func (rp RunPlan) validate() error {
	if r := rp.Ramp; r != nil {
		switch {
		case !finite(r.From, r.To, r.Step, r.HoldS) || !(r.From > 0) || !(r.To > r.From) || !(r.Step > 0):
			return fmt.Errorf("ramp %v:%v:%v: want 0 < from < to and step > 0", r.From, r.To, r.Step)
		case (r.To-r.From)/r.Step > MaxSteps:
			return fmt.Errorf("ramp %v:%v:%v: more than %d steps", r.From, r.To, r.Step, MaxSteps)
		case !(r.HoldS > 0) || r.HoldS > MaxDuration.Seconds():
			return fmt.Errorf("ramp: hold %v s", r.HoldS)
		}
	}
	if err := rp.validateRunbook(); err != nil {
		return err
	}
	if ph := rp.Phase; ph != nil {
		if len(ph.Loads) == 0 || len(ph.Loads) > MaxSteps || !slices.IsSorted(ph.Loads) {
			return fmt.Errorf("phase: %d loads, want 1 to %d, ascending", len(ph.Loads), MaxSteps)
		}
		for _, l := range ph.Loads {
			if !finite(l) || !(l > 0) {
				return fmt.Errorf("phase: load %v", l)
			}
		}
		switch {
		case ph.Vary != VaryDuration && ph.Vary != VaryFactor && ph.Vary != VaryAdd && ph.Vary != VaryKeys:
			return fmt.Errorf("phase: vary %q", ph.Vary)
		case !finite(ph.Min, ph.Max, ph.Resolution, ph.AfterS) || !(ph.Max > ph.Min) || !(ph.Resolution > 0):
			return fmt.Errorf("phase: sizes %v to %v by %v", ph.Min, ph.Max, ph.Resolution)
		case (ph.Max-ph.Min)/ph.Resolution > MaxSizes:
			return fmt.Errorf("phase: more than %d sizes", MaxSizes)
		}
	}
	return nil
}
