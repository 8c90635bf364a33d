package bench

import (
	"testing"
	"time"
)

// cpuMeter reports a benchmark's CPU time per operation (cpu-ns/op, and
// cpu-ns/attempt where attempts are counted) beside go test's wall-clock
// ns/op. On a shared machine another process's work stretches the wall
// clock of whatever it interrupts, but not this process's CPU time, so the
// CPU figure is the steadier one there. Pinned to one core (taskset -c 1,
// GOMAXPROCS 1) the two agree on a quiet machine; the CPU figure includes
// the garbage collector's work, as the wall clock does.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

// startCPU is called just before the timed loop.
func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// report is called just after the timed loop with the operations and the
// attempts it made (attempts 0: not counted).
func (m cpuMeter) report(b *testing.B, ops, attempts int) {
	end, ok := processCPU()
	if !m.ok || !ok || ops == 0 {
		return
	}
	cpu := float64((end - m.start).Nanoseconds())
	b.ReportMetric(cpu/float64(ops), "cpu-ns/op")
	if attempts > 0 {
		b.ReportMetric(cpu/float64(attempts), "cpu-ns/attempt")
	}
}
