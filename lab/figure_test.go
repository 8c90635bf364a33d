package lab

import (
	"slices"
	"testing"
)

// The difference panel's ticks always include 0 when the range holds it,
// at the default ticks' step; other ranges keep the default ticks.
func TestZeroTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []float64 // the labelled ticks
	}{
		{-120, 190, []float64{-120, 0, 120}}, // gonum's default: -80, 40, 160
		{-37.5, 60, []float64{-30, 0, 30, 60}},
		{-0.7, 1.2, []float64{-0.5, 0, 0.5, 1}},
		{5, 25, []float64{5, 15, 25}}, // no zero in range: the default ticks
	}
	for _, tt := range tests {
		var got []float64
		for _, tk := range (zeroTicks{}).Ticks(tt.lo, tt.hi) {
			if tk.Label != "" {
				got = append(got, tk.Value)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("[%v, %v]: ticks %v, want %v", tt.lo, tt.hi, got, tt.want)
		}
	}
	for _, tk := range (zeroTicks{}).Ticks(-120, 190) {
		if tk.Value == 0 && tk.Label != "0" {
			t.Errorf("the zero tick is labelled %q", tk.Label)
		}
	}
}
