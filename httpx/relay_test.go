package httpx_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Retry at one layer, for every reason a call gives up: a front tier calls
// a middle tier, whose handler calls a back end through a Transport and
// relays the give-up (RelayExhaustedError for the give-up error,
// RelayExhausted for the response a Transport with ResponseOnGiveUp
// returns). When retry.StopsAbove says the layers above must not retry,
// the middle tier's 502 carries Stormguard-Retries-Exhausted and the front
// tier stops after one attempt (server said stop); otherwise it retries
// the middle tier as it would any 502.
func TestRelayGiveUps(t *testing.T) {
	busy := reply{status: 503, body: "busy"}
	opened := func() []retry.Option { return []retry.Option{retry.WithBreaker(openBreaker())} }
	opensOnFailure := func() []retry.Option {
		return []retry.Option{retry.WithBreaker(breaker.MustNew(breaker.Spec{Failures: 1, Delay: time.Hour}))}
	}
	tests := []struct {
		name    string
		back    reply
		policy  func(*retry.Policy)
		opts    func() []retry.Option
		timeout time.Duration // the middle tier's deadline on its call; 0: none
		reason  error         // why the middle tier's call gave up
		tries   int           // attempts the middle tier's call sent
		stop    bool          // the front tier must not retry
	}{
		{name: "attempts exhausted", back: busy, reason: retry.ErrAttemptsExhausted, tries: 3, stop: true},
		{name: "budget refused the retry", back: busy,
			opts:   func() []retry.Option { return []retry.Option{retry.WithBudget(denyBudget{})} },
			reason: retry.ErrBudgetExhausted, tries: 1, stop: true},
		{name: "kill switch", back: busy,
			opts:   func() []retry.Option { return []retry.Option{killed()} },
			reason: retry.ErrRetriesDisabled, tries: 1, stop: true},
		{name: "breaker open before the first try", back: busy, opts: opened,
			reason: retry.ErrBreakerOpen, tries: 0, stop: true},
		{name: "breaker opened by the first try", back: busy, opts: opensOnFailure,
			reason: retry.ErrBreakerOpen, tries: 1, stop: true},
		{name: "server said stop: service overloaded", back: reply{status: 503, header: map[string]string{wire.HeaderOverload: "service"}},
			reason: retry.ErrServerSaidStop, tries: 1, stop: true},
		{name: "server said stop: malformed Retry-After", back: reply{status: 503, header: map[string]string{"Retry-After": "soon"}},
			reason: retry.ErrServerSaidStop, tries: 1, stop: true},
		{name: "deadline after one attempt", back: busy,
			policy: func(p *retry.Policy) {
				p.Backoff = backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Second, Cap: 10 * time.Second}
			},
			timeout: 5 * time.Second, // shorter than the backoff: no retry fits
			reason:  retry.ErrDeadline, tries: 1, stop: false},
		{name: "deadline after a retry", back: busy,
			policy: func(p *retry.Policy) {
				p.Backoff = backoff.Policy{Kind: backoff.Exponential, Base: time.Millisecond, Multiplier: 10000, Cap: 10 * time.Second}
			},
			timeout: 5 * time.Second, // room for the 1 ms wait, not the 10 s one
			reason:  retry.ErrDeadline, tries: 2, stop: true},
		{name: "not retryable", back: reply{status: 501}, reason: retry.ErrNotRetryable, tries: 1, stop: false},
	}
	for _, tt := range tests {
		for _, viaResponse := range []bool{false, true} {
			name := tt.name + "/error"
			if viaResponse {
				name = tt.name + "/response"
			}
			t.Run(name, func(t *testing.T) {
				leakcheck.Check(t)
				back := newServer(t, tt.back)
				p := fast()
				if tt.policy != nil {
					tt.policy(&p)
				}
				var opts []retry.Option
				if tt.opts != nil {
					opts = tt.opts()
				}
				var mu sync.Mutex // the hook runs in the middle tier's handler
				var gaveUp error
				var gaveUpAfter int
				opts = append(opts, retry.WithHooks(retry.Hooks{OnGiveUp: func(reason error, attempts int, _ error) {
					mu.Lock()
					defer mu.Unlock()
					gaveUp, gaveUpAfter = reason, attempts
				}}))
				down := sgTransport(t, retry.MustNew(p, opts...))
				down.ResponseOnGiveUp = viaResponse
				var atMiddle atomic.Int32
				var relayed atomic.Bool // by the middle tier's last answer
				middle := startGuarded(t, httpx.ServerConfig{}, func(w http.ResponseWriter, r *http.Request) {
					atMiddle.Add(1)
					ctx := r.Context()
					if tt.timeout > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, tt.timeout)
						defer cancel()
					}
					resp, err := down.RoundTrip(get(t, ctx, back.URL))
					if err != nil {
						relayed.Store(httpx.RelayExhaustedError(w, err))
						w.WriteHeader(http.StatusBadGateway)
						return
					}
					defer resp.Body.Close()
					relayed.Store(httpx.RelayExhausted(w, resp))
					w.WriteHeader(http.StatusBadGateway)
				})
				front := sgTransport(t, retry.MustNew(fast()))
				front.ResponseOnGiveUp = false
				_, err := front.RoundTrip(get(t, context.Background(), middle.URL))

				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(gaveUp, tt.reason) || gaveUpAfter != tt.tries {
					t.Fatalf("the middle tier's calls gave up with %v after %d attempts, want %v after %d", gaveUp, gaveUpAfter, tt.reason, tt.tries)
				}
				wantReason, wantFront := retry.ErrAttemptsExhausted, 3
				if tt.stop {
					wantReason, wantFront = retry.ErrServerSaidStop, 1
				}
				var se *httpx.StatusError
				if !errors.Is(err, wantReason) || !errors.As(err, &se) || se.StatusCode != http.StatusBadGateway {
					t.Fatalf("front: %v, want a 502 given up with %v", err, wantReason)
				}
				if got := relayed.Load(); got != tt.stop {
					t.Errorf("the middle tier relayed the give-up: %v, want %v", got, tt.stop)
				}
				if got := int(atMiddle.Load()); got != wantFront {
					t.Errorf("the middle tier saw %d attempts, want %d", got, wantFront)
				}
				if got, want := len(back.seen()), wantFront*tt.tries; got != want {
					t.Errorf("the back end saw %d attempts, want %d", got, want)
				}
			})
		}
	}
}

// openRetriesBreaker returns a circuit breaker that stops retries only
// (Brooker 2022), open for an hour: first tries go through.
func openRetriesBreaker() *breaker.Breaker {
	b := breaker.MustNew(breaker.Spec{Stops: breaker.StopsRetries, Failures: 1, Delay: time.Hour})
	p, _ := b.AllowFirstAt(time.Now())
	b.EndAt(time.Now(), p, breaker.Failure)
	return b
}

// openBreaker returns a circuit breaker that is open, for an hour.
func openBreaker() *breaker.Breaker {
	b := breaker.MustNew(breaker.Spec{Failures: 1, Delay: time.Hour})
	p, _ := b.AllowAt(time.Now())
	b.EndAt(time.Now(), p, breaker.Failure)
	return b
}
