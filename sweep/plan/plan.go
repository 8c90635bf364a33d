package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// What a phase search grows in the trigger (Options.Vary).
const (
	VaryDuration = "duration" // how long the trigger lasts, seconds (any kind)
	VaryFactor   = "factor"   // a load spike's multiplier, or a brownout's error probability
	VaryAdd      = "add"      // the latency a latency trigger adds, seconds
	VaryKeys     = "keys"     // the most popular keys a cache-flush removes
)

// Options are the knobs of a sweep. A zero field takes the default derived
// from the scenario, given in brackets; capacity is the estimate of
// [Capacity] for the swept client's target, the largest over the file's
// runs (every run is swept over the same loads, so that they compare).
type Options struct {
	// Client whose arrival rate is the load [the scenario's first client].
	Client string
	// From, To and Step of the ramp, requests/s [From 0.25 × capacity,
	// To 1.25 × capacity, both rounded to a multiple of Step; Step about
	// (To − From) / 30, rounded down to 1, 2 or 5 × 10ⁿ]. The ramp climbs
	// From → To and comes back down to From.
	From, To, Step float64
	// Hold is how long each step of the ramp lasts [20 × the client's
	// timeout, at least 20 bins]; the second half of it is measured.
	Hold time.Duration
	// Loads of the phase diagram, requests/s [0.25 × capacity up to the
	// capacity, in steps of about capacity / 15, rounded down to 1, 2 or
	// 5 × 10ⁿ]. They are sorted and duplicates dropped.
	Loads []float64
	// Vary: what the phase search grows in the trigger: VaryDuration,
	// VaryFactor (load, errors and hang triggers), VaryAdd (latency
	// triggers) or VaryKeys (a cache-flush of a keyed cache) [keys for a
	// cache-flush of a keyed cache, which is instantaneous; else
	// duration].
	Vary string
	// Max is the largest trigger size tried, in seconds for duration and
	// add, as the factor for factor, a number of keys for keys [4 × the
	// trigger's own, or 40 s, 4×, 1 (an error or hang probability), the
	// cache's keys]; Resolution is the step of the search [about (Max −
	// min) / 256, rounded down to 1, 2 or 5 × 10ⁿ; at least 1 key]. The
	// smallest size tried is 0 (no trigger), and 1 for a load factor.
	Max, Resolution float64
	// After is how long each phase run goes on after the trigger ends,
	// for the system to recover [max(120 s, 60 × the client's timeout,
	// 3 × Max for duration)].
	After time.Duration
	// Seed replaces every run's seed when not 0.
	Seed uint64
	// NoRamp and NoPhase skip a part of the sweep.
	NoRamp, NoPhase bool

	// The runbook questions (see runbook.go), each asked when its first
	// field is not zero.
	//
	// CapacityAt: for each run, bisect the smallest capacity factor that,
	// set at this time on the client's target, lets the run recover, from
	// 1 to CapacityMax [DefaultCapacityMax] by CapacityResolution [about
	// (CapacityMax − 1) / 50, rounded down to 1, 2 or 5 × 10ⁿ].
	CapacityAt                      time.Duration
	CapacityMax, CapacityResolution float64
	// LatestFactor: for each run, bisect the latest time, from the end of
	// its first trigger to the end of the run, by LatestResolution [about
	// that span / 50, rounded down to 1, 2 or 5 × 10ⁿ seconds, at least a
	// bin], at which setting this capacity factor still lets it recover.
	LatestFactor     float64
	LatestResolution time.Duration
	// CompareSeeds: run every run with this many seeds (its own and the
	// ones that follow) and rank the runs by time to recover.
	CompareSeeds int
}

// Limits on the options: past them a sweep is no longer a search but a
// mistake (or an overflow of the simulator's clock).
const (
	// MaxSteps bounds the ramp's steps up, and the loads of the phase diagram.
	MaxSteps = 10_000
	// MaxSizes bounds the grid of trigger sizes of a phase search
	// ((Max − min) / Resolution).
	MaxSizes = 1 << 20
	// MaxDuration is the longest simulation a sweep makes: about 292
	// years, the most a time.Duration holds.
	MaxDuration = time.Duration(math.MaxInt64)
)

