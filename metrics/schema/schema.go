// Package schema defines stormguard's metrics once: every series' name,
// type, unit, labels, meaning and histogram buckets, the values its labels
// take, and how each event of the retry core ([retry.Event]) and each
// snapshot of a server's counters ([admit.Stats]) moves them. Both
// exporters are built from it — package metrics for Prometheus, package
// otelx for OpenTelemetry — so that a series has one name, one unit and
// one meaning whichever exporter a service uses, and one dashboard and one
// set of alert rules serve both.
//
// It imports only the standard library and stormguard's core packages;
// read it to write an exporter of your own. docs/metrics.md is generated
// from [All] (see TestDocsTable).
//
// # Rules of the schema
//
//   - One meaning per name: client and server series have names of their
//     own (stormguard_client_…, stormguard_server_…), never one name told
//     apart by a label.
//   - No double counting: every event moves exactly one series of one
//     counter (or one histogram), and no counter is the sum of others.
//     Quantities made of several outcomes (throughput is goodput, failed
//     and wasted together) are sums over a label, made by the query (the
//     recording rules in deploy/prometheus do it once).
//   - Units in names, as Prometheus names them: _seconds, _tokens,
//     _requests, and _total for counters; [Metric].Unit is the same unit
//     in UCUM, as OpenTelemetry wants it.
//   - Every series of a target exists, at zero, from the moment its
//     collector is registered, so that a rate over it has no gap at the
//     start.
package schema

// Kind is a metric's type.
type Kind uint8

// The kinds.
const (
	// Counter: a count since the process started, that only goes up.
	Counter Kind = iota + 1
	// Gauge: a value now.
	Gauge
	// Histogram: a distribution of observations, in buckets, with their
	// count and sum.
	Histogram
)

var kindNames = [...]string{Counter: "counter", Gauge: "gauge", Histogram: "histogram"}

// String returns the kind's name, such as "counter".
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "schema.Kind(?)"
}

// Side says which end of a hop a metric describes.
type Side string

// The sides.
const (
	// Client: the caller, counting what it sends to a dependency.
	Client Side = "client"
	// Server: the service, counting what arrives and what becomes of it.
	Server Side = "server"
	// Dials: the process's runtime dials (the kill switch), read by its
	// clients and servers alike.
	Dials Side = "dials"
	// Policy: the policy file a process runs (policyfile.Live).
	Policy Side = "policy"
)

// Metric describes one metric of the schema.
type Metric struct {
	// Name is the metric's name, the same for every exporter: Prometheus
	// (with its _total, _seconds… suffixes) and OpenTelemetry, whose
	// instrument is given the same name so that an OpenTelemetry pipeline
	// into Prometheus ends at the same series.
	Name string
	Kind Kind
	Side Side
	// Unit is the unit in UCUM ("s", "{request}", "1"), as OpenTelemetry
	// states it; the name already carries it for Prometheus.
	Unit string
	// Labels are the label (attribute) names, target first.
	Labels []string
	// Help is the one-line meaning.
	Help string
	// Buckets are a histogram's upper bounds, in Unit.
	Buckets []float64
	// External is set for the metrics another collector registers (the
	// circuit breaker's, metrics/breaker.go): listed for the dashboard and
	// the documentation, not built by the exporters of this schema.
	External bool
}

// Label names. Every series has LabelTarget: on the client the dependency
// called, on the server the service itself.
const (
	LabelTarget  = "target"
	LabelTry     = "try"     // first or retry
	LabelClass   = "class"   // how an attempt ended: a retry class
	LabelOutcome = "outcome" // how a request ended
	LabelReason  = "reason"  // why: the outcome's reason, "" for an outcome that has none
	LabelOrigin  = "origin"  // where the dials' last change came from: none, local, fleet
	LabelVersion = "version" // a policy file's version: a hash of its bytes
	LabelResult  = "result"  // how a reload of a policy file ended: applied, refused
)

