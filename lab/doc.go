// Package lab reproduces a retry storm with real processes on 127.0.0.1
// and measures it in the vocabulary of the simulator.
//
// A lab run takes a scenario of package sim (the same YAML) and starts one
// OS process per role, all from the stormguard binary (hidden subcommands
// `stormguard lab ROLE --config FILE`, see [RoleMain]):
//
//	loadgen   the scenario's client: open-loop arrivals (Poisson or evenly
//	          spaced, at a rate schedule) with its own timeout and retry
//	          policy; it records every request's one outcome
//	app       the service the client calls, when that service makes a
//	          downstream call: it calls the backend through stormguard's
//	          httpx.Transport with the call's policy (a preset such as naive,
//	          aws-standard, aws-2026 or stormguard), and serves through the
//	          httpx.Server middleware when its defenses are on
//	proxy     a TCP fault proxy in front of the backend: it holds the bytes,
//	          cuts the connections or adds latency during the scenario's
//	          outage and latency triggers
//	backend   the last service: a worker pool with a service-time
//	          distribution, an admission queue and the capacity that degrades
//	          as the queue grows; behind httpx.Server when its defenses are on,
//	          admitting as the simulator's core (scenario.Service.Admission)
//
// The roles share a start time and count events in the scenario's bins
// (100 ms by default in the lab); the orchestrator ([RunScenario]) collects
// their counts into a result.Result, so the lab's runs are judged by the
// simulator's rule ([result.Judge]) and drawn by its reports.
//
// Every child process runs in its own process group, dies with the
// orchestrator (Pdeathsig on Linux, and end of its standard input
// everywhere) and is killed and reaped when a run ends, fails or is
// cancelled: no process or listening port outlives a run. A run's
// directory records its owner, so that the next run removes the directory
// of an orchestrator that was killed ([RemoveStale]); under `go run` the
// orchestrator stops when the go command ends ([WatchGoRun]).
//
// The roles measure their own machine: how late their timers fire and
// how long the services' work takes against the service time drawn. A
// run whose host was starved ([Host], [StarvedTimerLate],
// [StarvedServiceRatio]) gets the verdict [VerdictInconclusive], with the
// figures, instead of one the machine caused, and is not compared with
// the simulator.
//
// Scenarios the lab runs have one client, which calls either a service
// with exactly one downstream call (the app) or the backend directly; the
// backend makes no calls. Triggers: outage (hold or drop) and latency into
// the backend, load, and capacity and errors of the backend. [Check] names
// what a scenario uses that the lab cannot run.
package lab
