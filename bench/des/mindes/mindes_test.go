package main

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/cputime"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/scenario"
)

// params is the benchmark model with timeout: calm at 1 s (no attempt
// ever times out), a storm at 40 ms (every request is retried once the
// queue holds more than 40 ms of work, which it soon does).
func params(timeout, horizon time.Duration) Params {
	return Params{Rate: 900, Mean: time.Millisecond, Timeout: timeout, MaxAttempts: 2, Horizon: horizon,
		Bin: time.Second, Seed: 1, Client: "app", Service: "db"}
}

// scenarioOf is p as a stormguard scenario: the naive preset with p's
// attempts (no backoff, no budget), one worker, the default queue (FIFO,
// 200,000 places: the runs here never fill it).
func scenarioOf(p Params) scenario.Scenario {
	pol, _ := retry.Preset("naive")
	pol.MaxAttempts = p.MaxAttempts
	return scenario.Scenario{Name: "mm1", Duration: p.Horizon, Bin: p.Bin, Seed: p.Seed,
		Clients: []scenario.Client{{Name: p.Client, Target: p.Service, Arrivals: scenario.Arrivals{Kind: "poisson", Rate: p.Rate},
			Policy: scenario.PolicySpec{Preset: "naive", Policy: pol}, Timeout: p.Timeout}},
		Services: []scenario.Service{{Name: p.Service, Workers: 1, ServiceTime: scenario.Dist{Kind: "exponential", Mean: p.Mean}}},
	}
}

// TestSameAsSimulator checks that this program simulates the simulator's
// model: it draws the same streams and schedules its events in the same
// order, so its requests, served and failed requests, events, mean
// latency (the same sum in the same order) and every bin's served count,
// p50 and p99 equal sim.Run's exactly, calm and in a storm, for a few
// seeds.
func TestSameAsSimulator(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"calm", time.Second}, {"storm", 40 * time.Millisecond}} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed=%d", c.name, seed), func(t *testing.T) {
				p := params(c.timeout, 30*time.Second)
				p.Seed = seed
				got := Run(p)
				r, err := sim.Run(context.Background(), scenarioOf(p), "mm1", nil)
				if err != nil {
					t.Fatal(err)
				}
				want := r.Clients[0].Total
				if got.Requests != want.Requests || got.Served != want.Succeeded || got.Failed != want.Failed || got.Events != int64(r.Events) {
					t.Errorf("requests, served, failed, events: got %d, %d, %d, %d, want %d, %d, %d, %d",
						got.Requests, got.Served, got.Failed, got.Events, want.Requests, want.Succeeded, want.Failed, r.Events)
				}
				if got.LatencyS != want.SuccessLatencyS {
					t.Errorf("mean latency %v s, want %v s", got.LatencyS, want.SuccessLatencyS)
				}
				for b, cb := range r.Clients[0].Bins {
					served := int64(math.Round(cb.Goodput * r.BinS))
					if got.ServedBin[b] != served || got.P50[b] != cb.LatencyP50 || got.P99[b] != cb.LatencyP99 {
						t.Errorf("bin %d: served, p50, p99 %d, %v, %v; want %d, %v, %v", b,
							got.ServedBin[b], got.P50[b], got.P99[b], served, cb.LatencyP50, cb.LatencyP99)
					}
				}
				t.Logf("%d requests, %d served, %d failed, %d events, mean latency %.6f s", got.Requests, got.Served, got.Failed, got.Events, got.LatencyS)
			})
		}
	}
}

// BenchmarkMinimalMM1 runs the model for 100 s of virtual time (about
// 90,000 requests), calm and storm, as sim's BenchmarkMM1 and
// BenchmarkMM1Storm run the simulator; it reports ns per request and CPU
// time per request (cpu-ns/request).
func BenchmarkMinimalMM1(b *testing.B) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"calm", time.Second}, {"storm", 40 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			p := params(c.timeout, 100*time.Second)
			var reqs, events int64
			b.ReportAllocs()
			cpu0, cpuOK := cputime.Process()
			for b.Loop() {
				r := Run(p)
				reqs += r.Requests
				events += r.Events
			}
			cpu1, ok := cputime.Process()
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reqs), "ns/request")
			if cpuOK && ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(reqs), "cpu-ns/request")
			}
		})
	}
}
