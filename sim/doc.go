// Package sim is a deterministic discrete-event simulator of clients,
// services and the retry storms between them. It runs the same policy code
// as production — the retrier, budgets, breakers, limiters, shedders and
// admission gate of stormguard's other packages — in virtual time: those
// cores take time and randomness as arguments, and sim hands them the
// virtual clock and seeded random streams instead of the wall clock.
//
// Package sim is the model alone. A [scenario.Scenario] describes the
// system (clients with their arrivals and retry policies, services with
// their capacity, queues and defenses, the calls between them), the
// triggers that hurt it (outages, latency spikes, load bursts, cache
// flushes) and the operators' runbook actions; package scenario loads it
// from a YAML file strictly, with file:line errors. [Run] simulates one
// run and returns a [result.Result]: time series per client and service in
// the vocabulary of the seeds (offered load, throughput, goodput, wasted
// work, retries, give-ups by reason) and a verdict — stable, recovered (and
// when) or metastable — with the reason in Why, by package result's rule
// ([result.Judge]).
//
// The same scenario and seed always give the same Result, byte for byte.
// [Estimate] predicts a scenario's events and memory before it runs, and
// [RunWithin] refuses one beyond [Limits]; both runs stop within a fraction
// of a second of their context being cancelled. The scenario format and
// every model rule are documented in docs/simulator.md, the packages'
// parts in docs/architecture.md; `stormguard sim` is the command-line
// front end.
package sim
