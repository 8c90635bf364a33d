package limit

import (
	"fmt"
	"testing"
	"time"
)

// The tests in this file drive each algorithm, wrapped in a Limiter, in the
// closed loop of server_test.go: a server that runs 8 requests at once at
// 10 ms (+ up to 5 % noise) and queues the rest, so that beyond 8 in flight
// RTT = 10 ms × inFlight / 8, with more demand than it can serve. Everything
// runs in virtual time from seeded PCG streams, so every figure below is
// exactly reproducible; the bands leave a margin around what was observed
// over seeds 1–20.

// testAlgorithms names the algorithms under test. AIMD gets a 20 ms timeout
// (twice the no-load latency): with the default 5 s it would only ever see
// drops, and there are none here. Gradient2 gets Min 1 instead of the
// default 20, which is above this server's capacity.
var testAlgorithms = map[string]Spec{
	"aimd":      {Kind: KindAIMD, AIMD: AIMDConfig{Timeout: 20 * time.Millisecond}},
	"vegas":     {Kind: KindVegas},
	"gradient2": {Kind: KindGradient2, Gradient2: Gradient2Config{Min: 1}},
}

// build returns a new algorithm of the test spec named name.
func build(t *testing.T, name string) Algorithm {
	t.Helper()
	alg, err := testAlgorithms[name].New()
	if err != nil {
		t.Fatal(err)
	}
	return alg
}

var testServer = server{capacity: 8, base: 10 * time.Millisecond, noise: 0.05}

// TestConvergence runs each algorithm for 2,000 samples of warm-up and
// checks the limit over the next 10,000. The bands, and why:
//
//	AIMD, capacity 8: a sawtooth over [1, 31], time-average 11.3 → want
//	  mean in [10, 13], range within [1, 32]. It adds 1 per sample, so the limit doubles every round trip until
//	  RTTs pass the 20 ms timeout (above 16 in flight); by then a round
//	  trip's worth of requests were admitted at the higher limit, and each
//	  late sample multiplies it by 0.9, which takes it down to the floor.
//	  Throughput is about 72 % of capacity. Capacity 4: [1, 15], mean 6.5.
//	Vegas, capacity 8: 11 (= C + 3, the bottom of its sweet spot [C + 3,
//	  C + 6]) for about 91 % of samples, dips to 5 while probing (every 330
//	  samples), brief spikes after a probe → want ≥ 85 % of samples in
//	  [9, 14], range within [4, 24], mean in [10, 12]. Capacity 4: 8 for
//	  about 92 % → ≥ 85 % in [6, 10], mean in [7, 9.5].
//	Gradient2, capacity 8: a sawtooth over [15, 89], mean 46 → want mean
//	  in [40, 52], range within [12, 95]. It does not find the capacity (see
//	  the type's documentation): the same at capacity 4. Throughput is full,
//	  but RTTs average about 5.7 × the no-load latency.
func TestConvergence(t *testing.T) {
	tests := []struct {
		alg            string
		capacity       int
		meanLo, meanHi float64 // want the mean limit in [meanLo, meanHi]
		lo, hi         int     // want every limit in [lo, hi]
		bandLo         int     // want at least share of the limits in [bandLo, bandHi]
		bandHi         int
		share          float64
	}{
		{alg: "aimd", capacity: 8, meanLo: 10, meanHi: 13, lo: 1, hi: 32},
		{alg: "aimd", capacity: 4, meanLo: 5.5, meanHi: 7.5, lo: 1, hi: 16},
		{alg: "vegas", capacity: 8, meanLo: 10, meanHi: 12, lo: 4, hi: 24, bandLo: 9, bandHi: 14, share: 0.85},
		{alg: "vegas", capacity: 4, meanLo: 7, meanHi: 9.5, lo: 2, hi: 16, bandLo: 6, bandHi: 10, share: 0.85},
		{alg: "gradient2", capacity: 8, meanLo: 40, meanHi: 52, lo: 12, hi: 95},
		{alg: "gradient2", capacity: 4, meanLo: 40, meanHi: 52, lo: 8, hi: 95},
	}
	for _, tc := range tests {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/capacity=%d/seed=%d", tc.alg, tc.capacity, seed), func(t *testing.T) {
				srv := testServer
				srv.capacity = tc.capacity
				lp := newLoop(build(t, tc.alg), srv, seed)
				lp.run(2000)
				limits := lp.run(10000)
				got := summarise(limits)
				if got.mean < tc.meanLo || got.mean > tc.meanHi {
					t.Errorf("mean limit = %.2f, want in [%g, %g]", got.mean, tc.meanLo, tc.meanHi)
				}
				if got.min < tc.lo || got.max > tc.hi {
					t.Errorf("limit range = [%d, %d], want within [%d, %d]", got.min, got.max, tc.lo, tc.hi)
				}
				if tc.share > 0 {
					if share := shareIn(limits, tc.bandLo, tc.bandHi); share < tc.share {
						t.Errorf("share of limits in [%d, %d] = %.3f, want ≥ %g", tc.bandLo, tc.bandHi, share, tc.share)
					}
				}
			})
		}
	}
}

// shareIn returns the fraction of limits in [lo, hi].
func shareIn(limits []int, lo, hi int) float64 {
	in := 0
	for _, l := range limits {
		if l >= lo && l <= hi {
			in++
		}
	}
	return float64(in) / float64(len(limits))
}

