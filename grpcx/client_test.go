package grpcx_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

func unaryClient(t *testing.T, b *backend, r *retry.Retrier, opts ...grpcx.ClientOption) healthpb.HealthClient {
	t.Helper()
	return dial(t, b.addr, grpc.WithUnaryInterceptor(grpcx.UnaryClientInterceptor(r, opts...)))
}

func TestUnaryRetriesUnavailableThenSucceeds(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable}, step{code: codes.Unavailable}, step{})
	c := unaryClient(t, b, fast(t, nil))

	if err := check(context.Background(), c); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got, want := b.attempts(), []string{"/", "2/1", "3/2"}; !slices.Equal(got, want) {
		t.Errorf("attempt/previous metadata = %q, want %q", got, want)
	}
}

func TestUnaryGivesUpWithLastStatus(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable, trailer: map[string]string{"x-why": "busy"}})
	c := unaryClient(t, b, fast(t, nil))

	err := check(context.Background(), c)
	if got, want := len(b.seen()), 3; got != want {
		t.Fatalf("attempts = %d, want %d", got, want)
	}
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("status.Code = %v, want Unavailable (err %v)", got, err)
	}
	var gu *retry.GiveUpError
	if !errors.As(err, &gu) || !errors.Is(err, retry.ErrAttemptsExhausted) || gu.Attempts != 3 {
		t.Fatalf("err = %v, want a GiveUpError after 3 attempts, attempts exhausted", err)
	}
	if got := gu.RetryClass(); got != retry.RetriesExhausted {
		t.Errorf("RetryClass = %v, want retries-exhausted (a layer above must not retry)", got)
	}
	var se *grpcx.StatusError
	if !errors.As(err, &se) || se.Trailer.Get("x-why")[0] != "busy" {
		t.Errorf("the last attempt's trailer is not reachable: %v", err)
	}
}

func TestUnaryNotRetryable(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.NotFound})
	c := unaryClient(t, b, fast(t, nil))

	err := check(context.Background(), c)
	if got := len(b.seen()); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
	if status.Code(err) != codes.NotFound || !errors.Is(err, retry.ErrNotRetryable) {
		t.Errorf("err = %v, want NotFound, not retryable", err)
	}
}

// A RESOURCE_EXHAUSTED with grpc-retry-pushback-ms is retried after exactly
// the hint when the clamp allows it, and after the clamp's bound when not.
func TestUnaryPushbackHonouredWithinClamp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hint     string
		maxExtra time.Duration
		want     time.Duration // the delay: clamp(1 ms backoff, hint)
	}{
		{"within", "150", time.Second, 150 * time.Millisecond},
		{"clamped", "5000", 100 * time.Millisecond, 101 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			b := newBackend(t, nil, step{code: codes.ResourceExhausted, trailer: map[string]string{wire.KeyGRPCRetryPushback: tc.hint}}, step{})
			c := unaryClient(t, b, fast(t, func(p *retry.Policy) { p.Pushback.MaxExtra = tc.maxExtra }))

			if err := check(context.Background(), c); err != nil {
				t.Fatalf("Check: %v", err)
			}
			calls := b.seen()
			if len(calls) != 2 {
				t.Fatalf("attempts = %d, want 2", len(calls))
			}
			gap := calls[1].at.Sub(calls[0].at)
			slack := hostspeed.Scale(150 * time.Millisecond) // scheduling and a loopback round trip, under -race
			if gap < tc.want || gap > tc.want+slack {
				t.Errorf("retry came %v after the first attempt, want %v (+ at most %v)", gap, tc.want, slack)
			}
		})
	}
}

func TestUnaryServerSignalsStopRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trailer map[string]string
	}{
		{"overload-service", map[string]string{"stormguard-overload": "service"}},
		{"retries-exhausted", map[string]string{"stormguard-retries-exhausted": "1"}},
		{"pushback-malformed", map[string]string{wire.KeyGRPCRetryPushback: "soon"}},
		{"pushback-negative", map[string]string{wire.KeyGRPCRetryPushback: "-5"}},
		{"pushback-fraction", map[string]string{wire.KeyGRPCRetryPushback: "1.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			b := newBackend(t, nil, step{code: codes.Unavailable, trailer: tc.trailer}, step{})
			c := unaryClient(t, b, fast(t, nil))

			err := check(context.Background(), c)
			if got := len(b.seen()); got != 1 {
				t.Errorf("attempts = %d, want exactly 1", got)
			}
			if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrServerSaidStop) {
				t.Errorf("err = %v, want Unavailable, server said stop", err)
			}
		})
	}
}

