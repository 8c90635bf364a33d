package bench

import (
	"testing"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/stormguard/stormguard/limit"
)

// A limiter check is what a server does around each request: acquire a
// permit without waiting, serve, release it as a success.
//
//	stormguard  limit.Limiter with Vegas (Netflix's default algorithm):
//	            Acquire + Permit.Success
//	failsafe    failsafe-go's adaptive limiter with its defaults:
//	            TryAcquirePermit + Permit.Record
func BenchmarkLimiter(b *testing.B) {
	b.Run("stormguard", func(b *testing.B) {
		alg, err := limit.Spec{Kind: limit.KindVegas}.New()
		if err != nil {
			b.Fatal(err)
		}
		l := limit.NewLimiter(alg)
		b.ReportAllocs()
		for b.Loop() {
			p, ok := l.Acquire()
			if !ok {
				b.Fatal("limiter refused a permit with nothing in flight")
			}
			p.Success()
		}
	})
	b.Run("failsafe", func(b *testing.B) {
		l := adaptivelimiter.NewWithDefaults[any]()
		b.ReportAllocs()
		for b.Loop() {
			p, ok := l.TryAcquirePermit()
			if !ok {
				b.Fatal("limiter refused a permit with nothing in flight")
			}
			p.Record()
		}
	})
}
