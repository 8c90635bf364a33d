// Package plan is a sweep's data without the simulator: what a sweep asks
// and what it found. It holds the Options and their defaults, the Plan that
// New resolves from a scenario file (the ramp, the phase search and the
// runbook questions of every run), the Jobs a plan splits into and the
// scenario each of their simulations runs, the Result types, and the
// Partial a shard writes, with ReadPartial and Merge.
//
// It imports the scenario format (sim/scenario), never the model (sim):
// readers of sweeps — report, and through it lab and rehearse — import
// this package, and only the runner, package sweep, runs the simulator.
// Package sweep re-exports these names, so sweep.Plan is plan.Plan.
package plan
