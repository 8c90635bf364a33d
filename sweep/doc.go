// Package sweep finds where a simulated system tips over and where it
// comes back: the collapse and recovery thresholds of its hysteresis loop,
// and the smallest trigger that leaves it metastable at each load.
//
// Two experiments, both through the simulator (package sim):
//
//   - The ramp: the load (one client's arrival rate) climbs in steps from
//     From to To and comes back down, each step held long enough to settle,
//     in one long run so that the state carries from step to step. Goodput
//     against load on the way up and on the way down draws the hysteresis
//     loop; the collapse threshold is where goodput falls below half the
//     demand on the way up, the recovery threshold where it is back above
//     90 % on the way down.
//   - The phase search, the method of "Metastable Failures in the Wild"
//     (OSDI '22): at each load of a grid, a bisection over the size of a
//     trigger (its duration, or its factor) for the smallest one that
//     leaves the system metastable, and the smallest one that disturbs it
//     at all. Together they split the plane load × trigger into stable,
//     recovered and metastable regions: the phase diagram.
//   - The runbook questions, when asked (see plan/runbook.go): the smallest
//     capacity factor that, added at a given time, brings each run back;
//     the latest time a given factor still does; and every run of the file
//     over several seeds, ranked by time to recover.
//
// NewPlan resolves a scenario file and Options (zero fields take defaults
// derived from the scenario's capacity) into a Plan; Run carries it out on
// every core. A plan splits into jobs (a ramp, or the search at one load)
// that Execute runs for one Shard of it, and Merge puts the shards'
// Partials together. Every job is a deterministic function of the plan, so
// the Result is the same whatever the number of workers or shards.
//
// The plan, the jobs, the results and the partials are plain data, and
// live in package plan (sweep/plan), which does not import the simulator;
// sweep re-exports them (sweep.Plan is plan.Plan, sweep.NewPlan calls
// plan.New) and adds what runs the model: Execute and Run, the searches,
// and the cost guard (Estimate, Exec.Limits).
package sweep
