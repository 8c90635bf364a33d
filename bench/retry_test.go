package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	avast "github.com/avast/retry-go/v4"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethvargo "github.com/sethvargo/go-retry"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// How each library is configured, in three modes (the same in
// BENCHMARKS.md):
//
//   - success (BenchmarkRetrySuccess): the first attempt succeeds. 3 attempts
//     allowed, exponential backoff from 1 ms (never reached); stormguard is
//     its shipped "stormguard" preset (token-bucket budget on, which needs
//     no clock), aws its default retry.Standard (500-token retry quota).
//   - failing (BenchmarkRetryFailing): every attempt fails with a retryable
//     error and every library makes exactly 3 attempts per call: no wait
//     between attempts (so the benchmark measures the library, not
//     time.Sleep) and no retry budget anywhere (stormguard's budget kind
//     none, aws's ratelimit.None, failsafe without its budget; cenkalti,
//     avast and sethvargo have none).
//   - drained (BenchmarkRetryBudgetDrained): every attempt fails, no wait,
//     and the retry budget is on: stormguard's preset token bucket (100
//     tokens, a retry after a timeout costs 10) and aws's retry quota (500
//     tokens, a retry not caused by throttling costs 14). Both drain within the first calls; after that a call is one
//     attempt and a refused retry. Only libraries whose budget refuses calls
//     made one after another take part: failsafe-go's budget bounds retries
//     in flight at once (it refuses only when at least 3 retries are in
//     flight and they are over 20 % of executions), so a single caller's
//     sequential retries are never refused and it would make 3 attempts
//     (TestFailsafeBudgetNeverRefusesSequentialRetries); cenkalti, avast and
//     sethvargo have no budget.
//
// The failing benchmarks count the attempts fn sees and report ns/attempt
// and attempts/op beside ns/op. Every benchmark also reports its CPU time
// per operation (cpu-ns/op, cpu-ns/attempt; see cpuMeter), the steadier
// figure on a shared machine.

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

// mode is how a library is configured and what fn does; see the top of the file.
type mode int

const (
	success mode = iota
	failing
	drained
)

type lib struct {
	name string
	// run returns a function that makes one call of fn through the library
	// configured for m, or nil if the library has no such configuration.
	run func(m mode) func(fn func() error) error
}

