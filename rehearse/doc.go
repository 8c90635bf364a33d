// Package rehearse runs a retry storm against a user's own service, before
// the incident does: the scenario's clients (open-loop arrivals on its rate
// schedule, drawn from the simulator's random streams, each with its retry
// policy, through the production retry, httpx and grpcx code) send real
// requests to a real endpoint on 127.0.0.1; the lab's fault proxy
// (lab.Proxy: hold and release, drop, latency) and an HTTP-aware fault
// front (injected errors) sit on the path during the scenario's
// triggers; the runbook's steps turn the real kill switch (a service's
// admin endpoint, or the fleet's dials on Redis) at their times. What
// happened is measured in the simulator's vocabulary from the clients'
// side (lab.ClientCounter) and, when the service exposes stormguard's
// metrics, from its side; it is judged by the simulator's rule
// (result.Judge), on a host the lab's probe found fit to measure.
//
// A rehearsal is safe by construction (see NewPlan and Limits): it sends
// to loopback addresses only unless the caller names a remote one, caps
// its rate and duration, counts every attempt against the plan's worst
// case and refuses one more (Guard), stops all load when its context ends
// and still returns what it measured, and restores the dials it turned.
//
// docs/rehearse.md documents the format, the safety rules and the fitted
// model of --predict.
package rehearse
