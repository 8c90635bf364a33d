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

// timeCalls times call in b's loop, failing the benchmark when whether it
// returns an error is not wantErr, and reports allocations and the CPU time
// a call; when attempts is not nil it counts the attempts the calls made
// (the caller's function increments it), and the CPU time, the wall time
// and the number of attempts are reported per attempt too.
func timeCalls(b *testing.B, call func() error, wantErr bool, attempts *int) {
	if attempts != nil {
		*attempts = 0
	}
	b.ReportAllocs()
	calls := 0
	cpu := startCPU()
	for b.Loop() {
		if err := call(); (err != nil) != wantErr {
			b.Fatalf("err = %v, want an error: %v", err, wantErr)
		}
		calls++
	}
	if attempts == nil {
		cpu.report(b, calls, 0)
		return
	}
	cpu.report(b, calls, *attempts)
	if *attempts > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(*attempts), "ns/attempt")
		b.ReportMetric(float64(*attempts)/float64(calls), "attempts/op")
	}
}