// TestBackOff lets each algorithm settle for 5,000 samples, then changes the
// server, and compares the limit with that of a twin run (same seed, same
// history) whose server did not change. The samples counted are those
// after the change; the first few still come from requests admitted before
// it.
//
//	capacity 8 → 4 (the ideal limit halves):
//	  AIMD: a mean over the next 500 samples of 6.5, against 11–13.5 for
//	    the twin → want ≤ 0.65 × the twin's.
//	  Vegas: 11 → 9 after 12 samples → want ≤ 9 within 20; over samples
//	    500–3,000 a mean of 8.8 vs 10.9 → want ≤ 9.5 and ≤ 0.9 × the twin's.
//	no-load latency × 3 (the capacity in requests is unchanged, so the ideal
//	limit is too; every RTT looks like a queue at first):
//	  AIMD: every RTT now exceeds its fixed 20 ms timeout, so it collapses to
//	    its floor (1) and stays there → want 1 from sample 30 on. A fixed
//	    timeout is AIMD's only view of latency.
//	  Vegas: 11 → 3 within 14 samples (the falling limit brings the next probe
//	    forward, which halves it); the probe learns the new no-load RTT and
//	    the limit recovers → want ≤ 8 within 20, and a mean over samples
//	    500–3,000 within 10 % of the twin's.
//	  Gradient2: its sawtooth makes the effect depend on the phase of the
//	    change, so here the latency triples when the limit climbs through 40.
//	    The ratio to the long average jumps, and once the ~40 requests
//	    admitted before the change are back, the limit falls by up to 10 %
//	    per sample: ≤ 20 after 55 samples, ≤ 12 after 64, while the twin
//	    stays ≥ 29 → want ≤ 12 within 80 samples, the twin ≥ 25 over them,
//	    and the mean over the 100 samples ≤ 0.65 × the twin's (0.50–0.57
//	    observed). After 500 samples the long average has caught up → want
//	    a mean over samples 500–3,000 within 10 % of the twin's.
func TestBackOff(t *testing.T) {
	type check func(t *testing.T, got, twin []int)
	tests := []struct {
		alg   string
		shift string // "capacity" or "latency"
		check check
	}{
		// The change comes at sample 5,000 (Gradient2: see above).
		{"aimd", "capacity", func(t *testing.T, got, twin []int) {
			wantAtMost(t, "mean of samples 0–500", mean(got[:500]), 0.65*mean(twin[:500]))
		}},
		{"aimd", "latency", func(t *testing.T, got, twin []int) {
			if s := summarise(got[30:]); s.max != 1 {
				t.Errorf("limits from sample 30 on range up to %d, want 1", s.max)
			}
		}},
		{"vegas", "capacity", func(t *testing.T, got, twin []int) {
			wantAtMost(t, "min of samples 0–20", float64(summarise(got[:20]).min), 9)
			wantAtMost(t, "mean of samples 500–3000", mean(got[500:]), 9.5)
			wantAtMost(t, "mean of samples 500–3000", mean(got[500:]), 0.9*mean(twin[500:]))
		}},
		{"vegas", "latency", func(t *testing.T, got, twin []int) {
			wantAtMost(t, "min of samples 0–20", float64(summarise(got[:20]).min), 8)
			wantNear(t, "mean of samples 500–3000", mean(got[500:]), mean(twin[500:]), 0.1)
		}},
		{"gradient2", "latency", func(t *testing.T, got, twin []int) {
			wantAtMost(t, "min of samples 0–80", float64(summarise(got[:80]).min), 12)
			if m := summarise(twin[:80]).min; m < 25 {
				t.Errorf("twin: min of samples 0–80 = %d, want ≥ 25", m)
			}
			wantAtMost(t, "mean of samples 0–100", mean(got[:100]), 0.65*mean(twin[:100]))
			wantNear(t, "mean of samples 500–3000", mean(got[500:]), mean(twin[500:]), 0.1)
		}},
	}
	for _, tc := range tests {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/%s/seed=%d", tc.alg, tc.shift, seed), func(t *testing.T) {
				lp := newLoop(build(t, tc.alg), testServer, seed)
				twin := newLoop(build(t, tc.alg), testServer, seed)
				lp.run(5000)
				twin.run(5000)
				if tc.alg == "gradient2" {
					for prev := lp.lim.Limit(); ; {
						cur := lp.run(1)[0]
						twin.run(1)
						if prev < 40 && cur >= 40 {
							break
						}
						prev = cur
					}
				}
				switch tc.shift {
				case "capacity":
					lp.srv.capacity = 4
				case "latency":
					lp.srv.base *= 3
				}
				tc.check(t, lp.run(3000), twin.run(3000))
			})
		}
	}
}

func mean(limits []int) float64 { return summarise(limits).mean }

func wantAtMost(t *testing.T, what string, got, limit float64) {
	t.Helper()
	if got > limit {
		t.Errorf("%s = %.2f, want ≤ %.2f", what, got, limit)
	}
}

func wantNear(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if got < want*(1-rel) || got > want*(1+rel) {
		t.Errorf("%s = %.2f, want within %g %% of %.2f", what, got, rel*100, want)
	}
}
