// Package sim is a deterministic discrete-event simulator of clients,
// services and the retry storms between them. It runs the same policy code
// as production — the retrier, budgets, breakers, limiters, shedders and
// admission gate of stormguard's other packages — in virtual time: those
// cores take time and randomness as arguments, and sim hands them the
// virtual clock and seeded random streams instead of the wall clock.
//
// A [Scenario] describes the system (clients with their arrivals and retry
// policies, services with their capacity, queues and defenses, the calls
// between them), the triggers that hurt it (outages, latency spikes, load
// bursts, cache flushes) and the operators' runbook actions. [Load], [Parse]
// or [Read] decode a YAML scenario file strictly, with file:line errors,
// into a [File] whose runs are complete, validated scenarios; [Run] simulates
// one and returns a [Result]: time series per client and service in the
// vocabulary of the seeds (offered load, throughput, goodput, wasted work,
// retries, give-ups by reason) and a verdict — stable, recovered (and when)
// or metastable — with the reason in Why.
//
// The same scenario and seed always give the same Result, byte for byte.
// [Estimate] predicts a scenario's events and memory before it runs, and
// [RunWithin] refuses one beyond [Limits]; both runs stop within a fraction
// of a second of their context being cancelled. The scenario format and
// every model rule are documented in docs/simulator.md; `stormguard sim`
// is the command-line front end.
package sim
