package result

import (
	"errors"
	"iter"
	"slices"

	"github.com/stormguard/stormguard/retry"
)

// Result is one run of a scenario: its time series and its verdict. The
// JSON keys name, verdict and recovery_s are stable: tools rely on them.
//
// The run's verdict is the worst of its clients' and services' (each
// judged in its series, see Judge); DecidedBy names the one it comes
// from, and Why begins with it.
type Result struct {
	Name string `json:"name"`
	// Judgement: the run's verdict and its reasons (its JSON keys verdict,
	// recovery_s, collapse_s, first_collapse_s, recovered_s,
	// recovery_from and why are the run's own):
	//
	//   - Verdict is Stable, Recovered, Metastable, Degraded or NotJudged
	//     (see Judge); the lab's runs on a starved host are
	//     "inconclusive".
	//   - RecoveryS: seconds from the end of the last trigger (or, for a
	//     collapse that began after it or with no trigger at all, from the
	//     collapse's start) until requests succeeded again; 0 when stable,
	//     null when metastable, degraded or not judged. RecoveryFrom says
	//     what it counts from: "trigger", "collapse" or "first-collapse"
	//     (for a run that relapsed).
	//   - CollapseS: when the collapse the verdict judged began; null when
	//     the run was stable or degraded. FirstCollapseS: when the
	//     incident began, earlier than CollapseS when the run relapsed
	//     (came back and collapsed again while the same trigger lasted).
	//   - RecoveredS: when requests succeeded again, in seconds of the run.
	//   - Why explains the verdict in one sentence, naming the client or
	//     service that decided it.
	Judgement
	// DecidedBy names the client or service whose verdict is the run's:
	// "clients.NAME" or "services.NAME".
	DecidedBy string `json:"decided_by,omitempty"`
	// StoppedS is set when a run made with RunJudged stopped early, its
	// verdict settled: when it stopped (DurationS is then that time, and
	// the series end there).
	StoppedS *float64 `json:"stopped_s,omitempty"`

	Seed      uint64  `json:"seed"`
	BinS      float64 `json:"bin_s"`
	DurationS float64 `json:"duration_s"`
	// TriggerS lists [start, end] of every trigger, in seconds.
	TriggerS [][2]float64 `json:"trigger_s"`
	// Actions lists the runbook's steps as they happened.
	Actions []ActionMark `json:"actions,omitempty"`
	Events  uint64       `json:"events"`

	Clients  []ClientSeries  `json:"clients"`
	Services []ServiceSeries `json:"services"`
}

// Judgement is the verdict on one client's requests or one service's
// work, with its reasons: the same fields as the run's (see Result).
type Judgement struct {
	Verdict        string   `json:"verdict"`
	RecoveryS      *float64 `json:"recovery_s"`
	CollapseS      *float64 `json:"collapse_s"`
	FirstCollapseS *float64 `json:"first_collapse_s"`
	RecoveredS     *float64 `json:"recovered_s"`
	RecoveryFrom   string   `json:"recovery_from,omitempty"`
	Why            string   `json:"why"`
}

// ClientSeries is one client population's view: requests, not attempts.
// Its Judgement is the verdict on its requests alone.
//
// Its bins are in Bins, or, when Stream is set (and Bins nil), read one at
// a time from where the run kept them: a run made to stream its series
// (sim.RunSpooled) leaves them in a [Spool]. Each gives them either way;
// [WriteJSON] writes such a Result as encoding/json writes one with its
// Bins (encoding/json itself would write "bins": null).
type ClientSeries struct {
	Name string `json:"name"`
	Judgement
	Bins   []ClientBin         `json:"bins"`
	Total  ClientTotal         `json:"total"`
	Stream iter.Seq[ClientBin] `json:"-"`
}

// Each returns the series' bins in order: Bins, or Stream when it is set.
func (c *ClientSeries) Each() iter.Seq[ClientBin] { return each(c.Stream, c.Bins) }

