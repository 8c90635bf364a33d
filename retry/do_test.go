package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/wire"
)

type statusErr int

func (s statusErr) Error() string   { return fmt.Sprintf("status %d", int(s)) }
func (s statusErr) HTTPStatus() int { return int(s) }

type grpcErr uint32

func (g grpcErr) Error() string    { return fmt.Sprintf("grpc code %d", uint32(g)) }
func (g grpcErr) GRPCCode() uint32 { return uint32(g) }

func TestClassify(t *testing.T) {
	timeoutErr := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		err  error
		want Class
	}{
		{nil, Success},
		{context.Canceled, Canceled},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), Canceled},
		{statusErr(200), Success},
		{statusErr(400), NeverRetry},
		{statusErr(404), NeverRetry},
		{statusErr(408), Timeout},
		{statusErr(429), Throttling},
		{statusErr(500), Transient},
		{statusErr(501), NeverRetry},
		{statusErr(502), Transient},
		{statusErr(503), Transient},
		{statusErr(504), Transient},
		{statusErr(505), NeverRetry},
		{grpcErr(14), Transient},  // UNAVAILABLE
		{grpcErr(8), Throttling},  // RESOURCE_EXHAUSTED
		{grpcErr(4), Timeout},     // DEADLINE_EXCEEDED
		{grpcErr(3), NeverRetry},  // INVALID_ARGUMENT
		{grpcErr(13), NeverRetry}, // INTERNAL
		{grpcErr(1), Canceled},
		{timeoutErr, Timeout},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, Transient},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), Transient},
		{io.ErrUnexpectedEOF, Transient},
		{errors.New("validation failed"), NeverRetry},
		{&SignalError{Err: statusErr(503), Sig: Signal{Overload: wire.OverloadService}}, ServiceOverloaded},
		{&SignalError{Err: statusErr(503), Sig: Signal{Exhausted: true}}, RetriesExhausted},
		{&SignalError{Err: statusErr(503), Sig: Signal{Overload: wire.OverloadInstance}}, Transient},
		{&SignalError{Err: statusErr(404), Sig: Signal{Overload: wire.OverloadService}}, NeverRetry}, // a signal never makes a 404 retryable
		{&SignalError{Err: errors.New("opaque"), Sig: Signal{Exhausted: true}}, RetriesExhausted},
		{&GiveUpError{Reason: ErrAttemptsExhausted, Last: statusErr(503), Attempts: 3}, RetriesExhausted},
		{&GiveUpError{Reason: ErrNotRetryable, Last: statusErr(404), Attempts: 1}, NeverRetry},
	}
	r := MustNew(Policy{})
	for _, tt := range tests {
		if got := r.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	// A user classifier goes first.
	mine := errors.New("mine")
	r = MustNew(Policy{}, WithClassifiers(ClassifierFunc(func(err error) (Class, bool) {
		if errors.Is(err, mine) {
			return Throttling, true
		}
		return 0, false
	})))
	if got := r.Classify(fmt.Errorf("x: %w", mine)); got != Throttling {
		t.Errorf("user classifier: got %v, want throttling", got)
	}
}

var fast = Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond}}

func TestDo(t *testing.T) {
	boom := statusErr(503)
	tests := []struct {
		name      string
		results   []error
		wantCalls int
		wantErr   error // nil: success
	}{
		{"first try", []error{nil}, 1, nil},
		{"third try", []error{boom, boom, nil}, 3, nil},
		{"exhausted", []error{boom, boom, boom, nil}, 3, ErrAttemptsExhausted},
		{"not retryable", []error{statusErr(404)}, 1, ErrNotRetryable},
		{"server said stop", []error{&SignalError{Err: boom, Sig: Signal{Overload: wire.OverloadService}}}, 1, ErrServerSaidStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Do(context.Background(), MustNew(fast), func(context.Context) error {
				calls++
				return tt.results[calls-1]
			})
			if calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			last := tt.results[calls-1]
			if !errors.Is(err, last) {
				t.Errorf("err = %v does not wrap the last error %v", err, last)
			}
			var g *GiveUpError
			if !errors.As(err, &g) || g.Attempts != calls {
				t.Errorf("GiveUpError attempts = %+v, want %d", g, calls)
			}
		})
	}
}

func TestDoCallerCancelDuringWait(t *testing.T) {
	r := MustNew(Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- Do(ctx, r, func(context.Context) error { calls++; return statusErr(503) })
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) || !errors.Is(err, statusErr(503)) {
			t.Fatalf("err = %v; want ErrCanceled wrapping context.Canceled and the last error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Do did not return after cancel")
	}
	if calls != 1 {
		t.Errorf("calls = %d, want 1", calls)
	}
}

func TestDoCallerDeadlineNeverRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	calls := 0
	err := Do(ctx, MustNew(fast), func(ctx context.Context) error {
		calls++
		<-ctx.Done()
		return ctx.Err()
	})
	if calls != 1 || !errors.Is(err, ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("calls=%d err=%v; want 1 call and ErrCanceled wrapping DeadlineExceeded", calls, err)
	}
}

func TestDoAttemptTimeoutIsRetried(t *testing.T) {
	p := fast
	p.AttemptTimeout = 5 * time.Millisecond
	calls := 0
	err := Do(context.Background(), MustNew(p), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			<-ctx.Done() // hang until the attempt's own timeout
			return ctx.Err()
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("calls=%d err=%v; want 3 calls and success", calls, err)
	}
}

func TestDoDeadlineTooShortForRetry(t *testing.T) {
	p := Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Do(ctx, MustNew(p), func(context.Context) error { return statusErr(503) })
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("gave up after %v; want at once", el)
	}
}

func TestNestedRetryOneLayer(t *testing.T) {
	inner, outer := MustNew(fast), MustNew(fast)
	calls := 0
	err := Do(context.Background(), outer, func(ctx context.Context) error {
		return Do(ctx, inner, func(context.Context) error { calls++; return statusErr(503) })
	})
	if calls != 3 {
		t.Errorf("dependency saw %d attempts, want 3 (only the inner layer retries)", calls)
	}
	if !errors.Is(err, ErrServerSaidStop) {
		t.Errorf("outer reason: %v, want ErrServerSaidStop (retries exhausted below)", err)
	}
}

func TestDoValue(t *testing.T) {
	calls := 0
	v, err := DoValue(context.Background(), MustNew(fast), func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", io.ErrUnexpectedEOF
		}
		return "ok", nil
	})
	if v != "ok" || err != nil {
		t.Fatalf("DoValue = %q, %v", v, err)
	}
}

func TestDoSuccessAllocatesNothing(t *testing.T) {
	for _, name := range Presets() {
		p, _ := Preset(name)
		r := MustNew(p)
		ctx := context.Background()
		fn := func(context.Context) error { return nil }
		if n := testing.AllocsPerRun(200, func() { _ = Do(ctx, r, fn) }); n != 0 {
			t.Errorf("%s: Do allocates %v times per successful call, want 0", name, n)
		}
	}
}

func TestDoValueSuccessAllocatesNothing(t *testing.T) {
	r := MustNew(fast)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 7, nil }
	if n := testing.AllocsPerRun(200, func() { _, _ = DoValue(ctx, r, fn) }); n != 0 {
		t.Errorf("DoValue allocates %v times per successful call, want 0", n)
	}
}

// TestDoSuccessLikeEndAt: Do's success path skips EndAt when all it would
// do is reward a token bucket (plainEnd); the bucket must end where the
// core's EndAt leaves it. Each case runs the same sequence of calls
// (successes, and calls whose first attempt fails, from a bucket drained
// low first) through Do and through StartAt/RetryAt/EndAt by hand on a
// twin retrier, and compares the levels after every call; with a
// deadline and LearnAttemptTime, Do times the attempts and takes EndAt.
func TestDoSuccessLikeEndAt(t *testing.T) {
	spec := budget.Spec{Kind: budget.KindTokenBucket, Capacity: 10, RetryCost: 2, SuccessReward: 0.5}
	for _, tc := range []struct {
		name     string
		learn    bool
		deadline bool
		refund   bool
	}{
		{"plain", false, false, true},
		{"no refund", false, false, false},
		{"learning, no deadline", true, false, true},
		{"learning, deadline", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{MaxAttempts: 2, Budget: spec, LearnAttemptTime: tc.learn}
			p.Budget.NoRefund = !tc.refund
			viaDo, byHand := MustNew(p), MustNew(p)
			if !viaDo.plainEnd || viaDo.bucket == nil {
				t.Fatalf("plainEnd %v, bucket %v: the shortcut is not taken", viaDo.plainEnd, viaDo.bucket)
			}
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				defer cancel()
			}
			// Drain both buckets to 1 token with retries that fail.
			for range 5 {
				now := time.Now()
				c := byHand.StartAt(now, time.Time{})
				byHand.EndAt(now, &c, Transient, Signal{}, 0)
				c2 := viaDo.StartAt(now, time.Time{})
				viaDo.EndAt(now, &c2, Transient, Signal{}, 0)
			}
			level := func(r *Retrier) float64 { return r.bucket.Level() }
			if a, b := level(viaDo), level(byHand); a != b || a >= 10 {
				t.Fatalf("after draining: levels %v and %v, want equal and below 10", a, b)
			}
			for i := range 40 {
				failFirst := i%3 == 1
				n := 0
				err := Do(ctx, viaDo, func(context.Context) error {
					if n++; failFirst && n == 1 {
						return io.ErrUnexpectedEOF
					}
					return nil
				})
				if err != nil && !failFirst {
					t.Fatalf("call %d: Do = %v", i, err)
				}
				now := time.Now()
				c := byHand.StartAt(now, time.Time{})
				if failFirst {
					d := byHand.EndAt(now, &c, Transient, Signal{}, 0)
					if !d.Retry {
						byHand.GiveUp(&c, d.Reason, io.ErrUnexpectedEOF)
					} else {
						byHand.NextAt(now, &c)
						byHand.EndAt(now, &c, Success, Signal{}, 0)
					}
				} else {
					byHand.EndAt(now, &c, Success, Signal{}, 0)
				}
				if a, b := level(viaDo), level(byHand); a != b {
					t.Fatalf("call %d (first attempt fails: %v): Do leaves %v tokens, EndAt %v", i, failFirst, a, b)
				}
			}
		})
	}
}

func TestHooks(t *testing.T) {
	var attempts, retries, giveUps int
	r := MustNew(fast, WithHooks(Hooks{
		OnAttempt: func(int, Class, time.Duration) { attempts++ },
		OnRetry:   func(int, time.Duration) { retries++ },
		OnGiveUp:  func(error, int, error) { giveUps++ },
	}))
	_ = Do(context.Background(), r, func(context.Context) error { return statusErr(503) })
	if attempts != 3 || retries != 2 || giveUps != 1 {
		t.Errorf("hooks saw %d attempts, %d retries, %d give-ups; want 3, 2, 1", attempts, retries, giveUps)
	}
}

func BenchmarkDoSuccess(b *testing.B) {
	r := MustNew(mustPreset("stormguard"))
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = Do(ctx, r, fn)
	}
}

func mustPreset(name string) Policy {
	p, err := Preset(name)
	if err != nil {
		panic(err)
	}
	return p
}

func ExampleDo() {
	r, err := New(Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.FullJitter, Base: time.Millisecond}})
	if err != nil {
		panic(err)
	}
	calls := 0
	err = Do(context.Background(), r, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return io.ErrUnexpectedEOF // a transient failure
		}
		return nil
	})
	fmt.Println(calls, err)
	// Output: 3 <nil>
}

func ExampleGiveUpError() {
	r := MustNew(Policy{MaxAttempts: 2, Backoff: backoff.Policy{Kind: backoff.None}})
	err := Do(context.Background(), r, func(context.Context) error { return io.ErrUnexpectedEOF })
	fmt.Println(errors.Is(err, ErrAttemptsExhausted), errors.Is(err, io.ErrUnexpectedEOF))
	fmt.Println(err)
	// Output:
	// true true
	// gave up after 2 attempt(s): attempts exhausted: unexpected EOF
}

func ExamplePreset() {
	p, err := Preset("aws-2026")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.MaxAttempts, p.Backoff.Kind, p.Backoff.Base, p.ThrottleBackoff.Base, p.Budget.RetryCost)
	// Output: 3 full-jitter 50ms 1s 14
}
