package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// relayYAML is a chain app → mid → db in which db fails every attempt
// (an errors trigger of factor 1 over the whole run), quickly (1 ms). The
// app retries once at once and hears the retries-exhausted signal; mid's
// call to db has the policy, breaker and deadline of the case (%[1]s), and
// %[2]s is the rest of the case's services.
const relayYAML = `
name: relay
duration: 10s
clients:
  - {name: app, target: mid, arrivals: {kind: constant, rate: 20}, timeout: 1s, propagate_deadline: true,
     policy: {preset: naive, max_attempts: 2, ignore_signals: false}}
services:
  - {name: mid, workers: 1000, service_time: {kind: constant, mean: 1ms},
     calls: [{service: %[3]s, timeout: 500ms, propagate_deadline: true, %[1]s}]}
  - {name: db, workers: 1000, service_time: {kind: constant, mean: 1ms}}
%[2]s
triggers:
  - {kind: errors, target: db, at: 0s, duration: 10s, factor: 1}
`

// probeYAML is mid's call made by a client instead, for the reason its
// retrier gives up: a client with the call's policy and breaker (%[1]s),
// the deadline mid's call inherits from the app's attempt timeout (1 s),
// against the same services.
const probeYAML = `
name: probe
duration: 10s
clients:
  - {name: probe, target: %[3]s, arrivals: {kind: constant, rate: 20}, timeout: 500ms, deadline: 1s, propagate_deadline: true, %[1]s}
services:
  - {name: db, workers: 1000, service_time: {kind: constant, mean: 1ms}}
%[2]s
triggers:
  - {kind: errors, target: db, at: 0s, duration: 10s, factor: 1}
`

// low is a tier between mid and db that retries db three times and gives
// up: it answers mid "retries exhausted", the server-said-stop signal.
const low = `  - {name: low, workers: 1000, service_time: {kind: constant, mean: 1ms},
     calls: [{service: db, timeout: 500ms, policy: {preset: naive, max_attempts: 3}}]}`

// TestRelayGiveUps: a middle tier whose own retrier gave up relays it
// above as production does (retry.StopsAbove, through sim's callDone):
// the app above retries a give-up after one attempt for attempts or
// deadline, and not one after retries, nor one its budget, its breaker
// or the server below refused. Each case first checks, with mid's call
// made by a client directly, that the call's retrier gives up for the
// case's reason after the case's attempts; then what the app does above
// it: whether it retries, and the reason it gives up for (server said
// stop: the relayed signal; attempts exhausted: it retried).
func TestRelayGiveUps(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		call     string // mid's call: its policy, breaker
		below    string // services below mid besides db
		target   string // what mid calls
		reason   error  // why mid's call gives up
		attempts int    // after how many attempts
		// The app above mid: whether it retries, and why it gives up.
		wantRetry  bool
		wantReason error
	}{
		{"attempts after retries", `policy: {preset: naive, max_attempts: 3}`, "", "db",
			retry.ErrAttemptsExhausted, 3, false, retry.ErrServerSaidStop},
		{"attempts after one", `policy: {preset: naive, max_attempts: 1}`, "", "db",
			retry.ErrAttemptsExhausted, 1, true, retry.ErrAttemptsExhausted},
		{"budget", `policy: {preset: naive, max_attempts: 3, budget: {kind: window, ratio: 0.001}}`, "", "db",
			retry.ErrBudgetExhausted, 1, false, retry.ErrServerSaidStop},
		{"breaker open", `policy: {preset: naive, max_attempts: 1}, breaker: {failures: 1, delay: 1h, jitter: 0}`, "", "db",
			retry.ErrBreakerOpen, 0, false, retry.ErrServerSaidStop},
		{"deadline after one", `policy: {preset: naive, max_attempts: 3, backoff: {kind: constant, base: 2s}}`, "", "db",
			retry.ErrDeadline, 1, true, retry.ErrAttemptsExhausted},
		{"deadline after a retry", `policy: {preset: naive, max_attempts: 3, backoff: {kind: constant, base: 600ms}}`, "", "db",
			retry.ErrDeadline, 2, false, retry.ErrServerSaidStop},
		{"server said stop", `policy: {preset: naive, max_attempts: 3, ignore_signals: false}`, low, "low",
			retry.ErrServerSaidStop, 1, false, retry.ErrServerSaidStop},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The table follows the rule.
			if _, stop := retry.StopsAbove(c.reason, c.attempts); stop == c.wantRetry {
				t.Fatalf("StopsAbove(%v, %d) = %v: the case wants the app to retry = %v", c.reason, c.attempts, stop, c.wantRetry)
			}
			probe := relayRun(t, ctx, fmt.Sprintf(probeYAML, c.call, c.below, c.target), "probe")
			if g := probe.Total.GaveUp; g.Of(c.reason) < 0.95*g.Sum() || g.Sum() == 0 {
				t.Errorf("mid's call gives up for %v in %v of %v requests (%+v), want nearly all", c.reason, g.Of(c.reason), g.Sum(), g)
			}
			// Every request that ended made the case's attempts; one still
			// in flight at the end made at most as many.
			n := int64(c.attempts)
			if done := probe.Total.Requests - probe.Total.InFlight; c.attempts > 0 && (probe.Total.Attempts < n*done || probe.Total.Attempts > n*probe.Total.Requests) {
				t.Errorf("mid's call makes %d attempts for %d requests (%d ended), want %d each: %+v", probe.Total.Attempts, probe.Total.Requests, done, n, probe.Total)
			}

			app := relayRun(t, ctx, fmt.Sprintf(relayYAML, c.call, c.below, c.target), "app")
			done := app.Total.Requests - app.Total.InFlight
			if app.Total.Succeeded != 0 || app.Total.Failed != done || done < 150 {
				t.Fatalf("app: %+v", app.Total)
			}
			if got := 2*app.Total.Retries > done; got != c.wantRetry {
				t.Errorf("the app retries: %v (%d retries, %d requests), want %v", got, app.Total.Retries, done, c.wantRetry)
			}
			if g := app.Total.GaveUp; g.Of(c.wantReason) != float64(done) {
				t.Errorf("the app gives up for %v in %v of %d requests (%+v), want all", c.wantReason, g.Of(c.wantReason), done, g)
			}
		})
	}
}

// relayRun simulates the scenario y and returns the client name's series.
func relayRun(t *testing.T, ctx context.Context, y, name string) result.ClientSeries {
	t.Helper()
	f, err := scenario.Parse("relay.yaml", []byte(strings.ReplaceAll(y, "\t", "  ")))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	r, err := Run(ctx, f.Base, f.Base.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Clients {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no client %s", name)
	return result.ClientSeries{}
}
