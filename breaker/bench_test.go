package breaker

import (
	"testing"
	"time"
)

// BenchmarkClosed times the hot path: a closed breaker allows a call and
// records its success. consecutive/zero-time is what retry.Do pays (no
// clock read); rate passes the time, as every rate-mode caller must.
func BenchmarkClosed(b *testing.B) {
	for _, tc := range []struct {
		name string
		s    Spec
		now  time.Time
	}{
		{"consecutive/zero-time", Spec{Mode: Consecutive}, time.Time{}},
		{"consecutive", Spec{Mode: Consecutive}, t0},
		{"rate", Spec{Mode: Rate}, t0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			br := MustNew(tc.s)
			b.ReportAllocs()
			for b.Loop() {
				p, ok := br.AllowAt(tc.now)
				if !ok {
					b.Fatal("refused")
				}
				br.EndAt(tc.now, p, Success)
			}
		})
	}
}

// BenchmarkOpen times a refusal by an open breaker.
func BenchmarkOpen(b *testing.B) {
	br := MustNew(Spec{Failures: 1, Delay: time.Hour})
	p, _ := br.AllowAt(t0)
	br.EndAt(t0, p, Failure)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := br.AllowAt(t0); ok {
			b.Fatal("allowed")
		}
	}
}

// BenchmarkClosedParallel: two goroutines share one closed breaker.
func BenchmarkClosedParallel(b *testing.B) {
	for _, m := range []Mode{Consecutive, Rate} {
		b.Run(string(m), func(b *testing.B) {
			br := MustNew(Spec{Mode: m})
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, _ := br.AllowAt(t0)
					br.EndAt(t0, p, Success)
				}
			})
		})
	}
}
