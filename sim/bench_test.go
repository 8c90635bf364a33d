package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/cputime"
	"github.com/stormguard/stormguard/sim/scenario"
)

// BenchmarkSeed004 runs examples/seed004.yaml, scenario A, for the tick
// counts bench/seed004/compare.sh times the seed's Python program at; one
// op is one whole run. It reports the model's events per second. The
// 1-tick run measures what a run costs besides its ticks (building the
// world, the statistics, the verdict).
func BenchmarkSeed004(b *testing.B) {
	f, err := scenario.Load(filepath.Join("..", "examples", "seed004.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, ticks := range []int{1, 200, 2000, 20000} {
		s := f.Runs[0].Scenario
		s.Duration = time.Duration(ticks) * time.Second
		b.Run("ticks="+itoa(ticks), func(b *testing.B) {
			var events uint64
			for b.Loop() {
				r, err := Run(context.Background(), s, "a", nil)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkHotOS runs the embedded default's naive run: a storm, 120 s.
func BenchmarkHotOS(b *testing.B) {
	f, err := scenario.Load(filepath.Join("..", "examples", "hotos-toy.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, run := range f.Runs {
		b.Run(run.Name, func(b *testing.B) {
			var events uint64
			for b.Loop() {
				r, err := Run(context.Background(), run.Scenario, run.Name, nil)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkMechanisms runs the HotOS toy's naive run with the new
// mechanisms in front of or inside its database, to show what each costs
// beside the plain toy: a keyed look-aside cache (100,000 keys, an LRU of
// 36,000, answering about 90 %), processor sharing on 15 cores, and 3
// replicas of 5 workers. One op is one whole 120 s run.
func BenchmarkMechanisms(b *testing.B) {
	f, err := scenario.Load(filepath.Join("..", "examples", "hotos-toy.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	base := f.Runs[0].Scenario
	variants := []struct {
		name string
		mod  func(*scenario.Scenario)
	}{
		{"plain", func(*scenario.Scenario) {}},
		{"cache", func(s *scenario.Scenario) { s.Services[0].Cache = &scenario.Cache{Keys: 100_000, Size: 36_000} }},
		{"processor-sharing", func(s *scenario.Scenario) {
			s.Services[0].Law = &scenario.CapacityLaw{Kind: "processor-sharing", Cores: 15}
			s.Services[0].Workers = 1000
		}},
		{"replicas", func(s *scenario.Scenario) { s.Services[0].Replicas, s.Services[0].Workers = 3, 5 }},
	}
	for _, v := range variants {
		s := base
		s.Services = append([]scenario.Service(nil), base.Services...)
		v.mod(&s)
		b.Run(v.name, func(b *testing.B) {
			var events uint64
			for b.Loop() {
				r, err := Run(context.Background(), s, v.name, nil)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// mm1Bench is issue 16's model: M/M/1 FIFO, λ = 900/s, mean service 1 ms,
// a 1 s client timeout and one allowed retry (which never fire).
func mm1Bench(d time.Duration) scenario.Scenario { return mm1At(0.9, d) }

// BenchmarkMM1 runs issue 16's M/M/1 model through the whole simulator for
// 100 s of virtual time (90,000 requests); it reports events/s, to compare
// with sim/engine's BenchmarkEngine/small in the same run, and ns per
// simulated request.
func BenchmarkMM1(b *testing.B) { benchMM1(b, mm1Bench(100*time.Second)) }

// benchMM1 runs s as BenchmarkMM1 does: one op a run; events/s, ns per
// request and the process's CPU time per request (cpu-ns/request, the
// steadier figure on a shared machine; bench/des/mindes reports the same).
func benchMM1(b *testing.B, s scenario.Scenario) {
	var events, reqs uint64
	b.ReportAllocs()
	cpu0, cpuOK := cputime.Process()
	for b.Loop() {
		r, err := Run(context.Background(), s, "mm1", nil)
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
		reqs += uint64(r.Clients[0].Total.Requests)
	}
	cpu1, ok := cputime.Process()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reqs), "ns/request")
	if cpuOK && ok {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(reqs), "cpu-ns/request")
	}
}

// mm1Storm is mm1Bench with a 40 ms client timeout: once the queue holds
// more than 40 ms of work, which it soon does at load 0.9, every attempt
// times out, every request is retried once and fails, and the queue grows
// without bound (issue 27's storm).
func mm1Storm(d time.Duration) scenario.Scenario {
	s := mm1Bench(d)
	s.Clients[0].Timeout = 40 * time.Millisecond
	return s
}

// BenchmarkMM1Storm is BenchmarkMM1 on mm1Storm: 100 s, 90,000 requests,
// 180,000 attempts.
func BenchmarkMM1Storm(b *testing.B) { benchMM1(b, mm1Storm(100*time.Second)) }

// BenchmarkMM1Scaling runs issue 16's M/M/1 (mm1At) over horizons of 1×,
// 10× and 100× a base of 10 s at load 0.9 (9,000 to 900,000 requests),
// then over loads ρ from 0.5 to 0.99 at 100 s; one op is one whole run.
// Linear cost means flat ns/request and alloc-B/request down each column.
// Besides those it reports, from one untimed run before the timed ones
// (measureRun: a collection at each of about 100 progress calls), the
// peak live heap (peak-live-B), the part of it that is the per-bin series
// (series-B: bins × their bytes, which grow with the horizon by design)
// and the rest (rest-B), which should be bounded by what is pending.
func BenchmarkMM1Scaling(b *testing.B) {
	const base = 10 * time.Second
	type c struct {
		name string
		rho  float64
		d    time.Duration
	}
	var cases []c
	for _, x := range []int{1, 10, 100} {
		cases = append(cases, c{fmt.Sprintf("horizon=%dx", x), 0.9, time.Duration(x) * base})
	}
	for _, rho := range []float64{0.5, 0.7, 0.9, 0.95, 0.99} {
		cases = append(cases, c{fmt.Sprintf("rho=%g", rho), rho, 10 * base})
	}
	for _, k := range cases {
		s := mm1At(k.rho, k.d)
		b.Run(k.name, func(b *testing.B) {
			running, _ := seriesPerBin(s)
			m := measureRun(b, s)
			series := int64(m.nbins) * running
			var events, reqs uint64
			b.ReportAllocs()
			for b.Loop() {
				r, err := Run(context.Background(), s, "mm1", nil)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
				reqs += uint64(r.Clients[0].Total.Requests)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reqs), "ns/request")
			b.ReportMetric(float64(events)/float64(reqs), "events/request")
			b.ReportMetric(float64(m.allocated)/float64(m.requests), "alloc-B/request")
			b.ReportMetric(float64(m.peakLive), "peak-live-B")
			b.ReportMetric(float64(series), "series-B")
			b.ReportMetric(float64(m.peakLive-series), "rest-B")
		})
	}
}
