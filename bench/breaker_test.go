package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/sony/gobreaker/v2"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// Every breaker is configured alike, in two shapes:
//
//   - consecutive: opens after 5 failures in a row, open 1 minute, one
//     probe whose success closes it (failsafe-go's WithFailureThreshold(5),
//     gobreaker's ReadyToTrip on ConsecutiveFailures ≥ 5);
//   - rate: opens when at least half of at least 20 calls over the last
//     10 s failed (failsafe-go's WithFailureRateThreshold(0.5, 20, 10s),
//     gobreaker's rolling window of 10 buckets of 1 s with ReadyToTrip on
//     Requests ≥ 20 and TotalFailures ≥ Requests / 2).
//
// BenchmarkBreakerClosed times the hot path: a closed breaker allows a call
// and records its success, through each library's acquire-and-record API
// (stormguard AllowAt/EndAt, failsafe TryAcquirePermit/RecordSuccess,
// gobreaker's two-step Allow/done). stormguard's core takes the time as an
// argument: "stormguard" passes the zero Time, as retry.Do does for a closed
// consecutive breaker (no clock read); "stormguard+given-time" passes an
// instant the caller already has (the simulator; a shell that read the clock
// for something else), which is the core's own cost in rate mode;
// "stormguard+clock" reads time.Now() once per call, as a shell must in rate
// mode. The peers read the clock themselves (gobreaker twice per call).

type breakerLib struct {
	name string
	call func(ok bool) bool // one call whose result is ok; false if refused
}

func breakerLibs(b *testing.B, rate bool) []breakerLib {
	b.Helper()
	sg := breaker.Spec{Mode: breaker.Consecutive, Failures: 5, Delay: time.Minute, Probes: 1, Successes: 1}
	if rate {
		sg = breaker.Spec{Mode: breaker.Rate, FailureRate: 0.5, MinCalls: 20, Window: 10 * time.Second, Buckets: 10,
			Delay: time.Minute, Probes: 1, Successes: 1}
	}
	stormguard := breaker.MustNew(sg)
	sgCall := func(now func() time.Time) func(bool) bool {
		return func(ok bool) bool {
			t := now()
			p, allowed := stormguard.AllowAt(t)
			if !allowed {
				return false
			}
			o := breaker.Success
			if !ok {
				o = breaker.Failure
			}
			stormguard.EndAt(t, p, o)
			return true
		}
	}
	fb := fscb.NewBuilder[any]().WithDelay(time.Minute).WithSuccessThreshold(1)
	if rate {
		fb = fb.WithFailureRateThreshold(0.5, 20, 10*time.Second)
	} else {
		fb = fb.WithFailureThreshold(5)
	}
	fs := fb.Build()
	st := gobreaker.Settings{MaxRequests: 1, Timeout: time.Minute,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 }}
	if rate {
		st.Interval, st.BucketPeriod = 10*time.Second, time.Second
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.Requests >= 20 && 2*c.TotalFailures >= c.Requests }
	}
	gb := gobreaker.NewTwoStepCircuitBreaker[any](st)
	errFail := errors.New("fail")
	zeroTime := func() time.Time { return time.Time{} }
	given := time.Now()
	libs := []breakerLib{
		{"stormguard+given-time", sgCall(func() time.Time { return given })},
		{"stormguard+clock", sgCall(time.Now)},
		{"failsafe", func(ok bool) bool {
			if !fs.TryAcquirePermit() {
				return false
			}
			if ok {
				fs.RecordSuccess()
			} else {
				fs.RecordFailure()
			}
			return true
		}},
		{"gobreaker", func(ok bool) bool {
			done, err := gb.Allow()
			if err != nil {
				return false
			}
			if ok {
				done(nil)
			} else {
				done(errFail)
			}
			return true
		}},
	}
	if !rate {
		libs = append([]breakerLib{{"stormguard", sgCall(zeroTime)}}, libs...)
	}
	return libs
}

func BenchmarkBreakerClosed(b *testing.B) {
	for _, shape := range []string{"consecutive", "rate"} {
		for _, l := range breakerLibs(b, shape == "rate") {
			b.Run(shape+"/"+l.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if !l.call(true) {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}

// BenchmarkBreakerOpen times a refusal: the breaker opened (5 failures in
// a row) and each call is refused, unsent.
func BenchmarkBreakerOpen(b *testing.B) {
	for _, l := range breakerLibs(b, false) {
		if l.name == "stormguard" {
			continue // an open breaker needs the time: shells read the clock
		}
		b.Run(l.name, func(b *testing.B) {
			for range 5 {
				l.call(false)
			}
			b.ReportAllocs()
			for b.Loop() {
				if l.call(true) {
					b.Fatal("allowed")
				}
			}
		})
	}
}

// BenchmarkBreakerInRetry times the breaker where a caller meets it: in the
// retry loop, a call whose first attempt succeeds, with the breaker closed,
// against the same loop without a breaker ("plain"). stormguard is retry.Do
// with the "stormguard" preset (3 attempts, token bucket), which reads the
// clock only for what needs it: nothing on this path with a consecutive
// breaker (closed, it needs no time), the time of the call's start and end
// with a rate breaker (its window is in time). failsafe-go is
// failsafe.With(retrypolicy (3 attempts), circuitbreaker) against the
// retry policy alone; its breaker reads the clock itself when it needs to.
// Shapes as in BenchmarkBreakerClosed.
func BenchmarkBreakerInRetry(b *testing.B) {
	for _, shape := range []string{"consecutive", "rate"} {
		rate := shape == "rate"
		sgSpec := breaker.Spec{Mode: breaker.Consecutive, Failures: 5, Delay: time.Minute, Probes: 1, Successes: 1}
		fb := fscb.NewBuilder[any]().WithDelay(time.Minute).WithSuccessThreshold(1)
		if rate {
			sgSpec = breaker.Spec{Mode: breaker.Rate, FailureRate: 0.5, MinCalls: 20, Window: 10 * time.Second, Buckets: 10,
				Delay: time.Minute, Probes: 1, Successes: 1}
			fb = fb.WithFailureRateThreshold(0.5, 20, 10*time.Second)
		} else {
			fb = fb.WithFailureThreshold(5)
		}
		ok := func() error { return nil }
		ctx := context.Background()
		for _, v := range []struct {
			name string
			call func() error
		}{
			{"stormguard/plain", func() func() error {
				r := retry.MustNew(stormguardPolicy(false))
				return func() error { return retry.Do(ctx, r, func(context.Context) error { return ok() }) }
			}()},
			{"stormguard/breaker", func() func() error {
				r := retry.MustNew(stormguardPolicy(false), retry.WithBreaker(breaker.MustNew(sgSpec)))
				return func() error { return retry.Do(ctx, r, func(context.Context) error { return ok() }) }
			}()},
			{"failsafe/plain", func() func() error {
				ex := failsafe.With[any](retrypolicy.NewBuilder[any]().WithMaxAttempts(3).WithBackoff(time.Millisecond, time.Second).Build())
				return func() error { return ex.Run(ok) }
			}()},
			{"failsafe/breaker", func() func() error {
				ex := failsafe.With[any](retrypolicy.NewBuilder[any]().WithMaxAttempts(3).WithBackoff(time.Millisecond, time.Second).Build(), fb.Build())
				return func() error { return ex.Run(ok) }
			}()},
		} {
			b.Run(shape+"/"+v.name, func(b *testing.B) { timeCalls(b, v.call, false, nil) })
		}
	}
}
