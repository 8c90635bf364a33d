package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestStreamDerivation checks Stream against the derivation its doc
// comment states, written out independently.
func TestStreamDerivation(t *testing.T) {
	mix := func(z uint64) uint64 {
		z ^= z >> 30
		z *= 0xbf58476d1ce4e5b9
		z ^= z >> 27
		z *= 0x94d049bb133111eb
		return z ^ z>>31
	}
	for _, c := range []struct{ seed, id uint64 }{{0, 0}, {1, 0}, {0, 1}, {42, 7}, {math.MaxUint64, math.MaxUint64}} {
		lo := mix(c.id + 0x9e3779b97f4a7c15)
		want := rand.NewPCG(mix(c.seed^lo), lo)
		got := Stream(c.seed, c.id)
		for i := range 5 {
			if g, w := got.Uint64(), want.Uint64(); g != w {
				t.Fatalf("Stream(%d, %d) draw %d = %#x, want %#x", c.seed, c.id, i, g, w)
			}
		}
	}
}

// TestStreamGolden pins the first draws of a few streams: if these change,
// every simulation's results change.
func TestStreamGolden(t *testing.T) {
	tests := []struct {
		seed, id uint64
		want     [3]uint64
	}{
		{0, 0, [3]uint64{0xddfe86616f124c21, 0xa68bfd69a6837dcf, 0xc6e8bd047514a6fc}},
		{1, 0, [3]uint64{0xfab6e84d03289be1, 0xf4014bed6e7a5288, 0x96459c01515eabbb}},
		{1, 1, [3]uint64{0x78cbe63224711dd2, 0x19ed9e5cf46087b9, 0xab9fa5bb7b7e932b}},
	}
	for _, tt := range tests {
		r := Stream(tt.seed, tt.id)
		got := [3]uint64{r.Uint64(), r.Uint64(), r.Uint64()}
		if got != tt.want {
			t.Errorf("Stream(%d, %d) first draws = %#x, want %#x", tt.seed, tt.id, got, tt.want)
		}
	}
}

// TestStreamIndependence checks that streams are a function of (seed, id)
// alone: equal pairs give equal streams, whatever else was created in
// between, and different pairs give different streams.
func TestStreamIndependence(t *testing.T) {
	a := Stream(9, 123)
	for i := range 1000 { // unrelated streams created and used in between
		s := Stream(9, uint64(i))
		s.Uint64()
	}
	b := Stream(9, 123)
	for i := range 1000 {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: streams for the same (seed, id) differ: %#x, %#x", i, x, y)
		}
	}

	// First draws of 10⁵ streams (ids 0…, and the same ids under another
	// seed) are all distinct: a collision among 2×10⁵ random 64-bit values
	// has probability about 10⁻⁹.
	seen := make(map[uint64]string)
	for _, seed := range []uint64{1, 2} {
		for id := range uint64(100_000) {
			r := Stream(seed, id)
			v := r.Uint64()
			if prev, dup := seen[v]; dup {
				t.Fatalf("Stream(%d, %d) starts like %s", seed, id, prev)
			}
			seen[v] = fmt.Sprintf("Stream(%d, %d)", seed, id)
		}
	}
}

// TestRandAsSource checks that *Rand works as a math/rand/v2 Source.
func TestRandAsSource(t *testing.T) {
	a, b := Stream(5, 5), Stream(5, 5)
	ra := rand.New(&a)
	for i := range 10 {
		if x, y := ra.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d through rand.New: %#x, direct: %#x", i, x, y)
		}
	}
}

func TestFloat64(t *testing.T) {
	r := Stream(1, 2)
	const n = 200_000
	sum := 0.0
	for range n {
		x := r.Float64()
		if x < 0 || x >= 1 {
			t.Fatalf("Float64 = %v, outside [0, 1)", x)
		}
		sum += x
	}
	// Mean of n uniforms: 0.5 ± 5 standard errors (σ² = 1/12).
	if mean, se := sum/n, math.Sqrt(1.0/12/n); math.Abs(mean-0.5) > 5*se {
		t.Errorf("mean of %d draws = %v, want 0.5 ± %v", n, mean, 5*se)
	}
}

// TestExpFloat64 compares the empirical distribution of 10⁶ draws with
// 1 − e^−x at points on both sides of the ziggurat's base (r ≈ 7.7) and
// checks the mean and variance.
func TestExpFloat64(t *testing.T) {
	const n = 1_000_000
	r := Stream(3, 4)
	points := []float64{0.01, 0.1, 0.5, 1, 2, 4, 7, 7.69, 8, 10, 12}
	below := make([]int, len(points))
	sum, sumSq := 0.0, 0.0
	for range n {
		x := r.ExpFloat64()
		if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			t.Fatalf("ExpFloat64 = %v", x)
		}
		sum += x
		sumSq += x * x
		for i, p := range points {
			if x < p {
				below[i]++
			}
		}
	}
	for i, p := range points {
		want := 1 - math.Exp(-p)
		got := float64(below[i]) / n
		tol := 5 * math.Sqrt(want*(1-want)/n) // 5 binomial standard errors
		if math.Abs(got-want) > tol+1e-9 {
			t.Errorf("P(X < %v) = %.6f, want %.6f ± %.6f", p, got, want, tol)
		}
	}
	mean := sum / n
	variance := sumSq/n - mean*mean
	if math.Abs(mean-1) > 5/math.Sqrt(n) {
		t.Errorf("mean = %v, want 1", mean)
	}
	if math.Abs(variance-1) > 5*math.Sqrt(8.0/n) { // standard error √((μ₄−σ⁴)/n), μ₄ = 9
		t.Errorf("variance = %v, want 1", variance)
	}
}

func TestUint64N(t *testing.T) {
	r := Stream(8, 8)
	tests := []uint64{1, 2, 3, 10, 1000, 1<<63 + 1, math.MaxUint64}
	for _, n := range tests {
		for range 1000 {
			if v := r.Uint64N(n); v >= n {
				t.Fatalf("Uint64N(%d) = %d", n, v)
			}
		}
	}
	// Chi-square over 10 buckets, 9 degrees of freedom: 27.9 is the 0.999
	// quantile.
	var counts [10]int
	const draws = 100_000
	for range draws {
		counts[r.IntN(10)]++
	}
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - draws/10
		chi += d * d / (draws / 10)
	}
	if chi > 27.9 {
		t.Errorf("IntN(10) counts %v: chi-square %.1f > 27.9", counts, chi)
	}
}

func TestRandPanics(t *testing.T) {
	for name, f := range map[string]func(r *Rand){
		"Uint64N(0)": func(r *Rand) { r.Uint64N(0) },
		"IntN(0)":    func(r *Rand) { r.IntN(0) },
		"IntN(-1)":   func(r *Rand) { r.IntN(-1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			r := Stream(0, 0)
			f(&r)
		})
	}
}

func TestRandNoAllocs(t *testing.T) {
	var sink float64
	n := testing.AllocsPerRun(100, func() {
		r := Stream(1, 2)
		sink += r.Float64() + r.ExpFloat64() + float64(r.Uint64()) + float64(r.IntN(7))
	})
	if n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
	_ = sink
}