func TestUnaryOverloadInstanceRetries(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable, trailer: map[string]string{"stormguard-overload": "instance", wire.KeyGRPCRetryPushback: "20"}}, step{})
	c := unaryClient(t, b, fast(t, nil))
	if err := check(context.Background(), c); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got := len(b.seen()); got != 2 {
		t.Errorf("attempts = %d, want 2", got)
	}
}

// The server's handler sees a deadline no later than the caller's: grpc-go
// carries it in grpc-timeout, rounded so that it never grows.
func TestUnaryDeadlinePropagates(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil)
	c := unaryClient(t, b, fast(t, nil))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	dl, _ := ctx.Deadline()
	if err := check(ctx, c); err != nil {
		t.Fatal(err)
	}
	callEnd := time.Until(dl) // the caller's remaining time after the call
	got := b.seen()[0]
	if !got.hasDL {
		t.Fatal("the handler's context has no deadline")
	}
	if got.left > 3*time.Second || got.left < callEnd {
		t.Errorf("handler saw %v left; want at most the caller's 3s and at least what the caller had left after the call (%v)", got.left, callEnd)
	}
}

func TestUnaryExpiredFailsLocally(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil)
	var attempts int
	r := fast(t, nil, retry.WithHooks(retry.Hooks{OnAttempt: func(int, retry.Class, time.Duration) { attempts++ }}))
	c := unaryClient(t, b, r)

	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := check(expired, c)
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expired: err = %v, want DeadlineExceeded wrapping context.DeadlineExceeded", err)
	}
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	err = check(canceled, c)
	if status.Code(err) != codes.Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v, want Canceled wrapping context.Canceled", err)
	}
	if n := len(b.seen()); n != 0 || attempts != 0 {
		t.Errorf("server saw %d calls and the retrier counted %d attempts; want none", n, attempts)
	}
}

// The caller's cancellation crosses the hop: the handler's context ends,
// and the call is not retried.
func TestUnaryCancelPropagatesToHandler(t *testing.T) {
	leakcheck.Check(t)
	started := make(chan struct{})
	observed := make(chan error, 1)
	b := newBackend(t, nil, step{fn: func(ctx context.Context) error {
		close(started)
		select {
		case <-ctx.Done():
			observed <- ctx.Err()
		case <-time.After(hostspeed.Scale(5 * time.Second)):
			observed <- errors.New("handler's context never ended")
		}
		return ctx.Err()
	}})
	c := unaryClient(t, b, fast(t, nil))

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	err := check(ctx, c)
	if status.Code(err) != codes.Canceled || !errors.Is(err, retry.ErrCanceled) {
		t.Errorf("err = %v, want Canceled, caller cancelled", err)
	}
	if got := <-observed; !errors.Is(got, context.Canceled) {
		t.Errorf("handler observed %v, want context.Canceled", got)
	}
	if got := len(b.seen()); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

// An attempt that runs past the policy's AttemptTimeout is a Timeout, and
// retried.
func TestUnaryAttemptTimeout(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{fn: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}, step{})
	var classes []retry.Class
	r := fast(t, func(p *retry.Policy) { p.AttemptTimeout = 50 * time.Millisecond },
		retry.WithHooks(retry.Hooks{OnAttempt: func(_ int, c retry.Class, _ time.Duration) { classes = append(classes, c) }}))
	c := unaryClient(t, b, r)

	if err := check(context.Background(), c); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if want := []retry.Class{retry.Timeout, retry.Success}; !slices.Equal(classes, want) {
		t.Errorf("attempt classes = %v, want %v", classes, want)
	}
	if got := b.seen()[0]; !got.hasDL || got.left > 50*time.Millisecond {
		t.Errorf("first attempt's handler saw %v left, want at most the 50ms attempt timeout", got.left)
	}
}

