package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
)

func noJitter() *float64 { j := 0.0; return &j }

// An open breaker gives up with ErrBreakerOpen without calling fn.
func TestDoBreakerOpenGivesUpUnsent(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Failures: 3, Delay: time.Hour})
	var gaveUp []string
	r := MustNew(fast, WithBreaker(b), WithHooks(Hooks{OnGiveUp: func(reason error, n int, _ error) {
		gaveUp = append(gaveUp, fmt.Sprintf("%v/%d", reason, n))
	}}))
	calls := 0
	fail := func(context.Context) error { calls++; return statusErr(503) }
	// 3 attempts fail: the breaker opens on the third.
	err := Do(context.Background(), r, fail)
	if calls != 3 || !errors.Is(err, ErrAttemptsExhausted) || b.State() != breaker.Open {
		t.Fatalf("calls=%d err=%v state=%v; want 3 calls, attempts exhausted, breaker open", calls, err, b.State())
	}
	calls = 0
	err = Do(context.Background(), r, fail)
	if calls != 0 {
		t.Fatalf("an open breaker let %d calls through", calls)
	}
	var g *GiveUpError
	if !errors.As(err, &g) || g.Attempts != 0 || g.Last != nil || !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("err = %#v, want a GiveUpError of 0 attempts, no last error, ErrBreakerOpen", err)
	}
	if got, want := err.Error(), "gave up after 0 attempt(s): circuit breaker open"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got := g.RetryClass(); got != RetriesExhausted {
		t.Errorf("RetryClass = %v, want retries-exhausted (a layer above must not retry)", got)
	}
	if want := "circuit breaker open/0"; len(gaveUp) != 2 || gaveUp[1] != want {
		t.Errorf("OnGiveUp saw %q, want the second %q", gaveUp, want)
	}
}

// A retry the breaker refuses is not made: the call gives up with the
// previous attempt's error, and the budget gets its charge back.
func TestDoBreakerRefusesRetry(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Failures: 2, Delay: time.Hour})
	bk := budget.NewTokenBucket(100, 10, 10, 10, 1, true)
	r := MustNew(Policy{MaxAttempts: 5, Backoff: backoff.Policy{Kind: backoff.None}}, WithBreaker(b), WithBudget(bk))
	calls := 0
	err := Do(context.Background(), r, func(context.Context) error { calls++; return statusErr(503) })
	var g *GiveUpError
	if calls != 2 || !errors.As(err, &g) || !errors.Is(err, ErrBreakerOpen) || g.Attempts != 2 || !errors.Is(err, statusErr(503)) {
		t.Fatalf("calls=%d err=%v; want 2 calls then ErrBreakerOpen after 2 attempts, keeping the 503", calls, err)
	}
	// One retry was made (−10) and one granted, then refused (refunded).
	if got := bk.Level(); got != 90 {
		t.Errorf("budget level %v, want 90 (the refused retry refunded)", got)
	}
}

// What the breaker counts comes from the classifier chain.
func TestBreakerCountsByClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		opens bool
	}{
		{"transient", statusErr(503), true},
		{"throttling", statusErr(429), true},
		{"timeout", statusErr(408), true},
		{"never-retry", statusErr(404), false},
		{"canceled", context.Canceled, false}, // the caller's own: ctx is cancelled below
		{"unknown", errors.New("validation failed"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := breaker.MustNew(breaker.Spec{Failures: 3, Delay: time.Hour})
			r := MustNew(Policy{MaxAttempts: 1}, WithBreaker(b))
			ctx, cancel := context.WithCancel(context.Background())
			if tc.err == context.Canceled {
				cancel()
			}
			defer cancel()
			for range 3 {
				_ = Do(ctx, r, func(context.Context) error { return tc.err })
			}
			if got := b.State() == breaker.Open; got != tc.opens {
				t.Errorf("3 calls failing with %v: open = %v, want %v", tc.err, got, tc.opens)
			}
		})
	}
	// A classifier that makes 404 transient makes it a failure too.
	b := breaker.MustNew(breaker.Spec{Failures: 3, Delay: time.Hour})
	r := MustNew(Policy{MaxAttempts: 1}, WithBreaker(b), WithClassifiers(ClassifierFunc(func(err error) (Class, bool) {
		if errors.Is(err, statusErr(404)) {
			return Transient, true
		}
		return 0, false
	})))
	for range 3 {
		_ = Do(context.Background(), r, func(context.Context) error { return statusErr(404) })
	}
	if b.State() != breaker.Open {
		t.Error("a classifier's Transient did not count as a breaker failure")
	}
}

