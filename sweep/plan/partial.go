package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/sim/scenario"
)

// MaxShards bounds the shards a sweep splits into: more shards than jobs
// leave some empty, and a sweep has at most scenario.MaxRuns × (1 + MaxSteps)
// jobs.
const MaxShards = 100_000

// MaxPartialSize bounds a Partial's JSON: ReadPartial reads at most this
// many bytes.
const MaxPartialSize = 64 << 20

// ReadPartial decodes one Partial, as sweep.Execute makes it and json encodes it,
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
// its shard, a plan that New could have made (within the limits on the
// options), and results that belong to the plan's jobs.
func (pt Partial) Validate() error {
	if pt.Format != PartialFormat {
		return fmt.Errorf("format %q, want %q", pt.Format, PartialFormat)
	}
	if err := pt.Shard.Validate(); err != nil {
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

// validate checks a run's plan as New makes them.
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

// Shard is one part of a sweep split over machines: the Index-th (from 1)
// of Count. The zero Shard is the whole sweep (1/1).
type Shard struct {
	Index int `json:"index"` // from 1
	Count int `json:"count"` // the number of shards
}

// ParseShard reads "I/N" (1 ≤ I ≤ N ≤ MaxShards).
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want I/N, such as 2/4", s)
	}
	sh := Shard{Index: i, Count: n}
	return sh, sh.Validate()
}

// Validate checks that 1 ≤ Index ≤ Count ≤ MaxShards.
func (s Shard) Validate() error {
	if s.Count < 1 || s.Index < 1 || s.Index > s.Count || s.Count > MaxShards {
		return fmt.Errorf("shard %d/%d: want 1 ≤ I ≤ N ≤ %d", s.Index, s.Count, MaxShards)
	}
	return nil
}

// OrWhole returns s, or 1/1 for the zero Shard.
func (s Shard) OrWhole() Shard {
	if s == (Shard{}) {
		return Shard{1, 1}
	}
	return s
}

// String writes "I/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// PartialFormat names the format of a Partial.
const PartialFormat = "stormguard-sweep-partial/1"

// Partial is what one shard computed: the plan, and the results of its
// jobs. Merge puts the partials of all shards together.
type Partial struct {
	Format string `json:"format"` // PartialFormat
	Shard  Shard  `json:"shard"`
	// Plan is the whole plan (without the scenarios), for Merge.
	Plan Plan `json:"plan"`
	// Ramps and Columns are the shard's jobs, in plan order; so are the
	// runbook questions' (empty when not asked).
	Ramps      []RampPart     `json:"ramps"`
	Columns    []ColumnPart   `json:"columns"`
	Capacities []CapacityPart `json:"add_capacity,omitempty"`
	Latests    []LatestPart   `json:"latest,omitempty"`
	Compares   []ComparePart  `json:"compare,omitempty"`
}

// CapacityPart is the capacity question of run Run.
type CapacityPart struct {
	Run    int            `json:"run"`
	Search CapacitySearch `json:"search"`
}

// LatestPart is the latest-time question of run Run.
type LatestPart struct {
	Run    int          `json:"run"`
	Search LatestSearch `json:"search"`
}

// ComparePart is run Run of the comparison with its Seed-th seed (from 0).
type ComparePart struct {
	Run     int     `json:"run"`
	Seed    int     `json:"seed"`
	Outcome SeedRun `json:"outcome"`
}

// RampPart is the ramp of run Run (an index into Plan.Runs).
type RampPart struct {
	Run  int  `json:"run"`  // index into Plan.Runs
	Ramp Ramp `json:"ramp"` // the result
}

// ColumnPart is the phase search of run Run at load Load (indexes into
// Plan.Runs and the run's loads).
type ColumnPart struct {
	Run    int    `json:"run"`    // index into Plan.Runs
	Load   int    `json:"load"`   // index into the run's Phase.Loads
	Column Column `json:"column"` // the result
}

// results gathers the jobs' results, by job.
type results struct {
	ramps  map[Job]Ramp
	cols   map[Job]Column
	caps   map[Job]CapacitySearch
	latest map[Job]LatestSearch
	seeds  map[Job]SeedRun
}

// put sets m[k] = v, making m if needed.
func put[V any](m map[Job]V, k Job, v V) map[Job]V {
	if m == nil {
		m = map[Job]V{}
	}
	m[k] = v
	return m
}

