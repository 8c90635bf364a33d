package lab

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// What the lab shares with stormguard rehearse (package rehearse), which
// drives real clients against a user's own service: the client's books,
// the random streams, the host probe. They are the lab's own, not copies,
// so that a rehearsal counts, draws and judges its machine as the lab does.

// ClientCounter keeps one client's books in a run's bins, as the lab's
// load generator does: demand at each request's arrival, goodput and
// latency at its end, give-ups by the retrier's reason, the outcomes of
// every request. It is safe for concurrent use.
type ClientCounter struct{ c *clientCounts }

// NewClientCounter returns the books of a run that starts at start, in
// bins of bin, lasting duration.
func NewClientCounter(start time.Time, bin, duration time.Duration) *ClientCounter {
	return &ClientCounter{c: newClientCounts(newClock(start, bin, duration))}
}

// Bins is the number of bins of the run.
func (k *ClientCounter) Bins() int { return k.c.clk.n }

// BinOf returns the bin of t, or -1 outside the run.
func (k *ClientCounter) BinOf(t time.Time) int { return k.c.clk.binOf(t) }

// Sent counts a new request arriving at at.
func (k *ClientCounter) Sent(at time.Time) { k.c.sent(at) }

// Attempts counts the attempts a request made.
func (k *ClientCounter) Attempts(n int) { k.c.attempts(n) }

// Ended counts a request's one outcome at now, latency after it arrived;
// reason is the retrier's reason for giving up (nil for a success).
func (k *ClientCounter) Ended(now time.Time, latency time.Duration, e Ending, reason error) {
	k.c.ended(now, latency, e.o, reason)
}

// SetBudget records the mean fill of the client's retry budgets at the
// end of bin b (see BudgetLevel).
func (k *ClientCounter) SetBudget(b int, level float64) { k.c.setBudget(b, level) }

// Series returns the books as a result.ClientSeries and the outcomes;
// inFlight counts the requests without an outcome.
func (k *ClientCounter) Series(name string, inFlight int64) (result.ClientSeries, Outcomes) {
	return k.c.series(name, inFlight)
}

// Ending is how one request ended, for ClientCounter.Ended.
type Ending struct{ o outcome }

// EndOK is a success (degraded: served with a fallback).
func EndOK(degraded bool) Ending { return Ending{outcome{kind: outcomeSuccess, degraded: degraded}} }

// EndTimedOut is a request whose last attempt ran out of time.
func EndTimedOut() Ending { return Ending{outcome{kind: outcomeTimeout}} }

// EndShed is a request whose last attempt was refused for overload.
func EndShed() Ending { return Ending{outcome{kind: outcomeShed}} }

// EndError is a failure of the given kind ("http 503", "connection
// refused", "grpc UNAVAILABLE" …).
func EndError(kind string) Ending { return Ending{outcome{kind: outcomeError, err: kind}} }

// ClassifyTransport gives the Ending of a transport error (no response):
// timed out, connection refused, reset or closed, canceled, or other, as
// the load generator classifies it.
func ClassifyTransport(err error, deadlinePassed bool) Ending {
	return Ending{classify(err, deadlinePassed)}
}

// BudgetLevel returns the fill of a retry budget as a fraction of full, or
// -1 when the budget has no level (the simulator's rule).
func BudgetLevel(b budget.Budget) float64 { return budgetLevel(b) }

// StreamID derives a random stream's id from stable names, as the load
// generator derives its arrivals' (StreamID("client", NAME, "arrivals"),
// with sim/engine.Stream and the run's seed: the simulator's stream for
// that client).
func StreamID(parts ...string) uint64 { return streamID(parts...) }

// ProbeHost measures this process's scheduling from t0 for d, or until
// ctx ends, as every lab role does (a timer every 10 ms, the runtime's
// scheduling latencies, CPU and run-queue time); the function it returns
// stops the probe and returns the figures.
func ProbeHost(ctx context.Context, t0 time.Time, d time.Duration) func() HostStats {
	return probeHost(ctx, t0, d)
}

// JudgeHost builds a run's Host from its roles' figures, Starved past the
// lab's thresholds (StarvedTimerLate, StarvedServiceRatio, StarvedStall).
func JudgeHost(roles []RoleHost) Host { return judgeHost(roles) }

// PeakRate is the highest arrival rate of a, with the load triggers of ts
// applied as if they all overlapped: the bound the lab checks.
func PeakRate(a scenario.Arrivals, ts []scenario.Trigger) float64 { return peakRate(a, ts) }

// Sample draws a duration from d as the lab's services do.
func Sample(d scenario.Dist, r *rand.Rand) time.Duration { return sample(d, r) }

// RequestBound is the longest a request of a client with policy p, attempt
// timeout and request deadline (0: none) can last, its waits included,
// plus 5 s: how long the load generator waits for its last requests.
func RequestBound(p retry.Policy, timeout, deadline time.Duration) time.Duration {
	return requestBound(LoadgenConfig{Policy: p, Timeout: timeout, Deadline: deadline})
}