// each is stream, or the values of bins when stream is nil.
func each[T any](stream iter.Seq[T], bins []T) iter.Seq[T] {
	if stream != nil {
		return stream
	}
	return slices.Values(bins)
}

// ClientBin holds one time bin. Rates are per second of virtual time.
type ClientBin struct {
	T float64 `json:"t"` // start of the bin, seconds
	// Demand: new requests per second (first tries).
	Demand float64 `json:"demand"`
	// Goodput: requests per second that ended in success while the caller
	// was still waiting (degraded successes included; see Degraded).
	Goodput float64 `json:"goodput"`
	// Degraded: successes per second served with a fallback somewhere down
	// the call graph.
	Degraded float64 `json:"degraded"`
	// GaveUp: requests per second that ended in failure, by reason.
	GaveUp GiveUps `json:"gave_up"`
	// ArrivedOK and ArrivedFailed count the requests that arrived in this
	// bin by how they ended, whenever that was (per second): the verdict
	// judges requests by arrival, so the lag between arrival and answer
	// does not blur it. Requests still in flight at the end are in neither.
	ArrivedOK     float64 `json:"arrived_ok"`
	ArrivedFailed float64 `json:"arrived_failed"`
	// Latency of the requests that succeeded in this bin, seconds.
	LatencyP50 float64 `json:"latency_p50"`
	LatencyP99 float64 `json:"latency_p99"`
	// Budget: the mean fill of the client processes' retry budgets, as a
	// fraction of full (token budgets), or -1 when the budget has no level.
	Budget float64 `json:"budget"`
}

// GiveUps counts requests that ended in failure, by the reason the retrier
// stopped (the reasons of the retry package).
type GiveUps struct {
	Attempts     float64 `json:"attempts_exhausted"`
	Budget       float64 `json:"budget_exhausted"`
	Deadline     float64 `json:"deadline"`
	NotRetryable float64 `json:"not_retryable"`
	ServerStop   float64 `json:"server_said_stop"`
	Disabled     float64 `json:"retries_disabled"`
	Declined     float64 `json:"retry_declined"`
	BreakerOpen  float64 `json:"breaker_open"`
}

// Reason is one counter of GiveUps: the reason a retrier gave up, as the
// results count it.
type Reason uint8

// The counters of GiveUps, in its order.
const (
	ReasonAttempts     Reason = iota // Attempts
	ReasonBudget                     // Budget
	ReasonDeadline                   // Deadline
	ReasonNotRetryable               // NotRetryable
	ReasonServerStop                 // ServerStop
	ReasonDisabled                   // Disabled
	ReasonDeclined                   // Declined
	ReasonBreakerOpen                // BreakerOpen
)

// ReasonOf is the counter of a request given up for err, one of package
// retry's Err… reasons (wrapped or not): ErrCanceled counts as a deadline
// (the caller's time ran out before the request could end), and an error
// that is none of them as attempts exhausted. The simulator and the lab
// both count their give-ups by it.
func ReasonOf(err error) Reason {
	// The retrier's reasons are its sentinels themselves, mostly: a
	// comparison finds them, where errors.Is would cost some hundred
	// instructions each (a failing request's, in the simulator). The
	// commonest is compared inline; wrapped ones go the long way, to the
	// same counters.
	if err == retry.ErrAttemptsExhausted {
		return ReasonAttempts
	}
	return reasonOf(err)
}

