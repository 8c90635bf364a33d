// Package hostspeed measures how slow this machine is right now, so that a
// test with real time can scale its bounds from a measurement instead of
// hoping the host is idle.
//
// [Factor] is 1 on an idle machine and grows with contention. It combines
// two readings, taken once per test binary (the first call) and again when
// [Measure] is called:
//
//   - CPU share: a goroutine per GOMAXPROCS, each locked to its thread, spins
//     for a fixed stretch of wall time; the share is the thread CPU time it
//     got divided by that wall time. With one busy loop per core beside the
//     test, the share is about one half, so the factor is about 2.
//   - Timer lateness: a run of short sleeps; how much longer they took than
//     asked, relative to a generous allowance for an idle host.
//
// The factor is the larger of wall/CPU and the timer ratio, clamped to
// [1, 50]. STORMGUARD_SLOWNESS=F raises it to at least F (a CI runner known
// to be slow can say so).
//
// Use [Scale] on every bound a test puts on elapsed real time:
//
//	if got := time.Since(start); got > hostspeed.Scale(200*time.Millisecond) { … }
package hostspeed

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxFactor bounds the factor: past it a bound would be meaningless, and a
// test that still fails is telling the truth.
const maxFactor = 50

var (
	once   sync.Once
	mu     sync.Mutex
	factor float64 = 1
)

// Factor returns the measured slowness of the host, at least 1. The first
// call measures (about 60 ms); later calls return the last measurement.
func Factor() float64 {
	once.Do(func() { Measure() })
	mu.Lock()
	defer mu.Unlock()
	return factor
}

// Scale returns d multiplied by [Factor].
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Factor())
}

// Measure measures the host again and returns the new factor (a test that
// starts load of its own can re-measure after starting it).
func Measure() float64 {
	f := max(cpuFactor(), timerFactor())
	if s, err := strconv.ParseFloat(os.Getenv("STORMGUARD_SLOWNESS"), 64); err == nil && s > f {
		f = s
	}
	f = min(max(f, 1), maxFactor)
	mu.Lock()
	factor = f
	mu.Unlock()
	return f
}

// spinFor is how long each CPU probe spins.
const spinFor = 40 * time.Millisecond

// cpuFactor returns wall time over the CPU time the probes got: 1 when each
// had a core to itself.
func cpuFactor() float64 {
	n := runtime.GOMAXPROCS(0)
	ratios := make([]float64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0, ok := threadCPU()
			if !ok {
				ratios[i] = 1
				return
			}
			start := time.Now()
			x := uint64(1)
			for time.Since(start) < spinFor {
				for range 1000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			sink(x)
			wall := time.Since(start)
			c1, _ := threadCPU()
			if cpu := c1 - c0; cpu > 0 {
				ratios[i] = float64(wall) / float64(cpu)
			} else {
				ratios[i] = maxFactor
			}
		})
	}
	wg.Wait()
	sum := 0.0
	for _, r := range ratios {
		sum += r
	}
	return sum / float64(n)
}

// timerFactor compares a run of 1 ms sleeps with what an idle host takes
// (each sleep at most 1.5 ms, a generous allowance for timer slack).
func timerFactor() float64 {
	const n, d = 10, time.Millisecond
	start := time.Now()
	for range n {
		time.Sleep(d)
	}
	return float64(time.Since(start)) / float64(n*d*3/2)
}

// sinkV keeps the probes' arithmetic from being optimised away; atomic,
// since every probe goroutine stores into it (a plain store is a data race
// under -race).
var sinkV atomic.Uint64

//go:noinline
func sink(x uint64) { sinkV.Store(x) }
