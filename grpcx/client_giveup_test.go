package grpcx_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// denyBudget refuses every retry.
type denyBudget struct{}

func (denyBudget) BeginAt(time.Time) {}
func (denyBudget) RetryAt(time.Time, budget.Cause) (budget.Ticket, bool) {
	return budget.Ticket{}, false
}
func (denyBudget) EndAt(time.Time, budget.Outcome, budget.Ticket) {}

func openBreaker() *breaker.Breaker {
	b := breaker.MustNew(breaker.Spec{Failures: 1, Delay: time.Hour})
	p, _ := b.AllowAt(time.Now())
	b.EndAt(time.Now(), p, breaker.Failure)
	return b
}

// openRetriesBreaker returns a circuit breaker that stops retries only
// (Brooker 2022), open for an hour: first tries go through.
func openRetriesBreaker() *breaker.Breaker {
	b := breaker.MustNew(breaker.Spec{Stops: breaker.StopsRetries, Failures: 1, Delay: time.Hour})
	p, _ := b.AllowFirstAt(time.Now())
	b.EndAt(time.Now(), p, breaker.Failure)
	return b
}

// The give-up contract, the same table as httpx's: every give-up is a
// *retry.GiveUpError that says why (errors.Is) and carries the last
// attempt's status and metadata (errors.As, status.Code).
func TestGiveUpContract(t *testing.T) {
	busy := map[string]string{"x-why": "overload"}
	tests := []struct {
		name         string
		step         step
		policy       func(*retry.Policy)
		opts         func() []retry.Option
		timeout      time.Duration
		want         error
		wantAttempts int
		wantCode     codes.Code
		wantTrailer  bool
	}{
		{name: "attempts exhausted", step: step{code: codes.Unavailable, trailer: busy},
			want: retry.ErrAttemptsExhausted, wantAttempts: 3, wantCode: codes.Unavailable, wantTrailer: true},
		{name: "budget exhausted", step: step{code: codes.Unavailable, trailer: busy},
			opts: func() []retry.Option { return []retry.Option{retry.WithBudget(denyBudget{})} },
			want: retry.ErrBudgetExhausted, wantAttempts: 1, wantCode: codes.Unavailable, wantTrailer: true},
		{name: "deadline", step: step{code: codes.Unavailable, trailer: busy},
			policy: func(p *retry.Policy) {
				p.Backoff = backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Second, Cap: 10 * time.Second}
			},
			timeout: 5 * time.Second,
			want:    retry.ErrDeadline, wantAttempts: 1, wantCode: codes.Unavailable, wantTrailer: true},
		{name: "server said stop", step: step{code: codes.Unavailable, trailer: map[string]string{"x-why": "overload", "stormguard-overload": "service"}},
			want: retry.ErrServerSaidStop, wantAttempts: 1, wantCode: codes.Unavailable, wantTrailer: true},
		{name: "breaker open", step: step{code: codes.Unavailable},
			opts: func() []retry.Option { return []retry.Option{retry.WithBreaker(openBreaker())} },
			want: retry.ErrBreakerOpen, wantAttempts: 0, wantCode: codes.Unavailable},
		{name: "breaker open, stopping retries only", step: step{code: codes.Unavailable, trailer: busy},
			opts: func() []retry.Option { return []retry.Option{retry.WithBreaker(openRetriesBreaker())} },
			want: retry.ErrBreakerOpen, wantAttempts: 1, wantCode: codes.Unavailable, wantTrailer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			b := newBackend(t, nil, tt.step)
			var opts []retry.Option
			if tt.opts != nil {
				opts = tt.opts()
			}
			c := unaryClient(t, b, fast(t, tt.policy, opts...))
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			err := check(ctx, c)
			var gu *retry.GiveUpError
			if !errors.As(err, &gu) || !errors.Is(err, tt.want) || gu.Attempts != tt.wantAttempts {
				t.Fatalf("err = %v, want a GiveUpError: %v after %d attempts", err, tt.want, tt.wantAttempts)
			}
			if got := len(b.seen()); got != tt.wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, tt.wantAttempts)
			}
			if got := status.Code(err); got != tt.wantCode {
				t.Errorf("status.Code = %v, want %v", got, tt.wantCode)
			}
			var se *grpcx.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("no StatusError in %v", err)
			}
			if got := len(se.Trailer.Get("x-why")) == 1; got != tt.wantTrailer {
				t.Errorf("the last attempt's trailer reachable: %v, want %v", got, tt.wantTrailer)
			}
		})
	}
}