// reasonOf is ReasonOf past its inlined comparison.
func reasonOf(err error) Reason {
	switch err {
	case retry.ErrBudgetExhausted:
		return ReasonBudget
	case retry.ErrDeadline, retry.ErrCanceled:
		return ReasonDeadline
	}
	switch {
	case errors.Is(err, retry.ErrBudgetExhausted):
		return ReasonBudget
	case errors.Is(err, retry.ErrDeadline), errors.Is(err, retry.ErrCanceled):
		return ReasonDeadline
	case errors.Is(err, retry.ErrNotRetryable):
		return ReasonNotRetryable
	case errors.Is(err, retry.ErrServerSaidStop):
		return ReasonServerStop
	case errors.Is(err, retry.ErrRetriesDisabled):
		return ReasonDisabled
	case errors.Is(err, retry.ErrRetryDeclined):
		return ReasonDeclined
	case errors.Is(err, retry.ErrBreakerOpen):
		return ReasonBreakerOpen
	}
	return ReasonAttempts
}

// Inc counts one give-up in counter r.
func (g *GiveUps) Inc(r Reason) { *g.counter(r)++ }

// Of returns the count of the counter of err (see ReasonOf).
func (g GiveUps) Of(err error) float64 { return *g.counter(ReasonOf(err)) }

// counter is g's field r.
func (g *GiveUps) counter(r Reason) *float64 {
	switch r {
	case ReasonAttempts:
		return &g.Attempts
	case ReasonBudget:
		return &g.Budget
	case ReasonDeadline:
		return &g.Deadline
	case ReasonNotRetryable:
		return &g.NotRetryable
	case ReasonServerStop:
		return &g.ServerStop
	case ReasonDisabled:
		return &g.Disabled
	case ReasonDeclined:
		return &g.Declined
	case ReasonBreakerOpen:
		return &g.BreakerOpen
	}
	return &g.Attempts
}

// Sum returns all give-ups together.
func (g GiveUps) Sum() float64 {
	return g.Attempts + g.Budget + g.Deadline + g.NotRetryable + g.ServerStop + g.Disabled + g.Declined + g.BreakerOpen
}

// Scale returns g with every count multiplied by f: counts per bin into
// rates per second.
func (g GiveUps) Scale(f float64) GiveUps {
	return GiveUps{Attempts: g.Attempts * f, Budget: g.Budget * f, Deadline: g.Deadline * f,
		NotRetryable: g.NotRetryable * f, ServerStop: g.ServerStop * f, Disabled: g.Disabled * f,
		Declined: g.Declined * f, BreakerOpen: g.BreakerOpen * f}
}

// ClientTotal sums a client's run. Every request ends in exactly one
// outcome: Requests = Succeeded + Failed + InFlight.
type ClientTotal struct {
	Requests  int64 `json:"requests"`
	Succeeded int64 `json:"succeeded"`
	Degraded  int64 `json:"degraded"`
	Failed    int64 `json:"failed"`
	InFlight  int64 `json:"in_flight_at_end"`
	Attempts  int64 `json:"attempts"`
	Retries   int64 `json:"retries"`
	// HumanRetries: taps after a person's first (see Humans).
	HumanRetries int64   `json:"human_retries,omitempty"`
	GaveUp       GiveUps `json:"gave_up"`
	// Mean time from arrival to outcome, seconds, of the requests that
	// succeeded and of those that failed.
	SuccessLatencyS float64 `json:"success_latency_s"`
	FailureLatencyS float64 `json:"failure_latency_s"`
}

// ServiceSeries is one service's view: attempts, not requests. Its
// Judgement is the verdict on its work: whether its callers were still
// waiting for what it completed, and whether its queue grew without bound.
//
// Its bins are in Bins, or read from Stream (see [ClientSeries]).
type ServiceSeries struct {
	Name string `json:"name"`
	Judgement
	Bins   []ServiceBin         `json:"bins"`
	Total  ServiceTotal         `json:"total"`
	Stream iter.Seq[ServiceBin] `json:"-"`
}

// Each returns the series' bins in order: Bins, or Stream when it is set.
func (s *ServiceSeries) Each() iter.Seq[ServiceBin] { return each(s.Stream, s.Bins) }