// The breaker closes again through Do once its probes succeed.
func TestDoBreakerRecovers(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Failures: 1, Delay: 20 * time.Millisecond, Jitter: noJitter(), Successes: 1})
	r := MustNew(Policy{MaxAttempts: 1}, WithBreaker(b))
	_ = Do(context.Background(), r, func(context.Context) error { return statusErr(503) })
	if err := Do(context.Background(), r, func(context.Context) error { return nil }); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("err = %v, want ErrBreakerOpen right after opening", err)
	}
	time.Sleep(30 * time.Millisecond)
	if err := Do(context.Background(), r, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the probe: %v", err)
	}
	if b.State() != breaker.Closed {
		t.Errorf("state %v after a successful probe, want closed", b.State())
	}
}

// By default an error nobody knows is not retried; WithRetryUnknown
// retries it.
func TestRetryUnknown(t *testing.T) {
	plain := errors.New("something went wrong")
	for _, tc := range []struct {
		name      string
		opts      []Option
		wantCalls int
		want      error
	}{
		{"default", nil, 1, ErrNotRetryable},
		{"retry-unknown", []Option{WithRetryUnknown()}, 3, ErrAttemptsExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := MustNew(fast, tc.opts...)
			calls := 0
			err := Do(context.Background(), r, func(context.Context) error { calls++; return plain })
			if calls != tc.wantCalls || !errors.Is(err, tc.want) || !errors.Is(err, plain) {
				t.Errorf("calls=%d err=%v; want %d calls, %v", calls, err, tc.wantCalls, tc.want)
			}
		})
	}
	// Known errors keep their class.
	r := MustNew(fast, WithRetryUnknown())
	for err, want := range map[error]Class{statusErr(404): NeverRetry, context.Canceled: Canceled, plain: Transient, nil: Success} {
		if got := r.Classify(err); got != want {
			t.Errorf("Classify(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestDoBreakerSuccessAllocatesNothing(t *testing.T) {
	for _, name := range breaker.Presets() {
		s, _ := breaker.Preset(name)
		r := MustNew(mustPreset("stormguard"), WithBreaker(breaker.MustNew(s)))
		ctx := context.Background()
		fn := func(context.Context) error { return nil }
		if n := testing.AllocsPerRun(200, func() { _ = Do(ctx, r, fn) }); n != 0 {
			t.Errorf("%s: Do with a breaker allocates %v times per successful call, want 0", name, n)
		}
	}
}

// BenchmarkDoSuccessBreaker is BenchmarkDoSuccess with the stormguard
// breaker (consecutive: no clock read while closed).
func BenchmarkDoSuccessBreaker(b *testing.B) {
	s, _ := breaker.Preset("stormguard")
	r := MustNew(mustPreset("stormguard"), WithBreaker(breaker.MustNew(s)))
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = Do(ctx, r, fn)
	}
}

func ExampleWithBreaker() {
	s, _ := breaker.Preset("stormguard") // 5 failures in a row open it for 5 s ± 20 %
	r := MustNew(Policy{MaxAttempts: 1}, WithBreaker(breaker.MustNew(s)))
	for range 5 {
		_ = Do(context.Background(), r, func(context.Context) error { return statusErr(503) })
	}
	err := Do(context.Background(), r, func(context.Context) error { panic("not called") })
	fmt.Println(errors.Is(err, ErrBreakerOpen))
	fmt.Println(err)
	// Output:
	// true
	// gave up after 0 attempt(s): circuit breaker open
}
