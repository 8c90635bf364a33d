package sim

import (
	"context"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// mm1At is issue 16's M/M/1 model at load rho: one FIFO worker with
// exponential service of mean 1 ms, Poisson arrivals at rho × 1000/s, a
// 1 s client timeout and one allowed retry (which fire only at loads near
// 1: a sojourn above 1 s has probability e^-(1000 − λ)·1s), for d of virtual
// time in 1 s bins.
func mm1At(rho float64, d time.Duration) scenario.Scenario {
	p, _ := retry.Preset("naive")
	p.MaxAttempts = 2
	return scenario.Scenario{Name: "mm1", Duration: d, Seed: 1,
		Clients:  []scenario.Client{{Name: "app", Target: "db", Arrivals: scenario.Arrivals{Kind: "poisson", Rate: rho * 1000}, Policy: scenario.PolicySpec{Preset: "naive", Policy: p}, Timeout: time.Second}},
		Services: []scenario.Service{{Name: "db", Workers: 1, ServiceTime: scenario.Dist{Kind: "exponential", Mean: time.Millisecond}}},
	}
}

// runCost is what one run cost in memory.
type runCost struct {
	requests  int64  // first tries the client made
	events    uint64 // events the engine delivered
	nbins     int
	allocated uint64 // bytes allocated by the run, all of it (TotalAlloc)
	// peakLive is the largest live heap above the heap before the run,
	// measured after a full collection at each of the run's progress
	// calls (about 100, spread over its virtual time), the last one, after
	// the Result is built, left out: what the run holds while it runs.
	peakLive int64
	// endLive is the live heap above the heap before the run once Run
	// has returned, its Result still held.
	endLive int64
}

// seriesPerBin returns the bytes a run of s holds for each bin while it
// runs (the per-bin arrays of clientStats and serviceStats, allocated for
// the whole horizon when the run starts) and those its Result holds (a
// ClientBin or ServiceBin per series). Both are O(duration / bin) by
// design: they are the run's output.
func seriesPerBin(s scenario.Scenario) (running, held int64) {
	perSlices := func(t reflect.Type) int64 {
		var n int64
		for i := range t.NumField() {
			f := t.Field(i)
			// lat is the open bin's latency sample: bounded by one bin's
			// successes, not by the horizon.
			if f.Type.Kind() == reflect.Slice && f.Name != "lat" {
				n += int64(f.Type.Elem().Size())
			}
		}
		return n
	}
	c, v := int64(len(s.Clients)), int64(len(s.Services))
	running = c*perSlices(reflect.TypeFor[clientStats]()) + v*perSlices(reflect.TypeFor[serviceStats]())
	held = c*int64(unsafe.Sizeof(result.ClientBin{})) + v*int64(unsafe.Sizeof(result.ServiceBin{}))
	return running, held
}

// measureRun runs s once and returns what it cost in memory (see runCost).
// The collections it forces cost time: it is not for timing.
func measureRun(tb testing.TB, s scenario.Scenario) runCost {
	tb.Helper()
	var m runtime.MemStats
	var base int64
	live := make([]int64, 0, 256) // made before the run: its growth is not the run's
	sample := func(float64) {
		runtime.GC()
		runtime.ReadMemStats(&m)
		live = append(live, int64(m.HeapAlloc)-base)
	}
	// Two collections: the first leaves sync.Pool's victims, which the
	// run's own collections would free, and the base would be too high.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	base, alloc0 := int64(m.HeapAlloc), m.TotalAlloc
	r, err := RunWithin(context.Background(), s, "mm1", sample, Limits{Events: math.Inf(1), Memory: math.Inf(1)})
	if err != nil {
		tb.Fatal(err)
	}
	runtime.ReadMemStats(&m)
	c := runCost{
		requests:  r.Clients[0].Total.Requests,
		events:    r.Events,
		nbins:     len(r.Clients[0].Bins),
		allocated: m.TotalAlloc - alloc0,
	}
	runtime.GC()
	runtime.ReadMemStats(&m)
	c.endLive = int64(m.HeapAlloc) - base
	runtime.KeepAlive(r)
	for _, l := range live[:max(len(live)-1, 0)] {
		c.peakLive = max(c.peakLive, l)
	}
	return c
}

// raceBuild reports whether the test binary was built with -race, which
// makes a run several times slower and its allocations not the program's.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestCostScalesWithHorizon runs a model for 10× and 100× a base horizon
// of 20 s (180,000 and 1.8 million requests) and checks that cost per
// request is flat and that memory is bounded by what is pending. The
// per-bin series grow with the horizon by design (they are the output:
// seriesPerBin's bytes per bin) and are counted apart:
//
//   - bytes allocated per request at 100× within 1.5× of those at 10×;
//   - the live heap while the run goes on, less the running series (bins ×
//     their bytes), at 100× within maxRest× of that at 10×.
//
// The models: issue 16's M/M/1 (load 0.9), whose pending requests and
// timeouts reach higher peaks in a longer run (the queue's extremes), and
// the structures that hold them grow to those peaks by doubling, so
// its bound is 2×; and D/D/1, the same with constant arrivals and service,
// where at most one request and 900 timeouts are ever pending, so nothing
// but the series may grow: there the bound is 1.25×, and what the longer
// run allocated beyond the shorter one, per extra bin, is within 1.25× of
// the series' bytes per bin (running arrays and Result together).
//
// No timing: allocation and live heap are the same on any machine.
func TestCostScalesWithHorizon(t *testing.T) {
	if testing.Short() || raceBuild() {
		t.Skip("4 million simulated requests; under -race the allocations are the detector's")
	}
	const base = 20 * time.Second
	for _, tc := range []struct {
		name    string
		fixed   bool // constant arrivals and service: pending bounded by construction
		maxRest float64
	}{
		{"MM1", false, 2},
		{"DD1", true, 1.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := func(d time.Duration) scenario.Scenario {
				s := mm1At(0.9, d)
				if tc.fixed {
					s.Clients[0].Arrivals.Kind = "constant"
					s.Services[0].ServiceTime.Kind = "constant"
				}
				return s
			}
			running, held := seriesPerBin(model(base))
			c10 := measureRun(t, model(10*base))
			c100 := measureRun(t, model(100*base))
			rest := func(c runCost) int64 { return c.peakLive - int64(c.nbins)*running }
			for _, c := range []struct {
				name string
				c    runCost
			}{{"10×", c10}, {"100×", c100}} {
				t.Logf("%-4s %7d requests %5d bins: allocated %7d B (%.2f B/request); peak live %6d B = series %6d + rest %6d; live after the run, its Result held: %6d B",
					c.name, c.c.requests, c.c.nbins, c.c.allocated, float64(c.c.allocated)/float64(c.c.requests),
					c.c.peakLive, int64(c.c.nbins)*running, rest(c.c), c.c.endLive)
			}

			per10 := float64(c10.allocated) / float64(c10.requests)
			per100 := float64(c100.allocated) / float64(c100.requests)
			if per100 > 1.5*per10 {
				t.Errorf("allocated per request: %.2f B at 100×, %.2f B at 10×: want at most 1.5× (flat cost per request)", per100, per10)
			}

			if rest(c10) <= 0 {
				t.Fatalf("peak live heap at 10× %d B, not above its series' %d B: the sampling saw no run", c10.peakLive, int64(c10.nbins)*running)
			}
			if r := float64(rest(c100)) / float64(rest(c10)); r > tc.maxRest {
				t.Errorf("live heap besides the series: %d B at 100×, %d B at 10× (%.2f×): want at most %g× (bounded by what is pending, not by the horizon)",
					rest(c100), rest(c10), r, tc.maxRest)
			}

			extraBins := float64(c100.nbins - c10.nbins)
			perBin := float64(int64(c100.allocated)-int64(c10.allocated)) / extraBins
			t.Logf("per extra bin (900 requests): allocated %.0f B, peak live heap %.0f B; the series hold %d B per bin running and %d B in the Result",
				perBin, float64(c100.peakLive-c10.peakLive)/extraBins, running, held)
			if want := 1.25 * float64(running+held); tc.fixed && perBin > want {
				t.Errorf("allocated per extra bin of horizon: %.0f B, want at most %.0f (1.25 × the series' %d B per bin): something besides the series grows with the horizon",
					perBin, want, running+held)
			}
		})
	}
}
