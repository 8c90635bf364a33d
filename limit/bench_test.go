package limit

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// benchAlgorithms are the algorithms the benchmarks run. With one request in
// flight at a time, every sample is application-limited, so Vegas and
// Gradient2 run their full Update but keep their limits.
var benchAlgorithms = []struct {
	name string
	spec Spec
}{
	{"fixed", Spec{Kind: KindFixed, Limit: 100}},
	{"aimd", Spec{Kind: KindAIMD}},
	{"vegas", Spec{Kind: KindVegas}},
	{"gradient2", Spec{Kind: KindGradient2}},
}

// clocks are the two kinds of instants a limiter is given: readings of the
// wall clock, which carry a monotonic reading (production), and plain
// instants (the simulator's virtual time), for which Time.Sub takes a
// slower path.
var clocks = []struct {
	name  string
	start func() time.Time
}{
	{"wall", time.Now},
	{"virtual", func() time.Time { return time.Unix(1_700_000_000, 0) }},
}

// BenchmarkLimiter measures one AcquireAt plus one SuccessAt on one
// goroutine: what a server pays per request, besides reading the clock.
func BenchmarkLimiter(b *testing.B) {
	for _, bc := range benchAlgorithms {
		for _, clock := range clocks {
			b.Run(bc.name+"/"+clock.name, func(b *testing.B) {
				l := newBenchLimiter(b, bc.spec)
				start := clock.start()
				end := start.Add(10 * time.Millisecond)
				b.ReportAllocs()
				for b.Loop() {
					p, ok := l.AcquireAt(start)
					if !ok {
						b.Fatal("refused")
					}
					p.SuccessAt(end)
				}
			})
		}
	}
}

// BenchmarkLimiterParallel is BenchmarkLimiter on GOMAXPROCS goroutines
// sharing one limiter (wall-clock instants).
func BenchmarkLimiterParallel(b *testing.B) {
	for _, bc := range benchAlgorithms {
		b.Run(bc.name, func(b *testing.B) {
			l := newBenchLimiter(b, bc.spec)
			start := time.Now()
			end := start.Add(10 * time.Millisecond)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if p, ok := l.AcquireAt(start); ok {
						p.SuccessAt(end)
					}
				}
			})
		})
	}
}

// BenchmarkLimiterParallelWork is BenchmarkLimiterParallel with some work
// between the acquire and the release, as a server has: work=200 and
// work=1000 are about 0.25 and 1.2 µs on the project's VM.
func BenchmarkLimiterParallelWork(b *testing.B) {
	for _, bc := range benchAlgorithms {
		for _, work := range []int{200, 1000} {
			b.Run(fmt.Sprintf("%s/work=%d", bc.name, work), func(b *testing.B) {
				l := newBenchLimiter(b, bc.spec)
				start := time.Now()
				end := start.Add(10 * time.Millisecond)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					var x uint64
					for pb.Next() {
						if p, ok := l.AcquireAt(start); ok {
							x = busy(x, work)
							p.SuccessAt(end)
						}
					}
					benchSink.Add(x)
				})
			})
		}
	}
}

// benchSink keeps busy's results alive.
var benchSink atomic.Uint64

// busy stands for a request's work: n dependent multiply-adds.
func busy(x uint64, n int) uint64 {
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// BenchmarkUpdate measures an algorithm's Update alone, as the simulator
// calls it, on samples from a saturated server (InFlight above any limit)
// whose RTT varies between 10 and 15 ms, so that every branch of the rules
// is taken.
func BenchmarkUpdate(b *testing.B) {
	var samples [8]Sample
	for i := range samples {
		samples[i] = Sample{RTT: time.Duration(10+i*5/7) * time.Millisecond, InFlight: 2000}
	}
	for _, bc := range benchAlgorithms {
		b.Run(bc.name, func(b *testing.B) {
			alg, err := bc.spec.New()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				alg.Update(samples[i&7])
				i++
			}
		})
	}
}

func newBenchLimiter(b *testing.B, spec Spec) *Limiter {
	alg, err := spec.New()
	if err != nil {
		b.Fatal(err)
	}
	return NewLimiter(alg)
}