// OptionError is an option (or a value derived from it) that cannot be
// swept. Option names the field as the command line's flag does: ramp,
// hold, loads, max, resolution, after.
type OptionError struct {
	Option string
	Value  string // the value as given or derived, "100:50:10", "1000000h"
	Msg    string // what is wrong
}

func (e *OptionError) Error() string { return e.Option + " " + e.Value + ": " + e.Msg }

func optionErr(option, value, format string, a ...any) error {
	return &OptionError{Option: option, Value: value, Msg: fmt.Sprintf(format, a...)}
}

// Plan is a sweep fully resolved: every run of a scenario file with the
// ramp and the phase search to make of it. It is plain data; New makes
// it, sweep.Execute carries it out.
type Plan struct {
	// Scenario and Description are the file's name and description.
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	// Key identifies the plan: a digest of the runs' scenarios and
	// settings. Partial results merge only with partials of the same key.
	Key string `json:"key"`
	// Runs are the file's runs, in file order.
	Runs []RunPlan `json:"runs"`
	// Compare is nil unless the runs are compared (Options.CompareSeeds).
	Compare *ComparePlan `json:"compare,omitempty"`
}

// RunPlan is the sweep of one run of the file.
type RunPlan struct {
	// Name of the run, and what it changes in the base scenario (see
	// scenario.RunSpec).
	Name    string   `json:"name"`
	Changes []string `json:"changes,omitempty"`
	// Client whose rate is the load, and its attempt timeout in seconds.
	Client   string  `json:"client"`
	TimeoutS float64 `json:"timeout_s"`
	// Target is the service the client calls; Capacity the estimate of
	// what it serves, requests/s (0 when unknown; see Capacity).
	Target   string  `json:"target"`
	Capacity float64 `json:"capacity"`
	// Seed of every simulation of the run.
	Seed uint64 `json:"seed"`
	// Ramp is nil when the ramp is skipped; Phase when the phase search is.
	Ramp  *RampPlan  `json:"ramp,omitempty"`
	Phase *PhasePlan `json:"phase,omitempty"`
	// AddCapacity and Latest are the runbook questions asked of the run
	// (nil when not asked; see Options).
	AddCapacity *CapacityPlan `json:"add_capacity,omitempty"`
	Latest      *LatestPlan   `json:"latest,omitempty"`

	scenario scenario.Scenario
}

// RampPlan is a quasi-static load ramp: From to To and back in steps of
// Step requests/s, each held for HoldS seconds.
type RampPlan struct {
	From  float64 `json:"from"`   // first and last load, requests/s
	To    float64 `json:"to"`     // the peak, requests/s
	Step  float64 `json:"step"`   // between loads, requests/s
	HoldS float64 `json:"hold_s"` // each step's length, seconds
}

// PhasePlan is the phase search: at each load, the smallest trigger that
// disturbs the system and the smallest that leaves it metastable.
type PhasePlan struct {
	// Loads searched, requests/s, ascending.
	Loads []float64 `json:"loads"`
	// Trigger is the scenario's trigger the search grows (its size field
	// is replaced at each try).
	Trigger scenario.Trigger `json:"trigger"`
	// Vary is the field grown (VaryDuration, VaryFactor, VaryAdd,
	// VaryKeys).
	Vary string `json:"vary"`
	// Unit of the sizes: "s", "×" (a load factor), "" (a probability) or
	// " keys".
	Unit string `json:"unit"`
	// Min, Max: the smallest and largest sizes tried; Resolution: the
	// step of the grid of sizes the bisection works on.
	Min        float64 `json:"min"`
	Max        float64 `json:"max"`
	Resolution float64 `json:"resolution"`
	// AfterS: each run lasts until AfterS seconds after the trigger ends.
	AfterS float64 `json:"after_s"`
}

// Sizes returns the number of grid steps K: the sizes tried are
// Min + k × Resolution for k in [0, K], the last one clamped to Max.
func (p PhasePlan) Sizes() int {
	return int(math.Ceil((p.Max-p.Min)/p.Resolution - 1e-9))
}

// Size returns the k-th size of the grid (see Sizes).
func (p PhasePlan) Size(k int) float64 {
	return math.Min(p.Max, roundTo(p.Min+float64(k)*p.Resolution, p.Resolution))
}

