package sim

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSeed004 runs examples/seed004.yaml, scenario A, for the tick
// counts bench/seed004/compare.sh times the seed's Python program at; one
// op is one whole run. It reports the model's events per second. The
// 1-tick run measures what a run costs besides its ticks (building the
// world, the statistics, the verdict).
func BenchmarkSeed004(b *testing.B) {
	f, err := Load(filepath.Join("..", "examples", "seed004.yaml"))
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
	f, err := Load(filepath.Join("..", "examples", "hotos-toy.yaml"))
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
