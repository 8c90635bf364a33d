package lab

import (
	"math"

	"github.com/stormguard/stormguard/sim/result"
)

// Output is what `stormguard lab --json` prints: the lab's runs in the
// shape of `stormguard sim --json` (scenario, description, runs[] with
// name, verdict, recovery_s …), the simulator's runs of the same
// scenarios, their comparison, and the accounting of every run.
type Output struct {
	// Scenario is the scenario's name; Description its description.
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	// Runs are the lab's runs, measured and judged.
	Runs []result.Result `json:"runs"`
	// Sim are the simulator's runs of the same scenarios, in the same
	// order.
	Sim []result.Result `json:"sim"`
	// Comparisons set each lab run's goodput beside the simulator's.
	Comparisons []Comparison `json:"sim_vs_lab"`
	// Outcomes account for every request of each run.
	Outcomes []RunOutcomes `json:"outcomes"`
}

// RunOutcomes is the accounting of one lab run.
type RunOutcomes struct {
	// Run is the run's name.
	Run string `json:"run"`
	// Outcomes accounts for the run's requests.
	Outcomes Outcomes `json:"outcomes"`
	// Proxy is what the fault proxy did.
	Proxy ProxyStats `json:"proxy"`
	// Procs lists the run's role processes.
	Procs []Proc `json:"procs"`
	// After is goodput / demand after the last trigger ended;
	// AfterRecovery the same from the recovery on (null when the run never
	// recovered).
	After         float64  `json:"after"`
	AfterRecovery *float64 `json:"after_recovery"`
	// MaxLagS is how far the load generator fell behind its schedule, in
	// seconds; WallS how long the run took.
	MaxLagS float64 `json:"max_lag_s"`
	WallS   float64 `json:"wall_s"`
	// Host is the run's account of its own machine (see Host): a starved
	// run's verdict is "inconclusive".
	Host Host `json:"host"`
}

// Add appends a lab run and the simulator's run of the same scenario.
func (o *Output) Add(labRun RunResult, simRun result.Result) {
	o.Runs = append(o.Runs, labRun.Result)
	o.Sim = append(o.Sim, simRun)
	c := Compare(labRun.Result, simRun, DefaultWindow)
	if c.Inconclusive {
		c.Reason = labRun.Host.Reason
	}
	o.Comparisons = append(o.Comparisons, c)
	ro := RunOutcomes{Run: labRun.Result.Name, Outcomes: labRun.Outcomes, Proxy: labRun.Proxy, Procs: labRun.Procs,
		After: afterRatio(labRun.Result), MaxLagS: labRun.MaxLagS, WallS: labRun.WallS, Host: labRun.Host}
	if a := AfterRecovery(labRun.Result); !math.IsNaN(a) {
		ro.AfterRecovery = &a
	}
	o.Outcomes = append(o.Outcomes, ro)
}