// SizeText writes a trigger size with its unit: "12 s", "2.5×".
func (p PhasePlan) SizeText(size float64) string {
	s := FormatNumber(size)
	if p.Unit == "s" {
		return s + " s"
	}
	return s + p.Unit
}

// Label names the trigger and what grows: "outage of db: duration (s)".
func (p PhasePlan) Label() string {
	t := p.Trigger.Kind
	if p.Trigger.Target != "" {
		t += " of " + p.Trigger.Target
	}
	switch p.Vary {
	case VaryFactor:
		switch p.Trigger.Kind {
		case "errors":
			return t + ": error probability"
		case "hang":
			return t + ": hang probability"
		}
		return t + ": factor (×)"
	case VaryKeys:
		return t + ": most popular keys flushed"
	case VaryAdd:
		return t + ": added latency (s)"
	}
	return t + ": duration (s)"
}

// New resolves the sweep of every run of f with the options o.
func New(f scenario.File, o Options) (Plan, error) {
	name := f.Base.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	}
	p := Plan{Scenario: name, Description: f.Base.Description}
	if len(f.Runs) == 0 {
		return p, errors.New("the file has no runs")
	}
	if o.NoRamp && o.NoPhase && !o.runbookAsked() {
		return p, errors.New("nothing to do: both the ramp and the phase search are off")
	}
	// Every run is swept over the same loads, so that they compare: the
	// defaults come from the largest capacity of them all.
	grid := 0.0
	for _, r := range f.Runs {
		if ci, err := findClient(r.Scenario, o.Client); err == nil {
			grid = math.Max(grid, scenario.Capacity(r.Scenario, r.Scenario.Clients[ci].Target))
		}
	}
	var errs []error
	var names []string
	for _, r := range f.Runs {
		rp, err := planRun(r, o, grid)
		if err != nil {
			errs, names = append(errs, err), append(names, r.Name)
			continue
		}
		p.Runs = append(p.Runs, rp)
	}
	if len(errs) > 0 {
		// The same problem in every run (a bad option) is told once.
		same := len(errs) == len(f.Runs)
		for _, err := range errs {
			same = same && err.Error() == errs[0].Error()
		}
		if same {
			return p, errs[0]
		}
		for i := range errs {
			errs[i] = fmt.Errorf("run %s: %w", names[i], errs[i])
		}
		return p, errors.Join(errs...)
	}
	seeds := make([]uint64, len(p.Runs))
	for i, rp := range p.Runs {
		seeds[i] = rp.Seed
	}
	cp, err := planCompare(o, seeds)
	if err != nil {
		return p, err
	}
	p.Compare = cp
	p.Key = p.digest()
	return p, nil
}