func TestUnaryRetryableMethods(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable}, step{})
	c := unaryClient(t, b, fast(t, nil), grpcx.WithRetryableMethods(func(m string) bool { return m != "/grpc.health.v1.Health/Check" }))

	err := check(context.Background(), c)
	if got := len(b.seen()); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
	if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrNotRetryable) {
		t.Errorf("err = %v, want Unavailable, not retryable", err)
	}
}

// The caller's metadata is kept; its own attempt number is not passed on
// (a first try carries none); the context's criticality is propagated.
func TestUnaryMetadata(t *testing.T) {
	leakcheck.Check(t)
	got := make(chan metadata.MD, 1)
	b := newBackend(t, nil, step{fn: func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		got <- md
		return nil
	}})
	c := unaryClient(t, b, fast(t, nil))

	ctx := deadline.WithCriticality(context.Background(), wire.Sheddable)
	ctx = metadata.AppendToOutgoingContext(ctx, "x-user", "ada", "stormguard-attempt", "7")
	if err := check(ctx, c); err != nil {
		t.Fatal(err)
	}
	md := <-got
	for k, want := range map[string]string{"x-user": "ada", "stormguard-criticality": "sheddable"} {
		if v := md.Get(k); len(v) != 1 || v[0] != want {
			t.Errorf("%s = %q, want [%q]", k, v, want)
		}
	}
	for _, k := range []string{"stormguard-attempt", "grpc-previous-rpc-attempts"} {
		if v := md.Get(k); len(v) != 0 {
			t.Errorf("%s = %q on a first try, want none (the caller's is not passed on)", k, v)
		}
	}
}

// A status a classifier takes for a success ends the call at its first
// attempt with no error, whether the retrier needs a Call for the first
// attempt (a breaker, hooks) or not (a token bucket alone); a retryable
// status is retried either way. The two paths of the unary interceptor
// agree.
func TestUnaryPathsAgree(t *testing.T) {
	notFoundOK := retry.WithClassifiers(retry.ClassifierFunc(func(err error) (retry.Class, bool) {
		if status.Code(err) == codes.NotFound {
			return retry.Success, true
		}
		return 0, false
	}))
	bucket := func(p *retry.Policy) {
		p.Budget = budget.Spec{Kind: budget.KindTokenBucket, Capacity: 100, RetryCost: 10, SuccessReward: 1}
	}
	retriers := map[string]func() *retry.Retrier{
		"no Call first": func() *retry.Retrier { return fast(t, bucket, notFoundOK) },
		"breaker": func() *retry.Retrier {
			return fast(t, bucket, notFoundOK, retry.WithBreaker(breaker.MustNew(breaker.Spec{})))
		},
		"hooks": func() *retry.Retrier {
			return fast(t, bucket, notFoundOK, retry.WithHooks(retry.Hooks{OnAttempt: func(int, retry.Class, time.Duration) {}}))
		},
	}
	tests := []struct {
		name         string
		steps        []step
		wantErr      codes.Code
		wantAttempts int
	}{
		{"ok", []step{{}}, codes.OK, 1},
		{"not found, taken for a success", []step{{code: codes.NotFound}}, codes.OK, 1},
		{"unavailable, then ok", []step{{code: codes.Unavailable}, {}}, codes.OK, 2},
		{"always unavailable", []step{{code: codes.Unavailable}}, codes.Unavailable, 3},
		{"invalid argument", []step{{code: codes.InvalidArgument}}, codes.InvalidArgument, 1},
	}
	for name, mk := range retriers {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				leakcheck.Check(t)
				r := mk()
				if skips := r.SkipsCall(); skips != (name == "no Call first") {
					t.Fatalf("SkipsCall = %v", skips)
				}
				b := newBackend(t, nil, tt.steps...)
				err := check(context.Background(), unaryClient(t, b, r))
				if status.Code(err) != tt.wantErr || len(b.seen()) != tt.wantAttempts {
					t.Errorf("err %v after %d attempts; want %v after %d", err, len(b.seen()), tt.wantErr, tt.wantAttempts)
				}
			})
		}
	}
}