// Merge puts together the partials of every shard of one plan (in any
// order) into the Result an unsplit sweep gives. It fails when a shard is
// missing or given twice, or when the partials come from different plans.
func Merge(parts ...Partial) (Result, error) {
	if len(parts) == 0 {
		return Result{}, errors.New("no partial results to merge")
	}
	first := parts[0]
	if err := first.Shard.Validate(); err != nil {
		return Result{}, fmt.Errorf("partial 1: %w", err)
	}
	n := first.Shard.Count
	seen := make([]bool, n+1)
	for i, pt := range parts {
		switch {
		case pt.Format != PartialFormat:
			return Result{}, fmt.Errorf("partial %d: format %q, want %q", i+1, pt.Format, PartialFormat)
		case pt.Plan.Key != first.Plan.Key:
			return Result{}, fmt.Errorf("shard %v comes from another sweep than shard %v (key %s, not %s): the same file, seed and settings must be given to every shard", pt.Shard, first.Shard, pt.Plan.Key, first.Plan.Key)
		case pt.Shard.Count != n:
			return Result{}, fmt.Errorf("shard %v and shard %v split the sweep differently", pt.Shard, first.Shard)
		case pt.Shard.Validate() != nil:
			return Result{}, pt.Shard.Validate()
		case seen[pt.Shard.Index]:
			return Result{}, fmt.Errorf("shard %v is given twice", pt.Shard)
		}
		seen[pt.Shard.Index] = true
	}
	var missing []string
	for i := 1; i <= n; i++ {
		if !seen[i] {
			missing = append(missing, Shard{i, n}.String())
		}
	}
	if len(missing) > 0 {
		return Result{}, fmt.Errorf("shard %s missing", strings.Join(missing, ", "))
	}

	p := first.Plan
	var got results
	for _, pt := range parts {
		for _, r := range pt.Ramps {
			got.ramps = put(got.ramps, Job{JobRamp, r.Run, 0}, r.Ramp)
		}
		for _, c := range pt.Columns {
			got.cols = put(got.cols, Job{JobColumn, c.Run, c.Load}, c.Column)
		}
		for _, c := range pt.Capacities {
			got.caps = put(got.caps, Job{JobCapacity, c.Run, 0}, c.Search)
		}
		for _, l := range pt.Latests {
			got.latest = put(got.latest, Job{JobLatest, l.Run, 0}, l.Search)
		}
		for _, c := range pt.Compares {
			got.seeds = put(got.seeds, Job{JobCompare, c.Run, c.Seed}, c.Outcome)
		}
	}
	res := Result{Scenario: p.Scenario, Description: p.Description, Key: p.Key}
	for _, rp := range p.Runs {
		res.Runs = append(res.Runs, RunResult{Name: rp.Name, Changes: rp.Changes, Client: rp.Client, TimeoutS: rp.TimeoutS,
			Target: rp.Target, Capacity: rp.Capacity, Seed: rp.Seed})
	}
	outcomes := make([][]SeedRun, len(p.Runs))
	for _, jb := range p.Jobs() {
		rr := &res.Runs[jb.Run]
		rp := p.Runs[jb.Run]
		switch jb.Kind {
		case JobRamp:
			r, ok := got.ramps[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the ramp of run %s", rp.Name)
			}
			rr.Ramp = &r
			res.Simulations += r.Simulations
			res.VirtualS += r.VirtualS
		case JobColumn:
			c, ok := got.cols[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack run %s at load %v", rp.Name, rp.Phase.Loads[jb.Index])
			}
			if rr.Phase == nil {
				rr.Phase = &Phase{PhasePlan: *rp.Phase}
			}
			rr.Phase.Columns = append(rr.Phase.Columns, c)
			res.Simulations += c.Simulations
			res.VirtualS += c.VirtualS
		case JobCapacity:
			c, ok := got.caps[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the capacity search of run %s", rp.Name)
			}
			rr.AddCapacity = &c
			res.Simulations += c.Simulations
			res.VirtualS += c.VirtualS
		case JobLatest:
			l, ok := got.latest[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack the latest-time search of run %s", rp.Name)
			}
			rr.Latest = &l
			res.Simulations += l.Simulations
			res.VirtualS += l.VirtualS
		case JobCompare:
			o, ok := got.seeds[jb]
			if !ok {
				return Result{}, fmt.Errorf("the partials lack run %s of the comparison with seed %d", rp.Name, rp.Seed+uint64(jb.Index))
			}
			outcomes[jb.Run] = append(outcomes[jb.Run], o)
			res.Simulations++
			res.VirtualS += o.VirtualS
		}
	}
	if p.Compare != nil {
		names := make([]string, len(p.Runs))
		for i, rp := range p.Runs {
			names[i] = rp.Name
		}
		res.Compare = compare(names, outcomes, p.Compare.Seeds)
	}
	return res, nil
}
