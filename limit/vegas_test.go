package limit

import (
	"fmt"
	"testing"
	"time"
)

const ms = time.Millisecond

// TestVegasSteps checks the table in Vegas's documentation, and the other
// branches of its rule. Every case starts from L = 20 with noLoad = 10 ms.
func TestVegasSteps(t *testing.T) {
	tests := []struct {
		name   string
		cfg    VegasConfig
		sample Sample
		want   int
		noLoad time.Duration // want noLoad after the sample
	}{
		{"no queue", VegasConfig{}, Sample{RTT: 10 * ms, InFlight: 20}, 26, 10 * ms},
		{"small queue", VegasConfig{}, Sample{RTT: 11 * ms, InFlight: 20}, 21, 10 * ms},
		{"sweet spot", VegasConfig{}, Sample{RTT: 12500 * time.Microsecond, InFlight: 20}, 20, 10 * ms},
		{"queue", VegasConfig{}, Sample{RTT: 20 * ms, InFlight: 20}, 19, 10 * ms},
		{"drop", VegasConfig{}, Sample{RTT: 10 * ms, InFlight: 20, Dropped: true}, 19, 10 * ms},
		{"fast drop keeps noLoad", VegasConfig{}, Sample{RTT: ms, InFlight: 20, Dropped: true}, 19, 10 * ms},
		{"new minimum", VegasConfig{}, Sample{RTT: 5 * ms, InFlight: 20}, 20, 5 * ms},
		{"application-limited", VegasConfig{}, Sample{RTT: 20 * ms, InFlight: 9}, 20, 10 * ms},
		{"zero RTT skipped", VegasConfig{}, Sample{InFlight: 20}, 20, 10 * ms},
		{"smoothing", VegasConfig{Smoothing: 0.5}, Sample{RTT: 10 * ms, InFlight: 20}, 23, 10 * ms},
		{"ceiling", VegasConfig{Max: 22}, Sample{RTT: 10 * ms, InFlight: 20}, 22, 10 * ms},
		{"floor", VegasConfig{Min: 20}, Sample{RTT: 20 * ms, InFlight: 20}, 20, 10 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewVegas(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			v.noLoad = 10 * ms
			if got := v.Update(tc.sample); got != tc.want {
				t.Errorf("Update = %d, want %d", got, tc.want)
			}
			if got := v.NoLoadRTT(); got != tc.noLoad {
				t.Errorf("NoLoadRTT = %v, want %v", got, tc.noLoad)
			}
		})
	}
}

func TestVegasLog10(t *testing.T) {
	tests := []struct {
		n    int
		want float64
	}{{1, 1}, {9, 1}, {10, 1}, {99, 1}, {100, 2}, {999, 2}, {1000, 3}, {9999, 3}, {10000, 4}, {123456, 5}}
	for _, tc := range tests {
		if got := log10(tc.n); got != tc.want {
			t.Errorf("log10(%d) = %g, want %g", tc.n, got, tc.want)
		}
	}
}

// TestVegasProbe walks through one probe: with ProbeMultiplier 1 and L = 10,
// it starts after 10 samples, reports 5, ignores samples admitted with more
// than 5 in flight, takes the minimum RTT of 5 that were not, and restores
// L = 10 with the new (higher) noLoad.
func TestVegasProbe(t *testing.T) {
	v, err := NewVegas(VegasConfig{Initial: 10, ProbeMultiplier: 1})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		sample Sample
		n      int
		limit  int           // want after the samples
		noLoad time.Duration // want after the samples
	}{
		{Sample{RTT: 10 * ms, InFlight: 10}, 1, 10, 10 * ms}, // baseline
		{Sample{RTT: 13 * ms, InFlight: 10}, 8, 10, 10 * ms}, // queue 3: sweet spot
		{Sample{RTT: 13 * ms, InFlight: 10}, 1, 5, 10 * ms},  // 10th sample: probe
		{Sample{RTT: 13 * ms, InFlight: 10}, 10, 5, 10 * ms}, // admitted before: ignored
		{Sample{RTT: 25 * ms, InFlight: 5}, 2, 5, 10 * ms},   // qualify
		{Sample{RTT: 20 * ms, InFlight: 4}, 2, 5, 10 * ms},   // qualify, new minimum
		{Sample{RTT: 30 * ms, InFlight: 3}, 1, 10, 20 * ms},  // 5th: done, noLoad rises
		{Sample{RTT: 20 * ms, InFlight: 10}, 1, 16, 20 * ms}, // no queue at the new baseline
	}
	for i, st := range steps {
		var got int
		for range st.n {
			got = v.Update(st.sample)
		}
		if got != st.limit || v.Limit() != st.limit || v.NoLoadRTT() != st.noLoad {
			t.Fatalf("step %d: limit = %d (Limit %d), noLoad = %v; want %d, %v", i, got, v.Limit(), v.NoLoadRTT(), st.limit, st.noLoad)
		}
	}
}

// TestVegasProbeGivesUp checks that a probe that sees no qualifying sample
// ends after 4 × L + 4 samples, keeps noLoad, and that drops during a probe
// lower the limit it restores.
func TestVegasProbeGivesUp(t *testing.T) {
	v, err := NewVegas(VegasConfig{Initial: 10, ProbeMultiplier: 1})
	if err != nil {
		t.Fatal(err)
	}
	busy := Sample{RTT: 13 * ms, InFlight: 10}
	v.Update(Sample{RTT: 10 * ms, InFlight: 10})
	for range 9 {
		v.Update(busy)
	}
	if !v.probing {
		t.Fatal("no probe after 10 samples")
	}
	v.Update(Sample{RTT: 13 * ms, InFlight: 10, Dropped: true}) // saved: 10 → 9
	for range 4*10 + 4 - 2 {
		if got := v.Update(busy); got != 5 {
			t.Fatalf("limit during probe = %d, want 5", got)
		}
	}
	if got := v.Update(busy); got != 9 || v.probing {
		t.Fatalf("after 44 samples: limit = %d, probing = %v; want 9, false", got, v.probing)
	}
	if v.NoLoadRTT() != 10*ms {
		t.Errorf("NoLoadRTT = %v, want 10ms", v.NoLoadRTT())
	}
}

func TestVegasNoProbe(t *testing.T) {
	v, err := NewVegas(VegasConfig{Initial: 10, ProbeMultiplier: 1, NoProbe: true})
	if err != nil {
		t.Fatal(err)
	}
	v.Update(Sample{RTT: 10 * ms, InFlight: 10})
	got := updates(v, rep(Sample{RTT: 13 * ms, InFlight: 10}, 1000))
	if s := summarise(got); s.min != 10 || s.max != 10 {
		t.Errorf("limits range over [%d, %d], want 10 throughout", s.min, s.max)
	}
	if fmt.Sprint(v.probing) != "false" {
		t.Error("probing with NoProbe")
	}
}
