package limit

import (
	"fmt"
	"testing"
	"time"
)

// TestAIMDSteps checks the table in AIMD's documentation, and the other
// branches of its rule.
func TestAIMDSteps(t *testing.T) {
	good := Sample{RTT: 10 * time.Millisecond, InFlight: 100}
	drop := Sample{RTT: 10 * time.Millisecond, InFlight: 100, Dropped: true}
	slow := Sample{RTT: 6 * time.Second, InFlight: 100}
	idle := Sample{RTT: 10 * time.Millisecond, InFlight: 9}
	tests := []struct {
		name    string
		cfg     AIMDConfig
		samples []Sample
		want    []int // limit after each sample
	}{
		{"5 good", AIMDConfig{}, rep(good, 5), []int{21, 22, 23, 24, 25}},
		{"10 drops", AIMDConfig{}, rep(drop, 10), []int{18, 16, 14, 12, 10, 9, 8, 7, 6, 5}},
		{"timeout counts as a drop", AIMDConfig{}, rep(slow, 2), []int{18, 16}},
		{"custom timeout", AIMDConfig{Timeout: 5 * time.Millisecond}, rep(good, 2), []int{18, 16}},
		{"application-limited", AIMDConfig{}, []Sample{idle, {RTT: time.Millisecond, InFlight: 10}}, []int{20, 21}},
		{"floor", AIMDConfig{Initial: 3, Min: 2}, rep(drop, 3), []int{2, 2, 2}},
		{"ceiling", AIMDConfig{Initial: 29, Max: 30}, rep(good, 3), []int{30, 30, 30}},
		{"ratio", AIMDConfig{BackoffRatio: 0.5}, rep(drop, 3), []int{10, 5, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAIMD(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := updates(a, tc.samples)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("limits = %v, want %v", got, tc.want)
			}
			if a.Limit() != got[len(got)-1] {
				t.Errorf("Limit() = %d, want %d (the last Update)", a.Limit(), got[len(got)-1])
			}
		})
	}
}

// TestZeroAlgorithms checks that the zero values behave as built from the
// zero configs.
func TestZeroAlgorithms(t *testing.T) {
	samples := append(rep(Sample{RTT: 10 * time.Millisecond, InFlight: 30}, 50),
		rep(Sample{RTT: 40 * time.Millisecond, InFlight: 30, Dropped: true}, 20)...)
	tests := []struct {
		name      string
		zero, std func() Algorithm
	}{
		{"aimd", func() Algorithm { return &AIMD{} }, func() Algorithm { a, _ := NewAIMD(AIMDConfig{}); return a }},
		{"vegas", func() Algorithm { return &Vegas{} }, func() Algorithm { a, _ := NewVegas(VegasConfig{}); return a }},
		{"gradient2", func() Algorithm { return &Gradient2{} }, func() Algorithm { a, _ := NewGradient2(Gradient2Config{}); return a }},
		{"fixed", func() Algorithm { return Fixed{} }, func() Algorithm { return Fixed{N: 1} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			zero, std := tc.zero(), tc.std()
			if zero.Limit() != std.Limit() {
				t.Fatalf("zero Limit() = %d, want %d", zero.Limit(), std.Limit())
			}
			if got, want := updates(zero, samples), updates(std, samples); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("zero value limits = %v, want %v", got, want)
			}
		})
	}
}

// rep returns n copies of s.
func rep(s Sample, n int) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// updates feeds samples to a and returns the limit after each.
func updates(a Algorithm, samples []Sample) []int {
	got := make([]int, len(samples))
	for i, s := range samples {
		got[i] = a.Update(s)
	}
	return got
}