// exponential returns n bounds from start, each factor times the last.
func exponential(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// The metrics of the client: what a retrier sends to one dependency.
var (
	// ClientAttempts counts the attempts a client made that ended, by try
	// (the first try of a request, or a retry) and by how each ended (its
	// retry class): the load the client offers the target, first tries
	// and retries apart. An attempt refused locally, before it was sent
	// (client-side throttling, a deadline that passed), counts too, with
	// its class.
	ClientAttempts = Metric{
		Name: "stormguard_client_attempts_total", Kind: Counter, Side: Client, Unit: "{attempt}",
		Labels: []string{LabelTarget, LabelTry, LabelClass},
		Help:   "Attempts the client made that ended, by try (first, retry) and by how they ended (the retry class): the load it offered the target.",
	}
	// ClientRequestDuration is the time from the start of a request's
	// first attempt to its outcome — success, or gave up with the reason
	// retrying stopped — waits between attempts included. Its count is the
	// requests that ended, each once: goodput is the count of outcome
	// "success". Buckets from 1 ms to about 33 s, doubling.
	ClientRequestDuration = Metric{
		Name: "stormguard_client_request_duration_seconds", Kind: Histogram, Side: Client, Unit: "s",
		Labels:  []string{LabelTarget, LabelOutcome, LabelReason},
		Help:    "Time from the start of a request's first attempt to its outcome (success, or gave-up with the reason retrying stopped); its count is the requests that ended.",
		Buckets: exponential(0.001, 2, 16),
	}
	// ClientBudgetTokens is the level of the client's retry budget now,
	// for the budgets that have one (token bucket, token ratio).
	ClientBudgetTokens = Metric{
		Name: "stormguard_client_retry_budget_tokens", Kind: Gauge, Side: Client, Unit: "{token}",
		Labels: []string{LabelTarget},
		Help:   "Tokens in the client's retry budget now.",
	}
	// ClientBudgetCapacity is the level of the retry budget when full.
	ClientBudgetCapacity = Metric{
		Name: "stormguard_client_retry_budget_capacity_tokens", Kind: Gauge, Side: Client, Unit: "{token}",
		Labels: []string{LabelTarget},
		Help:   "Tokens in the client's retry budget when it is full.",
	}
	// ClientBudgetFallback is 1 while a fleet-wide budget has fallen back
	// to this process's local share (its store is unreachable), else 0.
	ClientBudgetFallback = Metric{
		Name: "stormguard_client_retry_budget_fallback", Kind: Gauge, Side: Client, Unit: "1",
		Labels: []string{LabelTarget},
		Help:   "1 while a fleet-wide retry budget has fallen back to this process's local share (its store is unreachable), else 0.",
	}
)

// The metrics of the server: what arrives at a service and what becomes of
// it.
var (
	// ServerOffered counts the requests that arrived (the offered load),
	// first tries and retries apart (by the attempt number on the wire).
	ServerOffered = Metric{
		Name: "stormguard_server_offered_total", Kind: Counter, Side: Server, Unit: "{request}",
		Labels: []string{LabelTarget, LabelTry},
		Help:   "Requests that arrived at the server (the offered load), by try: first, or retry (an attempt number above 1).",
	}
	// ServerRequests counts the requests that ended, each once, by outcome
	// and reason (see [ServerOutcomes]). Throughput is the sum of goodput,
	// failed and wasted (the handlers that ran to the end); once nothing is
	// in progress, the sum of all outcomes equals ServerOffered.
	ServerRequests = Metric{
		Name: "stormguard_server_requests_total", Kind: Counter, Side: Server, Unit: "{request}",
		Labels: []string{LabelTarget, LabelOutcome, LabelReason},
		Help:   "Requests that ended, by outcome (goodput, failed, wasted, shed, expired, canceled, superseded) and reason; throughput is goodput + failed + wasted.",
	}
	// ServerQueueWait is how long admitted requests waited in the
	// admission queue for a slot: 0 for those admitted at once. Buckets
	// from 0.5 ms to about 16 s, doubling.
	ServerQueueWait = Metric{
		Name: "stormguard_server_queue_wait_seconds", Kind: Histogram, Side: Server, Unit: "s",
		Labels:  []string{LabelTarget},
		Help:    "Time admitted requests waited in the admission queue for a slot; 0 for those admitted at once.",
		Buckets: exponential(0.0005, 2, 16),
	}
	// ServerConcurrencyLimit is the adaptive concurrency limit now.
	ServerConcurrencyLimit = Metric{
		Name: "stormguard_server_concurrency_limit_requests", Kind: Gauge, Side: Server, Unit: "{request}",
		Labels: []string{LabelTarget},
		Help:   "The concurrency limit now: the most requests the server runs at once.",
	}
	// ServerInFlight is the number of requests running now.
	ServerInFlight = Metric{
		Name: "stormguard_server_in_flight_requests", Kind: Gauge, Side: Server, Unit: "{request}",
		Labels: []string{LabelTarget},
		Help:   "Requests admitted and running now.",
	}
	// ServerQueued is the number of requests waiting in the admission
	// queue now.
	ServerQueued = Metric{
		Name: "stormguard_server_queued_requests", Kind: Gauge, Side: Server, Unit: "{request}",
		Labels: []string{LabelTarget},
		Help:   "Requests waiting in the admission queue now.",
	}
)

// The metrics of the dials: the kill switch's state in one process
// (killswitch.Dials), so that a dashboard shows whether "retries off" took
// effect, in which process (the instance label the scrape adds), since
// when and whether it was set here or for the fleet. target names the
// dials: the service whose process they steer.
var (
	// DialsRetriesOff is 1 while the dials turn retries off, else 0.
	DialsRetriesOff = Metric{
		Name: "stormguard_dials_retries_off", Kind: Gauge, Side: Dials, Unit: "1",
		Labels: []string{LabelTarget},
		Help:   "1 while the kill switch turns retries off in this process, else 0.",
	}
	// DialsShedRatio is the fraction of requests the dials shed, in [0, 1].
	DialsShedRatio = Metric{
		Name: "stormguard_dials_shed_ratio", Kind: Gauge, Side: Dials, Unit: "1",
		Labels: []string{LabelTarget},
		Help:   "The fraction of requests the kill switch sheds in this process, in [0, 1].",
	}
	// DialsLimitOverride is the concurrency limit the dials pin every
	// limiter to, 0 for none.
	DialsLimitOverride = Metric{
		Name: "stormguard_dials_limit_override_requests", Kind: Gauge, Side: Dials, Unit: "{request}",
		Labels: []string{LabelTarget},
		Help:   "The concurrency limit the kill switch pins every limiter of this process to; 0 for none.",
	}
	// DialsLastChange is when the dials last changed, in seconds since
	// the Unix epoch, with where the change came from (label origin:
	// local, fleet); 0 with origin none if they never changed.
	DialsLastChange = Metric{
		Name: "stormguard_dials_last_change_timestamp_seconds", Kind: Gauge, Side: Dials, Unit: "s",
		Labels: []string{LabelTarget, LabelOrigin},
		Help:   "When the kill switch's dials last changed in this process (Unix time), by origin: local (this process) or fleet; 0 with origin none if never.",
	}
)

// The metrics of a live policy file (policyfile.Live): which version each
// process runs, and how its reloads went. target is the service the file
// is for.
var (
	// PolicyVersion is 1 for the version of the policy file the process
	// runs now (label version: the first 12 hex digits of the SHA-256 of
	// its bytes).
	PolicyVersion = Metric{
		Name: "stormguard_policy_version_info", Kind: Gauge, Side: Policy, Unit: "1",
		Labels: []string{LabelTarget, LabelVersion},
		Help:   "1 for the version of the policy file this process runs now (version: the first 12 hex digits of the SHA-256 of its bytes).",
	}
	// PolicyReloads counts the new versions of the policy file the
	// process read, by result: applied, or refused (invalid: the last
	// good version keeps running).
	PolicyReloads = Metric{
		Name: "stormguard_policy_reloads_total", Kind: Counter, Side: Policy, Unit: "{reload}",
		Labels: []string{LabelTarget, LabelResult},
		Help:   "New versions of the policy file this process read, by result: applied, or refused (invalid: the last good version keeps running).",
	}
)

// The values of label result.
const (
	ResultApplied = "applied"
	ResultRefused = "refused"
)

// PolicyState is what a live policy file reports for PolicyVersion and
// PolicyReloads.
type PolicyState struct {
	Version          string // the version running now
	Applied, Refused uint64 // reloads by result
}

// The circuit breaker's metrics, registered by its own collector
// (metrics/breaker.go) and listed here for the dashboard and the
// documentation. Their labels beyond target are the breaker's.
var (
	BreakerState = Metric{
		Name: "stormguard_breaker_state", Kind: Gauge, Side: Client, Unit: "1",
		Labels:   []string{LabelTarget},
		Help:     "The circuit breaker's state now: 0 closed, 1 half-open, 2 open.",
		External: true,
	}
	BreakerTransitions = Metric{
		Name: "stormguard_breaker_transitions_total", Kind: Counter, Side: Client, Unit: "{transition}",
		Labels:   []string{LabelTarget, "to"},
		Help:     "The circuit breaker's changes of state, by the state it changed to.",
		External: true,
	}
	BreakerRefused = Metric{
		Name: "stormguard_breaker_refused_total", Kind: Counter, Side: Client, Unit: "{call}",
		Labels:   []string{LabelTarget},
		Help:     "Calls the circuit breaker refused, unsent.",
		External: true,
	}
)

// BreakerStateValue is the value of stormguard_breaker_state for a state's
// name: 0 closed, 1 half-open, 2 open (-1 for an unknown name).
func BreakerStateValue(state string) int {
	switch state {
	case "closed":
		return 0
	case "half-open":
		return 1
	case "open":
		return 2
	}
	return -1
}

// All returns every metric of the schema, client first, then server, then
// the dials and the policy file, then the external ones.
func All() []Metric {
	return []Metric{
		ClientAttempts, ClientRequestDuration, ClientBudgetTokens, ClientBudgetCapacity, ClientBudgetFallback,
		ServerOffered, ServerRequests, ServerQueueWait, ServerConcurrencyLimit, ServerInFlight, ServerQueued,
		DialsRetriesOff, DialsShedRatio, DialsLimitOverride, DialsLastChange,
		PolicyVersion, PolicyReloads,
		BreakerState, BreakerTransitions, BreakerRefused,
	}
}

// Lookup returns the metric named name.
func Lookup(name string) (Metric, bool) {
	for _, m := range All() {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}
