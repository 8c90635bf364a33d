// Package scenario is the simulator's scenario format: the plain-data
// description of a system (clients with their arrivals and retry policies,
// services with their capacity, queues and defenses, the calls between
// them), the triggers that hurt it and the operators' runbook, with
// everything that belongs to the format rather than to the model — the
// defaults of its zero fields ([Scenario.WithDefaults]), its validation
// with the path of every problem ([Scenario.Validate], [FieldError]), the
// strict loading of a scenario file with file:line errors, its runs and
// sweeps ([Load], [Parse], [Read] into a [File]), the policy files it may
// reference ([PolicyRef], [ServerRef]), the open-loop arrival process a
// scenario's arrivals mean ([Arrivals.NextArrival], drawn the same way by
// the simulator and the lab's load generator).
//
// Package sim runs a Scenario; package result holds what a run gives and
// judges it; analyze, report, sweep and lab read the format from here
// without the model. docs/simulator.md documents the format and
// docs/architecture.md which package owns which decision.
package scenario
