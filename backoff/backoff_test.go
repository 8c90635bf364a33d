package backoff

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const (
	ms = time.Millisecond
	s  = time.Second
)

func TestDelayFormulas(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		n    int
		prev time.Duration
		u    float64
		want time.Duration
	}{
		{"none", Policy{Kind: None, Base: s}, 3, 0, 0.9, 0},
		{"constant", Policy{Kind: Constant, Base: 100 * ms}, 7, 0, 0.9, 100 * ms},
		{"constant capped", Policy{Kind: Constant, Base: 2 * s, Cap: s}, 1, 0, 0.5, s},
		{"exponential n=1", Policy{Kind: Exponential, Base: s}, 1, 0, 0.3, s},
		{"exponential n=2", Policy{Kind: Exponential, Base: s}, 2, 0, 0.3, 2 * s},
		{"exponential n=4", Policy{Kind: Exponential, Base: s}, 4, 0, 0.3, 8 * s},
		{"exponential capped", Policy{Kind: Exponential, Base: s, Cap: 5 * s}, 4, 0, 0.3, 5 * s},
		{"exponential huge n", Policy{Kind: Exponential, Base: s}, 10_000, 0, 0.3, DefaultCap},
		{"exponential multiplier 3", Policy{Kind: Exponential, Base: s, Multiplier: 3}, 3, 0, 0, 9 * s},
		{"exponential n<1 as 1", Policy{Kind: Exponential, Base: s}, 0, 0, 0, s},
		{"full jitter u=0", Policy{Kind: FullJitter, Base: 50 * ms}, 3, 0, 0, 0},
		{"full jitter u=0.5", Policy{Kind: FullJitter, Base: 50 * ms}, 3, 0, 0.5, 100 * ms},
		{"full jitter capped window", Policy{Kind: FullJitter, Base: 50 * ms, Cap: 20 * s}, 30, 0, 0.5, 10 * s},
		{"equal jitter u=0", Policy{Kind: EqualJitter, Base: 100 * ms}, 2, 0, 0, 100 * ms},
		{"equal jitter u=0.5", Policy{Kind: EqualJitter, Base: 100 * ms}, 2, 0, 0.5, 150 * ms},
		{"decorrelated first", Policy{Kind: DecorrelatedJitter, Base: s}, 1, 0, 0.5, 2 * s},             // U(1, 3) at 0.5
		{"decorrelated from prev", Policy{Kind: DecorrelatedJitter, Base: s}, 2, 4 * s, 0.5, 6500 * ms}, // U(1, 12) at 0.5
		{"decorrelated capped", Policy{Kind: DecorrelatedJitter, Base: s, Cap: 5 * s}, 2, 4 * s, 0.9, 5 * s},
		{"proportional low", Policy{Kind: Proportional, Base: 100 * ms, Jitter: 0.2}, 2, 0, 0, 160 * ms},
		{"proportional high edge", Policy{Kind: Proportional, Base: 100 * ms, Jitter: 0.2}, 2, 0, 0.75, 220 * ms},
		{"proportional capped", Policy{Kind: Proportional, Base: 100 * ms, Cap: 200 * ms, Jitter: 0.2}, 2, 0, 0.99, 200 * ms},
		{"u NaN clamps to 0", Policy{Kind: FullJitter, Base: s}, 1, 0, math.NaN(), 0},
		{"u > 1 clamps below 1", Policy{Kind: FullJitter, Base: s}, 1, 0, 7, s - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.Delay(tt.n, tt.prev, tt.u)
			if d := got - tt.want; d < -1 || d > 1 { // float rounding: 1 ns
				t.Errorf("Delay(%d, %v, %v) = %v, want %v", tt.n, tt.prev, tt.u, got, tt.want)
			}
		})
	}
}

// TestDistributions checks each jittered strategy against its analytic mean
// and bounds with a seeded source, 200 000 samples each (the standard error
// of a uniform mean is window/√(12·n) ≈ 0.06 % of the window; the tolerance
// is 1 %).
func TestDistributions(t *testing.T) {
	const n = 200_000
	tests := []struct {
		name       string
		p          Policy
		retry      int
		prev       time.Duration
		lo, hi     time.Duration
		wantMean   time.Duration
		checkSpike bool
	}{
		{"full jitter: mean is half the window", Policy{Kind: FullJitter, Base: 50 * ms}, 4, 0, 0, 400 * ms, 200 * ms, false},
		{"equal jitter: mean 3/4 of the window", Policy{Kind: EqualJitter, Base: 50 * ms}, 4, 0, 200 * ms, 400 * ms, 300 * ms, false},
		{"decorrelated: U(base, 3 prev)", Policy{Kind: DecorrelatedJitter, Base: 100 * ms}, 3, 500 * ms, 100 * ms, 1500 * ms, 800 * ms, false},
		{"proportional: ±20 % around the window", Policy{Kind: Proportional, Base: 100 * ms, Jitter: 0.2}, 3, 0, 320 * ms, 480 * ms, 400 * ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var sum float64
			for range n {
				d := tt.p.Delay(tt.retry, tt.prev, rng.Float64())
				if d < tt.lo || d > tt.hi {
					t.Fatalf("delay %v outside [%v, %v]", d, tt.lo, tt.hi)
				}
				sum += float64(d)
			}
			mean := time.Duration(sum / n)
			if rel := math.Abs(float64(mean-tt.wantMean)) / float64(tt.wantMean); rel > 0.01 {
				t.Errorf("mean %v, want %v ± 1 %%", mean, tt.wantMean)
			}
		})
	}
}

