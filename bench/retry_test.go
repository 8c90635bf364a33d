package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	avast "github.com/avast/retry-go/v4"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethvargo "github.com/sethvargo/go-retry"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

// Every library is configured alike: 3 attempts in total, no wait between
// attempts in the failing case (so the benchmark measures the library, not
// time.Sleep), exponential backoff from 1 ms in the success case. Where a
// library has a retry budget it is on in BenchmarkRetryFailing, and it
// drains: after that, each call is one attempt and a refused retry.

var errTransient = &timeoutErr{}

// timeoutErr is a transient error every library treats as retryable
// (aws-sdk-go-v2 retries errors with Timeout() true).
type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "transient" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

// stormguardPolicy is the shipped default with the wait taken out when
// failing (zero backoff).
func stormguardPolicy(failing bool) retry.Policy {
	p, err := retry.Preset("stormguard")
	if err != nil {
		panic(err)
	}
	if failing {
		p.Backoff = backoff.Policy{Kind: backoff.None}
		p.ThrottleBackoff = nil
	}
	return p
}

// awsDo runs fn the way aws-sdk-go-v2's retry middleware does: an attempt
// token, the call, the token's release; on a retryable error a retry token
// from the quota and the delay.
func awsDo(ctx context.Context, r *awsretry.Standard, fn func() error) error {
	release := r.GetInitialToken()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			rt, err := r.GetRetryToken(ctx, errTransient)
			if err != nil {
				return err
			}
			release = rt
			if d, _ := r.RetryDelay(attempt, errTransient); d > 0 {
				time.Sleep(d)
			}
		}
		err := fn()
		_ = release(err)
		if err == nil {
			return nil
		}
		if !r.IsErrorRetryable(err) || attempt >= r.MaxAttempts() {
			return err
		}
	}
}

func zeroDelay(int, error) (time.Duration, error) { return 0, nil }

type lib struct {
	name string
	// run returns a function that makes one call of fn through the library.
	run func(b *testing.B, failing bool) func(fn func() error) error
}

var libs = []lib{
	{"stormguard", func(b *testing.B, failing bool) func(func() error) error {
		r := retry.MustNew(stormguardPolicy(failing))
		ctx := context.Background()
		return func(fn func() error) error {
			return retry.Do(ctx, r, func(context.Context) error { return fn() })
		}
	}},
	{"failsafe", func(b *testing.B, failing bool) func(func() error) error {
		bld := retrypolicy.NewBuilder[any]().WithMaxAttempts(3)
		if failing {
			bld = bld.WithBudget(fsbudget.NewBuilder().Build())
		} else {
			bld = bld.WithBackoff(time.Millisecond, time.Second)
		}
		ex := failsafe.With[any](bld.Build())
		return func(fn func() error) error { return ex.Run(fn) }
	}},
	{"cenkalti", func(b *testing.B, failing bool) func(func() error) error {
		ctx := context.Background()
		return func(fn func() error) error {
			var bo cenkalti.BackOff = cenkalti.NewExponentialBackOff()
			if failing {
				bo = &cenkalti.ZeroBackOff{}
			}
			_, err := cenkalti.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn() },
				cenkalti.WithBackOff(bo), cenkalti.WithMaxTries(3))
			return err
		}
	}},
	{"avast", func(b *testing.B, failing bool) func(func() error) error {
		opts := []avast.Option{avast.Attempts(3), avast.Delay(time.Millisecond), avast.LastErrorOnly(true)}
		if failing {
			// avast's default delay adds up to 100 ms of random jitter.
			opts = []avast.Option{avast.Attempts(3), avast.Delay(0), avast.DelayType(avast.FixedDelay), avast.LastErrorOnly(true)}
		}
		return func(fn func() error) error { return avast.Do(fn, opts...) }
	}},
	{"sethvargo", func(b *testing.B, failing bool) func(func() error) error {
		ctx := context.Background()
		return func(fn func() error) error {
			// go-retry's backoffs are stateful: one per call.
			bo := sethvargo.WithMaxRetries(2, sethvargo.NewExponential(time.Millisecond))
			if failing {
				bo = sethvargo.WithMaxRetries(2, sethvargo.BackoffFunc(func() (time.Duration, bool) { return 0, false }))
			}
			return sethvargo.Do(ctx, bo, func(context.Context) error {
				if err := fn(); err != nil {
					return sethvargo.RetryableError(err)
				}
				return nil
			})
		}
	}},
	{"aws", func(b *testing.B, failing bool) func(func() error) error {
		r := awsretry.NewStandard(func(o *awsretry.StandardOptions) {
			o.MaxAttempts = 3
			if failing {
				o.Backoff = awsretry.BackoffDelayerFunc(zeroDelay)
			}
		})
		ctx := context.Background()
		return func(fn func() error) error { return awsDo(ctx, r, fn) }
	}},
}

// BenchmarkRetrySuccess: the first attempt succeeds.
func BenchmarkRetrySuccess(b *testing.B) {
	ok := func() error { return nil }
	for _, l := range libs {
		b.Run(l.name, func(b *testing.B) {
			do := l.run(b, false)
			b.ReportAllocs()
			for b.Loop() {
				if err := do(ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRetryFailing: every attempt fails; budgets on where a library
// has one.
func BenchmarkRetryFailing(b *testing.B) {
	fail := func() error { return errTransient }
	for _, l := range libs {
		b.Run(l.name, func(b *testing.B) {
			do := l.run(b, true)
			b.ReportAllocs()
			for b.Loop() {
				if err := do(fail); err == nil {
					b.Fatal("a failing call succeeded")
				}
			}
		})
	}
}

// TestLibrariesAgree checks the benchmark's premise: configured as above,
// every library makes 3 attempts of an always-failing call when no budget
// is in the way, and 1 attempt of a succeeding one.
func TestLibrariesAgree(t *testing.T) {
	for _, l := range libs {
		t.Run(l.name, func(t *testing.T) {
			calls := 0
			if err := l.run(nil, false)(func() error { calls++; return nil }); err != nil || calls != 1 {
				t.Errorf("success: %d calls, err %v; want 1, nil", calls, err)
			}
			calls = 0
			err := l.run(nil, true)(func() error { calls++; return errTransient })
			if err == nil || calls != 3 {
				t.Errorf("failing: %d calls, err %v; want 3 and an error", calls, err)
			}
			if !errors.Is(err, errTransient) && l.name != "failsafe" && l.name != "sethvargo" {
				t.Errorf("failing: error %v does not wrap the last error", err)
			}
		})
	}
}