// planRun plans the sweep of one run; grid is the capacity the default
// loads derive from.
func planRun(r scenario.RunSpec, o Options, grid float64) (RunPlan, error) {
	s := r.Scenario
	if o.Seed != 0 {
		s.Seed = o.Seed
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Bin == 0 {
		s.Bin = scenario.DefaultBin
	}
	ci, err := findClient(s, o.Client)
	if err != nil {
		return RunPlan{}, err
	}
	c := s.Clients[ci]
	timeout := c.Timeout
	if timeout == 0 {
		timeout = scenario.DefaultTimeout
	}
	capacity := scenario.Capacity(s, c.Target)
	rp := RunPlan{Name: r.Name, Changes: r.Changes, Client: c.Name, TimeoutS: timeout.Seconds(),
		Target: c.Target, Capacity: capacity, Seed: s.Seed, scenario: s}
	if !o.NoRamp {
		ramp, err := planRamp(o, grid, timeout, s.Bin)
		if err != nil {
			return rp, err
		}
		rp.Ramp = &ramp
	}
	if !o.NoPhase {
		ph, err := planPhase(o, s, ci, grid, timeout)
		if err != nil {
			return rp, err
		}
		rp.Phase = &ph
	}
	if rp.AddCapacity, err = planCapacity(o, s); err != nil {
		return rp, err
	}
	if rp.Latest, err = planLatest(o, s); err != nil {
		return rp, err
	}
	return rp, nil
}

// findClient returns the index of the client named name, or of the first
// client when name is empty; the client must have open-loop arrivals.
func findClient(s scenario.Scenario, name string) (int, error) {
	i := 0
	if name != "" {
		i = slices.IndexFunc(s.Clients, func(c scenario.Client) bool { return c.Name == name })
		if i < 0 {
			have := make([]string, len(s.Clients))
			for j, c := range s.Clients {
				have[j] = c.Name
			}
			return 0, fmt.Errorf("no client %q (have %s)", name, strings.Join(have, ", "))
		}
	}
	if len(s.Clients) == 0 {
		return 0, errors.New("the scenario has no clients")
	}
	switch k := s.Clients[i].Arrivals.Kind; k {
	case "", "poisson", "constant":
	default:
		return 0, fmt.Errorf("client %s has %s arrivals: a sweep sets an open-loop rate (poisson or constant)", s.Clients[i].Name, k)
	}
	return i, nil
}

// PhaseVaries returns, for each run of f, what its phase search grows
// with the options o: o.Vary, or its default for the run's trigger
// (VaryKeys for a cache-flush of a keyed cache, else VaryDuration). The
// command line reads --max and --resolution by it: a duration, or a
// number.
func PhaseVaries(f scenario.File, o Options) []string {
	out := make([]string, len(f.Runs))
	for i, r := range f.Runs {
		out[i] = o.Vary
		if o.Vary != "" {
			continue
		}
		out[i] = VaryDuration
		if s := r.Scenario; len(s.Triggers) > 0 && flushKeys(s, s.Triggers[0]) > 0 {
			out[i] = VaryKeys
		}
	}
	return out
}

// flushKeys returns the keys of the cache a cache-flush trigger t
// flushes, or 0 when t is no flush of a keyed cache.
func flushKeys(s scenario.Scenario, t scenario.Trigger) int {
	if t.Kind != "cache-flush" {
		return 0
	}
	i := slices.IndexFunc(s.Services, func(v scenario.Service) bool { return v.Name == t.Target })
	if i < 0 || s.Services[i].Cache == nil {
		return 0
	}
	return s.Services[i].Cache.Keys
}

func planRamp(o Options, capacity float64, timeout, bin time.Duration) (RampPlan, error) {
	from, to, step := o.From, o.To, o.Step
	if capacity <= 0 && (to == 0 || from == 0) {
		return RampPlan{}, errors.New("the capacity of the client's target cannot be estimated (no service time): give the ramp (--ramp FROM:TO:STEP)")
	}
	if step == 0 {
		lo, hi := from, to
		if lo == 0 {
			lo = 0.25 * capacity
		}
		if hi == 0 {
			hi = 1.25 * capacity
		}
		step = niceFloor((hi - lo) / 30)
	}
	if from == 0 {
		from = roundTo(math.Max(step, math.Floor(0.25*capacity/step)*step), step)
	}
	if to == 0 {
		to = roundTo(math.Ceil(1.25*capacity/step)*step, step)
	}
	shape := FormatNumber(from) + ":" + FormatNumber(to) + ":" + FormatNumber(step)
	switch {
	case !(from > 0) || !(to > from) || !(step > 0) || math.IsInf(to, 0):
		return RampPlan{}, optionErr("ramp", shape, "want 0 < from < to and step > 0")
	case (to-from)/step > MaxSteps:
		return RampPlan{}, optionErr("ramp", shape, "more than %d steps", MaxSteps)
	}
	hold := o.Hold
	if hold == 0 {
		hold = max(20*timeout, 20*bin)
	}
	if hold < 2*bin {
		return RampPlan{}, optionErr("hold", FormatDuration(hold), "shorter than two bins (%v): a step needs a settled half to measure", 2*bin)
	}
	r := RampPlan{From: from, To: to, Step: step}
	steps := len(r.Loads())
	if hold > MaxDuration/time.Duration(steps)-bin {
		return RampPlan{}, optionErr("hold", FormatDuration(hold), "%d steps of it last longer than the simulator's clock holds (about 292 years)", steps)
	}
	hold = (hold + bin - 1) / bin * bin
	r.HoldS = hold.Seconds()
	return r, nil
}

func planPhase(o Options, s scenario.Scenario, ci int, capacity float64, timeout time.Duration) (PhasePlan, error) {
	loads := slices.Clone(o.Loads)
	if len(loads) == 0 {
		if capacity <= 0 {
			return PhasePlan{}, errors.New("the capacity of the client's target cannot be estimated (no service time): give the loads (--loads FROM:TO:STEP)")
		}
		step := niceFloor(capacity / 15)
		for l := math.Ceil(0.25*capacity/step) * step; l <= capacity*(1+1e-9); l += step {
			loads = append(loads, roundTo(l, step))
		}
	}
	for _, l := range loads {
		if !(l > 0) || math.IsInf(l, 0) {
			return PhasePlan{}, optionErr("loads", FormatNumber(l), "loads must be positive")
		}
	}
	if len(loads) > MaxSteps {
		return PhasePlan{}, optionErr("loads", fmt.Sprintf("(%d of them)", len(loads)), "more than %d loads", MaxSteps)
	}
	slices.Sort(loads)
	loads = slices.Compact(loads)

	trig := scenario.Trigger{Kind: "outage", Target: s.Clients[ci].Target, Mode: "hold",
		At: max(10*time.Second, 10*timeout), Duration: 10 * time.Second}
	if len(s.Triggers) > 0 {
		trig = s.Triggers[0]
		if trig.Kind == "outage" && trig.Mode == "" {
			trig.Mode = "hold" // sim's default, said out loud
		}
	}
	ph := PhasePlan{Loads: loads, Trigger: trig, Vary: o.Vary, Max: o.Max, Resolution: o.Resolution}
	// A cache-flush of a keyed cache happens at an instant: what it
	// removes is its size.
	keys := flushKeys(s, trig)
	if ph.Vary == "" {
		ph.Vary = VaryDuration
		if keys > 0 {
			ph.Vary = VaryKeys
		}
	}
	switch ph.Vary {
	case VaryDuration:
		if keys > 0 {
			return ph, fmt.Errorf("vary duration: a cache-flush of a keyed cache (%s has %d keys) is instantaneous, its duration changes nothing; vary keys instead (the number of most popular keys flushed)", trig.Target, keys)
		}
		ph.Unit = "s"
		if ph.Max == 0 {
			ph.Max = 40
			if d := trig.Duration.Seconds(); d > 0 {
				ph.Max = 4 * d
			}
		}
	case VaryAdd:
		if trig.Kind != "latency" {
			return ph, fmt.Errorf("vary add grows a latency trigger's added latency; the trigger is %s (vary duration instead)", trig.Kind)
		}
		ph.Unit = "s"
		if ph.Max == 0 {
			ph.Max = 10 * timeout.Seconds()
			if a := trig.Add.Seconds(); a > 0 {
				ph.Max = 4 * a
			}
		}
	case VaryKeys:
		switch {
		case trig.Kind != "cache-flush":
			return ph, fmt.Errorf("vary keys grows a cache-flush trigger's keys; the trigger is %s (vary duration instead)", trig.Kind)
		case keys == 0:
			return ph, fmt.Errorf("vary keys: the cache of %s has no keys (a fixed hit rate; a flush makes every lookup miss while it lasts): vary duration instead", trig.Target)
		}
		ph.Unit = " keys"
		if ph.Max == 0 {
			ph.Max = float64(keys)
		}
		if ph.Max != math.Trunc(ph.Max) || ph.Max > float64(keys) {
			return ph, optionErr("max", FormatNumber(ph.Max), "a flush removes a whole number of keys, at most the cache's %d", keys)
		}
		if ph.Resolution == 0 {
			ph.Resolution = math.Max(1, math.Floor(niceFloor(ph.Max/256)))
		}
		if ph.Resolution != math.Trunc(ph.Resolution) {
			return ph, optionErr("resolution", FormatNumber(ph.Resolution), "a flush removes a whole number of keys: want a whole number ≥ 1")
		}
	case VaryFactor:
		switch trig.Kind {
		case "load":
			ph.Unit, ph.Min = "×", 1
			if ph.Max == 0 {
				ph.Max = math.Max(4, 2*trig.Factor)
			}
		case "errors", "hang":
			ph.Unit = ""
			if ph.Max == 0 {
				ph.Max = 1
			}
			if ph.Max > 1 {
				return ph, optionErr("max", FormatNumber(ph.Max), "%s probability is at most 1", map[string]string{"errors": "an error", "hang": "a hang"}[trig.Kind])
			}
		default:
			return ph, fmt.Errorf("vary factor grows a load, errors or hang trigger; the trigger is %s (vary duration instead)", trig.Kind)
		}
	default:
		return ph, fmt.Errorf("vary %q is not one of duration, factor, add, keys", ph.Vary)
	}
	if !(ph.Max > ph.Min) || math.IsInf(ph.Max, 0) {
		return ph, optionErr("max", FormatNumber(ph.Max), "must be above the smallest size %v", ph.Min)
	}
	// A size in seconds becomes a time.Duration: beyond 292 years it
	// would overflow; a quarter of that leaves room for the rest of a run
	// (the default after is 3 × max).
	longest := (MaxDuration / 4).Truncate(time.Hour)
	if ph.Unit == "s" && ph.Max > longest.Seconds() {
		v := FormatNumber(ph.Max) + "s"
		if ph.Max < MaxDuration.Seconds() {
			v = FormatDuration(Seconds(ph.Max))
		}
		return ph, optionErr("max", v, "longer than the simulator's clock allows a trigger (at most %s)", FormatDuration(longest))
	}
	if ph.Resolution == 0 {
		ph.Resolution = niceFloor((ph.Max - ph.Min) / 256)
	}
	if !(ph.Resolution > 0) || (ph.Max-ph.Min)/ph.Resolution > MaxSizes {
		return ph, optionErr("resolution", FormatNumber(ph.Resolution), "want > 0 and at most 2²⁰ steps from %v to %v", ph.Min, ph.Max)
	}
	after := o.After
	if after == 0 {
		after = max(120*time.Second, 60*timeout)
		if ph.Vary == VaryDuration {
			after = max(after, time.Duration(3*ph.Max*float64(time.Second)))
		}
	}
	if after <= 0 {
		return ph, optionErr("after", FormatDuration(after), "must be positive")
	}
	// The longest run: the trigger's start, its largest size, after.
	size := time.Duration(0)
	switch ph.Vary {
	case VaryDuration:
		size = Seconds(ph.Max)
	default:
		size = trig.Duration
	}
	if trig.At > MaxDuration-size || after > MaxDuration-size-trig.At {
		return ph, optionErr("after", FormatDuration(after), "a run of the trigger's start (%v), its largest size and this lasts longer than the simulator's clock holds (about 292 years)", trig.At)
	}
	ph.AfterS = after.Seconds()
	return ph, nil
}

// niceFloor returns the largest 1, 2 or 5 × 10ⁿ not above x (x > 0).
func niceFloor(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{5, 2, 1} {
		if m*p <= x*(1+1e-9) {
			return m * p
		}
	}
	return p
}

// roundTo rounds x to a multiple of step's last significant digit, so
// that sums of steps print as they should (0.1 + 0.2 → 0.3).
func roundTo(x, step float64) float64 {
	if !(step > 0) || math.IsInf(step, 0) {
		return x
	}
	// Multiply and divide by exact powers of ten: x × 10ᵉ / 10ᵉ.
	e := 6 - math.Floor(math.Log10(step))
	if e >= 0 {
		m := math.Pow(10, e)
		return math.Round(x*m) / m
	}
	m := math.Pow(10, -e)
	return math.Round(x/m) * m
}

// FormatDuration writes a duration, as the plan's errors and the
// simulations' names do, without the zero units Go adds: 1000000h, 2m10s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return strings.Replace(s, "h0m", "h", 1)
}

// FormatNumber writes f, as the plan's errors and the simulations'
// names do, with at most 6 significant digits and no trailing
// zeros.
func FormatNumber(f float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.6g", f), ".")
}

// digest hashes what the results depend on: the runs' scenarios and
// settings.
func (p Plan) digest() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, r := range p.Runs {
		// The types are plain data; should one ever fail to encode, its
		// Go syntax stands in.
		for _, v := range []any{r, r.scenario} {
			if err := enc.Encode(v); err != nil {
				fmt.Fprintf(h, "%#v\n", v)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