// TestFullJitterFlat checks that full jitter spreads retries evenly over the
// window (Paper 08 Sim C's point): ten equal bins each get 10 % ± 0.5 %.
func TestFullJitterFlat(t *testing.T) {
	p := Policy{Kind: FullJitter, Base: s}
	rng := rand.New(rand.NewPCG(3, 4))
	var bins [10]int
	const n = 100_000
	for range n {
		d := p.Delay(1, 0, rng.Float64())
		bins[int(d*10/s)]++
	}
	for i, c := range bins {
		if f := float64(c) / n; math.Abs(f-0.1) > 0.005 {
			t.Errorf("bin %d holds %.3f of samples, want 0.100 ± 0.005", i, f)
		}
	}
}

func TestKindText(t *testing.T) {
	for k := None; k <= Proportional; k++ {
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Kind
		if err := got.UnmarshalText(b); err != nil || got != k {
			t.Errorf("round trip of %v: got %v, %v", k, got, err)
		}
	}
	if _, err := ParseKind("fibonacci"); err == nil {
		t.Error("ParseKind(fibonacci): no error")
	}
	var p Policy
	if err := json.Unmarshal([]byte(`{"kind":"full-jitter","base":50000000}`), &p); err != nil || p.Kind != FullJitter || p.Base != 50*ms {
		t.Errorf("json: %+v, %v", p, err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		p    Policy
		want bool
	}{
		{Policy{}, true},
		{Policy{Kind: FullJitter, Base: ms, Cap: s, Multiplier: 1.5}, true},
		{Policy{Kind: Kind(99)}, false},
		{Policy{Base: -1}, false},
		{Policy{Cap: -1}, false},
		{Policy{Multiplier: 0.5}, false},
		{Policy{Multiplier: math.Inf(1)}, false},
		{Policy{Jitter: 1.5}, false},
	}
	for _, tt := range tests {
		if got := tt.p.Validate() == nil; got != tt.want {
			t.Errorf("Validate(%+v) ok = %v, want %v", tt.p, got, tt.want)
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	p := Policy{Kind: FullJitter, Base: 50 * ms, Cap: 20 * s}
	var sink time.Duration
	for i := 0; b.Loop(); i++ {
		sink += p.Delay(i&7+1, 0, 0.5)
	}
	_ = sink
}

func ExamplePolicy_Delay() {
	p := Policy{Kind: Exponential, Base: time.Second}
	fmt.Println(p.Delay(1, 0, 0), p.Delay(2, 0, 0), p.Delay(3, 0, 0), p.Delay(4, 0, 0))
	// Full jitter: the sample u scales the window.
	fj := Policy{Kind: FullJitter, Base: 50 * time.Millisecond, Cap: 20 * time.Second}
	fmt.Println(fj.Delay(3, 0, 0.5))
	// Output:
	// 1s 2s 4s 8s
	// 100ms
}

// TestRandom holds Random to Delay: a kind that does not read u gives the
// same delay for every u, one that does gives different delays for some.
func TestRandom(t *testing.T) {
	tests := []struct {
		p    Policy
		want bool
	}{
		{Policy{Kind: None}, false},
		{Policy{Kind: Constant, Base: 100 * ms}, false},
		{Policy{Kind: Exponential, Base: 100 * ms, Cap: 10 * s}, false},
		{Policy{Kind: FullJitter, Base: 100 * ms, Cap: 10 * s}, true},
		{Policy{Kind: EqualJitter, Base: 100 * ms, Cap: 10 * s}, true},
		{Policy{Kind: DecorrelatedJitter, Base: 100 * ms, Cap: 10 * s}, true},
		{Policy{Kind: Proportional, Base: 100 * ms, Cap: 10 * s, Jitter: 0.2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.p.Kind.String(), func(t *testing.T) {
			if got := tt.p.Random(); got != tt.want {
				t.Fatalf("Random() = %v, want %v", got, tt.want)
			}
			varies := false
			for n := 1; n <= 5; n++ {
				lo, hi := tt.p.Delay(n, 300*ms, 0.1), tt.p.Delay(n, 300*ms, 0.9)
				varies = varies || lo != hi
			}
			if varies != tt.want {
				t.Errorf("Delay varies with u: %v; Random() says %v", varies, tt.want)
			}
		})
	}
}
