package retry

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// BenchmarkEndAtRetry times the core's failure path: an attempt fails with
// a pushback hint, the retry is granted (delay clamped), the retry
// succeeds. No budget, so every iteration takes the same path.
func BenchmarkEndAtRetry(b *testing.B) {
	for _, ignore := range []bool{false, true} {
		name := "signals"
		if ignore {
			name = "ignore-signals"
		}
		b.Run(name, func(b *testing.B) {
			r := MustNew(Policy{MaxAttempts: 3,
				Backoff:       backoff.Policy{Kind: backoff.FullJitter, Base: 50 * time.Millisecond, Cap: time.Second},
				IgnoreSignals: ignore})
			sig := Signal{HasPushback: true, Pushback: 300 * time.Millisecond}
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				c := r.StartAt(now, time.Time{})
				d := r.EndAt(now, &c, Transient, sig, 0.5)
				if !d.Retry {
					b.Fatal(d.Reason)
				}
				r.NextAt(now, &c)
				r.EndAt(now, &c, Success, Signal{}, 0)
			}
		})
	}
}