// ServiceBin holds one time bin of a service. Rates are per second.
type ServiceBin struct {
	T float64 `json:"t"`
	// Offered: attempts arriving per second, first tries and retries apart.
	OfferedFirst   float64 `json:"offered_first"`
	OfferedRetries float64 `json:"offered_retries"`
	// Throughput: attempts completed per second, whatever their fate.
	Throughput float64 `json:"throughput"`
	// Goodput: completions per second that succeeded while their caller
	// was still waiting (admit's release rule, as production's metrics
	// count it: a failure is not goodput, at any tier).
	Goodput float64 `json:"goodput"`
	// Wasted: completions per second nobody was waiting for any more (the
	// caller had left, or the deadline had passed). Throughput − Goodput −
	// Wasted is the failures answered to a caller that waited.
	Wasted float64 `json:"wasted"`
	// Shed: rejected at admission per second (queue full, limiter, evicted).
	Shed float64 `json:"shed"`
	// Expired: dropped before starting because the deadline had passed.
	Expired float64 `json:"expired_dropped"`
	// Queue: requests waiting at the end of the bin; Busy: workers busy.
	Queue float64 `json:"queue"`
	Busy  float64 `json:"busy"`
	// Limit: the concurrency limit at the end of the bin, summed over the
	// replicas (0 = none).
	Limit float64 `json:"limit"`
	// Hung: attempts per second released from a hang, unanswered.
	Hung float64 `json:"hung"`
	// Crashed: attempts per second lost in a replica's crash; Crashes:
	// crashes in the bin; ReplicasUp: replicas serving at its end.
	Crashed    float64 `json:"crashed"`
	Crashes    float64 `json:"crashes"`
	ReplicasUp float64 `json:"replicas_up"`
	// CacheHits and CacheMisses: lookups per second in the service's
	// look-aside cache (misses are the attempts' first tries).
	CacheHits   float64 `json:"cache_hits"`
	CacheMisses float64 `json:"cache_misses"`
	// OverheadS: seconds of failure work (failure_cost) charged per second.
	OverheadS float64 `json:"overhead_s"`
	// Superseded: queued attempts per second a newer twin replaced.
	Superseded float64 `json:"superseded"`
}

// ServiceTotal sums a service's run. Every attempt that reached the
// service ends in one outcome: Arrived = Completed + Shed + Expired + Hung +
// Crashed + Superseded + Joined + InSystem (Joined: attempts that waited for
// a twin in service and got its answer, without work of their own), and
// Completed = Goodput + Failed + Wasted (Failed: failures answered to a
// caller that still waited). Lost counts attempts refused on the way in (a
// network outage in drop mode, no replica up): they never arrived.
type ServiceTotal struct {
	Arrived    int64 `json:"arrived"`
	Completed  int64 `json:"completed"`
	Goodput    int64 `json:"goodput"`
	Failed     int64 `json:"failed"`
	Wasted     int64 `json:"wasted"`
	Shed       int64 `json:"shed"`
	Expired    int64 `json:"expired_dropped"`
	Hung       int64 `json:"hung"`
	Crashed    int64 `json:"crashed"`
	Superseded int64 `json:"superseded"`
	Joined     int64 `json:"joined"`
	// Lost: attempts refused on the way in.
	Lost     int64 `json:"lost"`
	InSystem int64 `json:"in_system_at_end"`
	// Crashes of its replicas; cache lookups; failure work, seconds.
	Crashes     int64   `json:"crashes"`
	CacheHits   int64   `json:"cache_hits"`
	CacheMisses int64   `json:"cache_misses"`
	OverheadS   float64 `json:"overhead_s"`
}

// Output is what `stormguard sim --json` prints.
type Output struct {
	Scenario    string   `json:"scenario"`
	Description string   `json:"description,omitempty"`
	Runs        []Result `json:"runs"`
}

// ActionMark is an action as a run reports it: when, and its label.
type ActionMark struct {
	T     float64 `json:"t"`
	Kind  string  `json:"kind"`
	Label string  `json:"label"`
}