var libs = []lib{
	{"stormguard", func(m mode) func(func() error) error {
		p := stormguardPolicy(m != success)
		if m == failing {
			p.Budget = budget.Spec{Kind: budget.KindNone}
		}
		r := retry.MustNew(p)
		ctx := context.Background()
		return func(fn func() error) error {
			return retry.Do(ctx, r, func(context.Context) error { return fn() })
		}
	}},
	{"failsafe", func(m mode) func(func() error) error {
		if m == drained {
			return nil
		}
		bld := retrypolicy.NewBuilder[any]().WithMaxAttempts(3)
		if m == success {
			bld = bld.WithBackoff(time.Millisecond, time.Second)
		}
		ex := failsafe.With[any](bld.Build())
		return func(fn func() error) error { return ex.Run(fn) }
	}},
	{"cenkalti", func(m mode) func(func() error) error {
		if m == drained {
			return nil
		}
		ctx := context.Background()
		return func(fn func() error) error {
			var bo cenkalti.BackOff = cenkalti.NewExponentialBackOff()
			if m == failing {
				bo = &cenkalti.ZeroBackOff{}
			}
			_, err := cenkalti.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn() },
				cenkalti.WithBackOff(bo), cenkalti.WithMaxTries(3))
			return err
		}
	}},
	{"avast", func(m mode) func(func() error) error {
		if m == drained {
			return nil
		}
		opts := []avast.Option{avast.Attempts(3), avast.Delay(time.Millisecond), avast.LastErrorOnly(true)}
		if m == failing {
			// avast's default delay adds up to 100 ms of random jitter.
			opts = []avast.Option{avast.Attempts(3), avast.Delay(0), avast.DelayType(avast.FixedDelay), avast.LastErrorOnly(true)}
		}
		return func(fn func() error) error { return avast.Do(fn, opts...) }
	}},
	{"sethvargo", func(m mode) func(func() error) error {
		if m == drained {
			return nil
		}
		ctx := context.Background()
		return func(fn func() error) error {
			// go-retry's backoffs are stateful: one per call.
			bo := sethvargo.WithMaxRetries(2, sethvargo.NewExponential(time.Millisecond))
			if m == failing {
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
	{"aws", func(m mode) func(func() error) error {
		r := awsretry.NewStandard(func(o *awsretry.StandardOptions) {
			o.MaxAttempts = 3
			if m != success {
				o.Backoff = awsretry.BackoffDelayerFunc(zeroDelay)
			}
			if m == failing {
				o.RateLimiter = ratelimit.None
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
			do := l.run(success)
			b.ReportAllocs()
			calls := 0
			cpu := startCPU()
			for b.Loop() {
				if err := do(ok); err != nil {
					b.Fatal(err)
				}
				calls++
			}
			cpu.report(b, calls, 0)
		})
	}
}

// BenchmarkRetryFailing: every attempt fails; every library makes 3
// attempts per call (no budget anywhere).
func BenchmarkRetryFailing(b *testing.B) { benchFailing(b, failing) }

// BenchmarkRetryBudgetDrained: every attempt fails and the retry budget has
// drained: one attempt and a refused retry per call, in the libraries whose
// budget refuses sequential retries.
func BenchmarkRetryBudgetDrained(b *testing.B) { benchFailing(b, drained) }

// drainCalls is how many failing calls are made before timing a drained
// budget: far more than either budget holds.
const drainCalls = 1000

func benchFailing(b *testing.B, m mode) {
	attempts := 0
	fail := func() error { attempts++; return errTransient }
	for _, l := range libs {
		do := l.run(m)
		if do == nil {
			continue
		}
		b.Run(l.name, func(b *testing.B) {
			do := l.run(m) // a fresh budget for each run of the sub-benchmark
			if m == drained {
				for range drainCalls {
					do(fail)
				}
			}
			attempts = 0
			calls := 0
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				if err := do(fail); err == nil {
					b.Fatal("a failing call succeeded")
				}
				calls++
			}
			cpu.report(b, calls, attempts)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(attempts), "ns/attempt")
			b.ReportMetric(float64(attempts)/float64(calls), "attempts/op")
		})
	}
}

// TestLibrariesAgree checks the benchmarks' premise: configured as above,
// every library makes 1 attempt of a succeeding call; 3 attempts of every
// one of many always-failing calls in the failing mode (no budget refuses);
// and, in the drained mode, 1 attempt per call once the budget has drained.
func TestLibrariesAgree(t *testing.T) {
	for _, l := range libs {
		t.Run(l.name, func(t *testing.T) {
			calls := 0
			if err := l.run(success)(func() error { calls++; return nil }); err != nil || calls != 1 {
				t.Errorf("success: %d calls, err %v; want 1, nil", calls, err)
			}
			do := l.run(failing)
			for i := range drainCalls {
				calls = 0
				err := do(func() error { calls++; return errTransient })
				if err == nil || calls != 3 {
					t.Fatalf("failing, call %d: %d attempts, err %v; want 3 and an error", i, calls, err)
				}
				if !errors.Is(err, errTransient) && l.name != "failsafe" && l.name != "sethvargo" {
					t.Fatalf("failing: error %v does not wrap the last error", err)
				}
			}
			do = l.run(drained)
			if do == nil {
				return
			}
			for range drainCalls {
				do(func() error { return errTransient })
			}
			calls = 0
			if err := do(func() error { calls++; return errTransient }); err == nil || calls != 1 {
				t.Errorf("drained: %d attempts, err %v; want 1 and an error", calls, err)
			}
		})
	}
}

// TestFailsafeBudgetNeverRefusesSequentialRetries backs the comment at the
// top: failsafe-go's budget (its defaults: max rate 0.2, min concurrency 3)
// refuses no retry of calls made one after another, so with it on every
// failing call still makes 3 attempts; it is not a drained budget.
func TestFailsafeBudgetNeverRefusesSequentialRetries(t *testing.T) {
	ex := failsafe.With[any](retrypolicy.NewBuilder[any]().WithMaxAttempts(3).
		WithBudget(fsbudget.NewBuilder().Build()).Build())
	for i := range drainCalls {
		calls := 0
		if err := ex.Run(func() error { calls++; return errTransient }); err == nil || calls != 3 {
			t.Fatalf("call %d: %d attempts, err %v; want 3 and an error", i, calls, err)
		}
	}
}
