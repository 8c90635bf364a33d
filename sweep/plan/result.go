package plan

// Result is a whole sweep: what `stormguard sweep --json` prints. The
// same plan (file, seed, settings) gives the same Result, byte for byte
// once encoded, whatever the number of workers or shards.
type Result struct {
	// Scenario and Description are the file's; Key the plan's (see Plan).
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	Key         string `json:"key"`
	// Simulations counts the simulator runs; VirtualS sums their virtual
	// time, seconds.
	Simulations int     `json:"simulations"`
	VirtualS    float64 `json:"virtual_s"`
	// Runs in file order.
	Runs []RunResult `json:"runs"`
	// Compare ranks the runs by time to recover, best first; nil unless
	// asked (Options.CompareSeeds).
	Compare *Comparison `json:"compare,omitempty"`
}

// RunResult is the sweep of one run of the file: the fields of its
// RunPlan, then the results. Ramp or Phase is nil when that part was
// skipped.
type RunResult struct {
	Name     string   `json:"name"`
	Changes  []string `json:"changes,omitempty"`
	Client   string   `json:"client"`
	TimeoutS float64  `json:"timeout_s"`
	Target   string   `json:"target"`
	Capacity float64  `json:"capacity"`
	Seed     uint64   `json:"seed"`
	Ramp     *Ramp    `json:"ramp,omitempty"`
	Phase    *Phase   `json:"phase,omitempty"`
	// AddCapacity and Latest answer the runbook questions (nil when not
	// asked).
	AddCapacity *CapacitySearch `json:"add_capacity,omitempty"`
	Latest      *LatestSearch   `json:"latest,omitempty"`
}

// Thresholds of the ramp, as fractions of the demand.
const (
	// CollapseBelow: a step has collapsed when goodput < CollapseBelow ×
	// demand (as result.FindHysteresis).
	CollapseBelow = 0.5
	// RecoveredAbove: a step has recovered when goodput ≥ RecoveredAbove
	// × demand (as result.FindHysteresis).
	RecoveredAbove = 0.9
)

// Ramp is the hysteresis loop of a run: its settings, the thresholds
// found and every step.
type Ramp struct {
	RampPlan
	// Collapse is the load (requests/s) of the first step on the way up
	// whose goodput fell below CollapseBelow × demand; nil if none did.
	Collapse *float64 `json:"collapse"`
	// Recovery is the load of the first step on the way down, after the
	// collapse, whose goodput was back at RecoveredAbove × demand or more;
	// nil if there was no collapse or no recovery down to From.
	Recovery *float64 `json:"recovery"`
	// Steps in time order: up from From to To, then down to From.
	Steps []Step `json:"steps"`
	// Simulations (1) and their virtual time, seconds.
	Simulations int     `json:"simulations"`
	VirtualS    float64 `json:"virtual_s"`
}

// Step is one load step of the ramp, measured over its second half.
type Step struct {
	Branch string  `json:"branch"` // "up" or "down"
	Load   float64 `json:"load"`   // the client's arrival rate, requests/s
	T      float64 `json:"t"`      // start of the step, seconds
	// Demand and Goodput of the client, requests/s (see result.ClientBin).
	Demand  float64 `json:"demand"`
	Goodput float64 `json:"goodput"`
	// Offered: attempts/s arriving at the client's target service, first
	// tries and retries.
	Offered float64 `json:"offered"`
}

// Phase is the phase diagram of a run: its settings and one column per
// load.
type Phase struct {
	PhasePlan
	// Columns, one per load, ascending.
	Columns []Column `json:"columns"`
}

// Column is the search at one load.
type Column struct {
	// Load: the client's arrival rate, requests/s.
	Load float64 `json:"load"`
	// Disturbs is the smallest trigger size after which the run was not
	// stable (it recovered or stayed metastable); nil if every size up to
	// Max left it stable.
	Disturbs *float64 `json:"disturbs"`
	// Tips is the smallest trigger size that left the system metastable;
	// nil if none up to Max did. Tips = Min means metastable without a
	// trigger: the load alone is too much.
	Tips *float64 `json:"tips"`
	// Probes are the runs made, by size.
	Probes []Probe `json:"probes"`
	// Simulations run for the column and their virtual time, seconds.
	Simulations int     `json:"simulations"`
	VirtualS    float64 `json:"virtual_s"`
}

// Overloaded reports whether the load alone, without a trigger, left the
// system metastable.
func (c Column) Overloaded() bool {
	return c.Tips != nil && len(c.Probes) > 0 && *c.Tips == c.Probes[0].Size
}

// Probe is one run of the phase search.
type Probe struct {
	// Size of the trigger, in the phase's unit.
	Size    float64 `json:"size"`
	Verdict string  `json:"verdict"` // stable, recovered or metastable
	// RecoveryS as in result.Result: seconds from the end of the trigger
	// until goodput was healthy again; nil when metastable.
	RecoveryS *float64 `json:"recovery_s"`
}
