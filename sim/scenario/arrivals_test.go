package scenario

import (
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
)

// countArrivals draws a client's open-loop arrivals over [0, end) with
// NextArrival and counts them in windows of width w.
func countArrivals(a Arrivals, seed uint64, end, w time.Duration) []float64 {
	rng := engine.Stream(seed, 1)
	counts := make([]float64, int(end/w))
	t := time.Duration(0)
	for {
		next, ok := a.NextArrival(t, nil, &rng)
		if !ok || next >= end {
			return counts
		}
		t = next
		counts[int(t/w)]++
	}
}

// TestArrivalsFollowTheRate: a schedule's rate holds from the instant it
// changes — a step from 0.5/s to 1000/s brings its 1000/s at once, not
// after a gap drawn at 0.5/s — and on a ramp the count in each window is
// the rate's integral over it (Poisson: the mean over many seeds, within
// 4 standard errors; constant: exactly, to one arrival).
func TestArrivalsFollowTheRate(t *testing.T) {
	step := []RatePoint{{At: 10 * time.Second, Rate: 1000}, {At: 11 * time.Second, Rate: 0.5}}
	ramp := []RatePoint{{At: 10 * time.Second, Rate: 0}, {At: 20 * time.Second, Rate: 400, Ramp: true}}
	// want: the integral of the rate over each 0.5 s window.
	stepWant := func(lo, hi float64) float64 {
		in := math.Max(0, math.Min(hi, 11)-math.Max(lo, 10))
		return 1000*in + 0.5*(hi-lo-in)
	}
	rampWant := func(lo, hi float64) float64 {
		r := func(x float64) float64 { return 40 * math.Max(0, math.Min(x, 20)-10) } // 0 → 400 over 10 s
		if lo >= 20 {
			return 400 * (hi - lo)
		}
		return (r(lo) + r(hi)) / 2 * (hi - lo)
	}
	const w = 500 * time.Millisecond
	for _, c := range []struct {
		name  string
		a     Arrivals
		end   time.Duration
		want  func(lo, hi float64) float64
		seeds int
	}{
		{"poisson step", Arrivals{Kind: "poisson", Rate: 0.5, Schedule: step}, 12 * time.Second, stepWant, 400},
		{"poisson ramp", Arrivals{Kind: "poisson", Rate: 0, Schedule: ramp}, 21 * time.Second, rampWant, 200},
		{"constant step", Arrivals{Kind: "constant", Rate: 0.5, Schedule: step}, 12 * time.Second, stepWant, 1},
		{"constant ramp", Arrivals{Kind: "constant", Rate: 0, Schedule: ramp}, 21 * time.Second, rampWant, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sum := make([]float64, int(c.end/w))
			for s := range c.seeds {
				for i, n := range countArrivals(c.a, uint64(s+1), c.end, w) {
					sum[i] += n
				}
			}
			for i := range sum {
				lo := (time.Duration(i) * w).Seconds()
				want := c.want(lo, lo+w.Seconds())
				got := sum[i] / float64(c.seeds)
				tol := 4 * math.Sqrt(want/float64(c.seeds)) // Poisson: 4 standard errors of the mean
				if c.a.Kind == "constant" {
					tol = 1.0001 // phase: at most one arrival either side
				}
				if math.Abs(got-want) > tol+1e-9 {
					t.Errorf("window [%.1f s, %.1f s): %.2f arrivals, want %.2f ± %.2f", lo, lo+w.Seconds(), got, want, tol)
				}
			}
		})
	}
}

// TestPlainRate: PlainRate names exactly the processes whose next arrival
// is one exponential gap at a fixed rate, and for those the shortcut
// scheduleArrival takes (t + ExpFloat64()/rate·1e9) draws the same
// instants from the same stream as NextArrival, for 10,000 arrivals.
func TestPlainRate(t *testing.T) {
	load := []Trigger{{Kind: "load", At: time.Second, Duration: time.Second, Factor: 2}}
	other := []Trigger{{Kind: "outage", At: time.Second, Duration: time.Second}}
	for _, tc := range []struct {
		name     string
		a        Arrivals
		triggers []Trigger
		want     float64
	}{
		{"poisson", Arrivals{Kind: "poisson", Rate: 900}, nil, 900},
		{"default kind", Arrivals{Rate: 50}, nil, 50},
		{"non-load trigger", Arrivals{Kind: "poisson", Rate: 900}, other, 900},
		{"load trigger", Arrivals{Kind: "poisson", Rate: 900}, load, 0},
		{"schedule", Arrivals{Kind: "poisson", Rate: 900, Schedule: []RatePoint{{At: time.Second, Rate: 10}}}, nil, 0},
		{"zero rate", Arrivals{Kind: "poisson"}, nil, 0},
		{"constant", Arrivals{Kind: "constant", Rate: 900}, nil, 0},
		{"closed", Arrivals{Kind: "closed", Users: 10}, nil, 0},
		{"burst", Arrivals{Kind: "burst", Count: 10}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.PlainRate(tc.triggers)
			if got != tc.want {
				t.Fatalf("PlainRate = %v, want %v", got, tc.want)
			}
			if got == 0 {
				return
			}
			r1, r2 := engine.Stream(7, 1), engine.Stream(7, 1)
			var t1, t2 time.Duration
			for i := range 10000 {
				next, ok := tc.a.NextArrival(t1, tc.triggers, &r1)
				if !ok {
					t.Fatalf("arrival %d: NextArrival found none", i)
				}
				short := t2 + time.Duration(r2.ExpFloat64()/got*1e9)
				if next != short {
					t.Fatalf("arrival %d: NextArrival %v, shortcut %v", i, next, short)
				}
				t1, t2 = next, short
			}
		})
	}
}