// The breaker in the interceptors: failures open it, then calls fail fast,
// unsent, unary and streaming alike.
func TestClientBreaker(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable})
	br := breaker.MustNew(breaker.Spec{Failures: 2, Delay: time.Hour})
	r := fast(t, func(p *retry.Policy) { p.MaxAttempts = 1 }, retry.WithBreaker(br))
	c := dial(t, b.addr, grpc.WithUnaryInterceptor(grpcx.UnaryClientInterceptor(r)), grpc.WithStreamInterceptor(grpcx.StreamClientInterceptor(r)))
	for range 2 {
		if err := check(context.Background(), c); !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want attempts exhausted", err)
		}
	}
	if err := check(context.Background(), c); !errors.Is(err, retry.ErrBreakerOpen) || status.Code(err) != codes.Unavailable {
		t.Fatalf("unary: err = %v, want ErrBreakerOpen, UNAVAILABLE", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostspeed.Scale(5*time.Second))
	defer cancel()
	_, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if !errors.Is(err, retry.ErrBreakerOpen) {
		t.Fatalf("stream: err = %v, want ErrBreakerOpen", err)
	}
	if got := len(b.seen()); got != 2 {
		t.Errorf("server saw %d calls, want 2", got)
	}
}

// hedgedPolicy hedges: max attempts n, delay d.
func hedgedPolicy(n int, d time.Duration) func(*retry.Policy) {
	return func(p *retry.Policy) { p.Hedge = &retry.HedgePolicy{MaxAttempts: n, Delay: d} }
}

func TestUnaryHedge(t *testing.T) {
	leakcheck.Check(t)
	var canceled atomic.Int32
	slow := waitCanceled(&canceled)
	b := newBackend(t, nil, slow, step{trailer: map[string]string{"x-who": "hedge"}})
	var retries int
	c := unaryClient(t, b, fast(t, hedgedPolicy(3, 20*time.Millisecond), retry.WithHooks(retry.Hooks{OnRetry: func(int, time.Duration) { retries++ }})))
	var trailer metadata.MD
	resp, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v; want SERVING from the hedge", resp, err)
	}
	if v := trailer.Get("x-who"); len(v) != 1 || v[0] != "hedge" {
		t.Errorf("trailer %v, want the winner's", trailer)
	}
	if got := b.attempts(); len(got) != 2 || got[0] != "/" || got[1] != "2/1" {
		t.Errorf("attempt metadata %q, want [/ 2/1]", got)
	}
	if !eventuallyTrue(func() bool { return canceled.Load() == 1 }) {
		t.Error("the slow attempt was not cancelled")
	}
	if retries != 1 {
		t.Errorf("OnRetry saw %d hedges, want 1", retries)
	}
}

func TestUnaryHedgeDecisions(t *testing.T) {
	for _, tc := range []struct {
		name         string
		steps        []step
		wantErr      error
		wantCode     codes.Code
		wantAttempts int
	}{
		{"non-fatal sends the next at once", []step{{code: codes.Unavailable}, {}}, nil, codes.OK, 2},
		{"fatal stops", []step{{code: codes.NotFound}, {}}, retry.ErrNotRetryable, codes.NotFound, 1},
		{"all fail", []step{{code: codes.Unavailable}}, retry.ErrAttemptsExhausted, codes.Unavailable, 3},
		{"pushback says stop", []step{{code: codes.Unavailable, trailer: map[string]string{wire.KeyGRPCRetryPushback: "-1"}}, {}}, retry.ErrServerSaidStop, codes.Unavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			b := newBackend(t, nil, tc.steps...)
			c := unaryClient(t, b, fast(t, hedgedPolicy(3, time.Hour)))
			err := check(context.Background(), c)
			if (tc.wantErr == nil) != (err == nil) || !errors.Is(err, tc.wantErr) || status.Code(err) != tc.wantCode {
				t.Fatalf("err = %v (%v), want %v (%v)", err, status.Code(err), tc.wantErr, tc.wantCode)
			}
			if got := len(b.seen()); got != tc.wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantAttempts)
			}
		})
	}
}

func eventuallyTrue(cond func() bool) bool {
	for end := time.Now().Add(hostspeed.Scale(2 * time.Second)); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
