package limit

import (
	"math"
	"testing"
	"time"
)

// TestGradient2Steps checks the table in Gradient2's documentation: from
// L = 40 and a warmed-up long average of 10 ms, one sample with InFlight 40.
func TestGradient2Steps(t *testing.T) {
	tests := []struct {
		rtt       time.Duration
		wantLong  float64 // ms
		wantLimit float64
	}{
		{4 * ms, 9.481, 40.80},
		{10 * ms, 10, 40.80},
		{15 * ms, 10.017, 40.80},
		{20 * ms, 10.033, 38.82},
		{30 * ms, 10.067, 36.83},
		{100 * ms, 10.300, 36.80},
	}
	for _, tc := range tests {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			g := warmGradient2(t, Gradient2Config{}, 40, 10*ms)
			got := g.Update(Sample{RTT: tc.rtt, InFlight: 40})
			if got != int(tc.wantLimit) {
				t.Errorf("Update = %d, want %d", got, int(tc.wantLimit))
			}
			if !near(g.limit, tc.wantLimit, 0.005) {
				t.Errorf("L = %.4f, want %.2f", g.limit, tc.wantLimit)
			}
			if long := float64(g.LongRTT()) / 1e6; !near(long, tc.wantLong, 0.0006) {
				t.Errorf("LongRTT = %.4f ms, want %.3f ms", long, tc.wantLong)
			}
		})
	}
}

// TestGradient2Rules checks the branches around the formula.
func TestGradient2Rules(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Gradient2Config
		sample    Sample
		wantLimit float64
	}{
		{"application-limited", Gradient2Config{}, Sample{RTT: 100 * ms, InFlight: 19}, 40},
		{"half in flight counts", Gradient2Config{}, Sample{RTT: 100 * ms, InFlight: 20}, 36.8},
		{"drop is a plain sample", Gradient2Config{}, Sample{RTT: 10 * ms, InFlight: 40, Dropped: true}, 40.8},
		{"zero RTT skipped", Gradient2Config{}, Sample{InFlight: 40}, 40},
		{"floor", Gradient2Config{Min: 38}, Sample{RTT: 100 * ms, InFlight: 40}, 38},
		{"ceiling", Gradient2Config{Max: 40}, Sample{RTT: 10 * ms, InFlight: 40}, 40},
		{"tolerance 2", Gradient2Config{Tolerance: 2}, Sample{RTT: 20 * ms, InFlight: 40}, 40.8},
		{"queue 10", Gradient2Config{QueueSize: 10}, Sample{RTT: 10 * ms, InFlight: 40}, 42},
		{"smoothing 1", Gradient2Config{Smoothing: 1}, Sample{RTT: 100 * ms, InFlight: 40}, 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := warmGradient2(t, tc.cfg, 40, 10*ms)
			g.Update(tc.sample)
			if !near(g.limit, tc.wantLimit, 0.005) {
				t.Errorf("L = %.4f, want %g", g.limit, tc.wantLimit)
			}
		})
	}
}

// TestGradient2Warmup checks that the first 10 RTTs are averaged plainly and
// the later ones exponentially, with weight 2 / (LongWindow + 1).
func TestGradient2Warmup(t *testing.T) {
	g, err := NewGradient2(Gradient2Config{LongWindow: 99})
	if err != nil {
		t.Fatal(err)
	}
	idle := func(rtt time.Duration) Sample { return Sample{RTT: rtt, InFlight: 1} }
	for i := 1; i <= 10; i++ {
		g.Update(idle(time.Duration(i) * ms)) // mean of 1..i ms
		if want := float64(i+1) / 2; !near(float64(g.LongRTT())/1e6, want, 1e-9) {
			t.Fatalf("after %d samples LongRTT = %v, want %g ms", i, g.LongRTT(), want)
		}
	}
	g.Update(idle(105500 * time.Microsecond)) // 5.5 + (105.5 − 5.5) × 0.02
	if want := 7.5; !near(float64(g.LongRTT())/1e6, want, 1e-9) {
		t.Errorf("LongRTT = %v, want %g ms", g.LongRTT(), want)
	}
	if g.Limit() != 20 {
		t.Errorf("Limit = %d after application-limited samples, want 20", g.Limit())
	}
}

// warmGradient2 returns a Gradient2 configured by cfg at L = limit, with a
// warmed-up long average of long.
func warmGradient2(t *testing.T, cfg Gradient2Config, limit float64, long time.Duration) *Gradient2 {
	t.Helper()
	g, err := NewGradient2(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.limit, g.long, g.n = limit, float64(long), g2Warmup
	return g
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }
