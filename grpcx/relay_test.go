package grpcx_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Retry at one layer, for every reason a call gives up: a front tier calls
// a middle tier, whose handler calls a back end through the unary client
// interceptor and fails with the give-up. The middle tier relays it either
// behind a grpcx.Server (which does it by itself) or with RelayExhausted
// on a plain grpc-go server, returning an UNAVAILABLE of its own. When
// retry.StopsAbove says the layers above must not retry, the front tier
// sees stormguard-retries-exhausted and stops after one attempt (server
// said stop); otherwise it treats the middle tier's status as it would any
// other.
func TestRelayGiveUps(t *testing.T) {
	unavailable := step{code: codes.Unavailable}
	opened := func() []retry.Option { return []retry.Option{retry.WithBreaker(openBreaker())} }
	opensOnFailure := func() []retry.Option {
		return []retry.Option{retry.WithBreaker(breaker.MustNew(breaker.Spec{Failures: 1, Delay: time.Hour}))}
	}
	killed := func() []retry.Option {
		d := new(killswitch.Dials)
		d.SetRetriesDisabled(true)
		return []retry.Option{retry.WithDials(d)}
	}
	tests := []struct {
		name    string
		back    step
		policy  func(*retry.Policy)
		opts    func() []retry.Option
		timeout time.Duration // the middle tier's deadline on its call; 0: none
		reason  error         // why the middle tier's call gave up
		tries   int           // attempts the middle tier's call sent
		stop    bool          // the front tier must not retry
	}{
		{name: "attempts exhausted", back: unavailable, reason: retry.ErrAttemptsExhausted, tries: 3, stop: true},
		{name: "budget refused the retry", back: unavailable,
			opts:   func() []retry.Option { return []retry.Option{retry.WithBudget(denyBudget{})} },
			reason: retry.ErrBudgetExhausted, tries: 1, stop: true},
		{name: "kill switch", back: unavailable, opts: killed,
			reason: retry.ErrRetriesDisabled, tries: 1, stop: true},
		{name: "breaker open before the first try", back: unavailable, opts: opened,
			reason: retry.ErrBreakerOpen, tries: 0, stop: true},
		{name: "breaker opened by the first try", back: unavailable, opts: opensOnFailure,
			reason: retry.ErrBreakerOpen, tries: 1, stop: true},
		{name: "server said stop: service overloaded", back: step{code: codes.Unavailable, trailer: map[string]string{"stormguard-overload": "service"}},
			reason: retry.ErrServerSaidStop, tries: 1, stop: true},
		{name: "server said stop: malformed pushback", back: step{code: codes.Unavailable, trailer: map[string]string{wire.KeyGRPCRetryPushback: "soon"}},
			reason: retry.ErrServerSaidStop, tries: 1, stop: true},
		{name: "deadline after one attempt", back: unavailable,
			policy: func(p *retry.Policy) {
				p.Backoff = backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Second, Cap: 10 * time.Second}
			},
			timeout: 5 * time.Second, // shorter than the backoff: no retry fits
			reason:  retry.ErrDeadline, tries: 1, stop: false},
		{name: "deadline after a retry", back: unavailable,
			policy: func(p *retry.Policy) {
				p.Backoff = backoff.Policy{Kind: backoff.Exponential, Base: time.Millisecond, Multiplier: 10000, Cap: 10 * time.Second}
			},
			timeout: 5 * time.Second, // room for the 1 ms wait, not the 10 s one
			reason:  retry.ErrDeadline, tries: 2, stop: true},
	}
	for _, tt := range tests {
		for _, via := range []string{"server", "handler"} {
			t.Run(tt.name+"/"+via, func(t *testing.T) {
				leakcheck.Check(t)
				back := newBackend(t, nil, tt.back)
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
				down := unaryClient(t, back, fast(t, tt.policy, opts...))
				handle := step{fn: func(ctx context.Context) error {
					dctx := ctx
					if tt.timeout > 0 {
						var cancel context.CancelFunc
						dctx, cancel = context.WithTimeout(ctx, tt.timeout)
						defer cancel()
					}
					_, err := down.Check(dctx, &healthpb.HealthCheckRequest{})
					if via == "server" {
						return err // the Server relays it
					}
					grpcx.RelayExhausted(ctx, err)
					return status.Error(codes.Unavailable, "the middle tier's own failure")
				}}
				var middle *backend
				if via == "server" {
					middle, _ = guarded(t, grpcx.ServerConfig{}, handle)
				} else {
					middle = newBackend(t, nil, handle)
				}
				front := unaryClient(t, middle, fast(t, nil))
				var tr metadata.MD
				err := check(context.Background(), front, grpc.Trailer(&tr))

				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(gaveUp, tt.reason) || gaveUpAfter != tt.tries {
					t.Fatalf("the middle tier's calls gave up with %v after %d attempts, want %v after %d", gaveUp, gaveUpAfter, tt.reason, tt.tries)
				}
				wantReason, wantFront := retry.ErrAttemptsExhausted, 3
				if tt.stop {
					wantReason, wantFront = retry.ErrServerSaidStop, 1
				}
				if !errors.Is(err, wantReason) || status.Code(err) != codes.Unavailable {
					t.Fatalf("front: %v, want UNAVAILABLE given up with %v", err, wantReason)
				}
				if got := slices.Equal(tr.Get("stormguard-retries-exhausted"), []string{"1"}); got != tt.stop {
					t.Errorf("the middle tier relayed the give-up (stormguard-retries-exhausted: 1): %v, want %v", got, tt.stop)
				}
				if got := len(middle.seen()); got != wantFront {
					t.Errorf("the middle tier saw %d attempts, want %d", got, wantFront)
				}
				if got, want := len(back.seen()), wantFront*tt.tries; got != want {
					t.Errorf("the back end saw %d attempts, want %d", got, want)
				}
			})
		}
	}
}
