package limit

import (
	"sync"
	"testing"
	"time"

	"stormguard/killswitch"
)

var t0 = time.Unix(1_700_000_000, 0)

// spy is an Algorithm that records its samples.
type spy struct {
	limit   int
	samples []Sample
}

func (s *spy) Update(x Sample) int { s.samples = append(s.samples, x); return s.limit }
func (s *spy) Limit() int          { return s.limit }

func TestLimiterRefusesAtLimit(t *testing.T) {
	l := NewLimiter(Fixed{N: 3})
	var permits []Permit
	for i := range 3 {
		p, ok := l.AcquireAt(t0)
		if !ok {
			t.Fatalf("acquire %d refused below the limit", i+1)
		}
		permits = append(permits, p)
	}
	if _, ok := l.AcquireAt(t0); ok {
		t.Fatal("acquire 4 admitted at the limit")
	}
	if got := l.InFlight(); got != 3 {
		t.Fatalf("InFlight = %d, want 3 (a refusal must not count)", got)
	}
	permits[0].SuccessAt(t0.Add(ms))
	if _, ok := l.AcquireAt(t0); !ok {
		t.Fatal("acquire refused after a release")
	}
}

// TestLimiterOutcomes checks what each release method feeds the algorithm.
func TestLimiterOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		release func(p Permit, now time.Time)
		want    []Sample
	}{
		{"success", Permit.SuccessAt, []Sample{{Now: t0.Add(7 * ms), RTT: 7 * ms, InFlight: 2}}},
		{"dropped", Permit.DroppedAt, []Sample{{Now: t0.Add(7 * ms), RTT: 7 * ms, InFlight: 2, Dropped: true}}},
		{"ignore", Permit.IgnoreAt, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alg := &spy{limit: 5}
			l := NewLimiter(alg)
			first, _ := l.AcquireAt(t0.Add(-ms))
			p, ok := l.AcquireAt(t0)
			if !ok {
				t.Fatal("refused")
			}
			if p.Start() != t0 {
				t.Errorf("Start = %v, want %v", p.Start(), t0)
			}
			tc.release(p, t0.Add(7*ms))
			if len(alg.samples) != len(tc.want) || len(tc.want) == 1 && alg.samples[0] != tc.want[0] {
				t.Errorf("samples = %+v, want %+v", alg.samples, tc.want)
			}
			if got := l.InFlight(); got != 1 {
				t.Errorf("InFlight = %d, want 1", got)
			}
			first.IgnoreAt(t0)
		})
	}
}

func TestLimiterIgnoreKeepsAlgorithm(t *testing.T) {
	alg, err := NewVegas(VegasConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(alg)
	p, _ := l.AcquireAt(t0)
	p.SuccessAt(t0.Add(10 * ms))
	before := *alg
	for range 100 {
		p, _ := l.AcquireAt(t0)
		p.IgnoreAt(t0.Add(time.Hour)) // a caller that gave up: must not move the baseline
	}
	if *alg != before {
		t.Errorf("algorithm changed by IgnoreAt: %+v, want %+v", *alg, before)
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight = %d, want 0", l.InFlight())
	}
}

func TestLimiterDroppedLowersAIMD(t *testing.T) {
	alg, err := NewAIMD(AIMDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(alg)
	tests := []struct {
		release func(p Permit, now time.Time)
		want    int
	}{
		{Permit.DroppedAt, 18},
		{Permit.DroppedAt, 16},
		{Permit.IgnoreAt, 16},
		{Permit.SuccessAt, 16}, // one in flight out of 16: application-limited
	}
	for i, tc := range tests {
		p, _ := l.AcquireAt(t0)
		tc.release(p, t0.Add(ms))
		if got := l.Limit(); got != tc.want {
			t.Fatalf("step %d: Limit = %d, want %d", i, got, tc.want)
		}
	}
}

func TestLimiterOverride(t *testing.T) {
	var d killswitch.Dials
	alg, err := NewAIMD(AIMDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(alg, WithDials(&d))
	tests := []struct {
		override  int // 0: none
		admit     int // want this many admitted out of 100
		limit     int
		algorithm int
	}{
		{0, 20, 20, 20},
		{2, 2, 2, 20},
		{50, 50, 50, 20},
		{0, 20, 20, 20},
	}
	for _, tc := range tests {
		if err := d.SetLimitOverride(tc.override); err != nil {
			t.Fatal(err)
		}
		var permits []Permit
		for range 100 {
			if p, ok := l.AcquireAt(t0); ok {
				permits = append(permits, p)
			}
		}
		if len(permits) != tc.admit || l.Limit() != tc.limit || l.AlgorithmLimit() != tc.algorithm {
			t.Errorf("override %d: admitted %d, Limit %d, AlgorithmLimit %d; want %d, %d, %d",
				tc.override, len(permits), l.Limit(), l.AlgorithmLimit(), tc.admit, tc.limit, tc.algorithm)
		}
		for _, p := range permits {
			p.IgnoreAt(t0)
		}
	}
}

func TestPermitZero(t *testing.T) {
	l := NewLimiter(Fixed{N: 1})
	held, _ := l.AcquireAt(t0)
	refused, ok := l.AcquireAt(t0)
	if ok || refused != (Permit{}) {
		t.Fatalf("refused acquire = %+v, %v; want the zero Permit, false", refused, ok)
	}
	refused.SuccessAt(t0)
	refused.DroppedAt(t0)
	refused.IgnoreAt(t0)
	refused.Success()
	if got := l.InFlight(); got != 1 {
		t.Fatalf("InFlight = %d after releasing the zero Permit, want 1", got)
	}
	held.IgnoreAt(t0)
}

func TestLimiterWallClock(t *testing.T) {
	alg := &spy{limit: 10}
	l := NewLimiter(alg)
	for _, release := range []func(Permit){Permit.Success, Permit.Dropped, Permit.Ignore} {
		p, ok := l.Acquire()
		if !ok {
			t.Fatal("refused")
		}
		release(p)
	}
	if len(alg.samples) != 2 || alg.samples[0].RTT < 0 || alg.samples[0].Dropped || !alg.samples[1].Dropped {
		t.Errorf("samples = %+v, want a success then a drop with RTT ≥ 0", alg.samples)
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight = %d, want 0", l.InFlight())
	}
}

func TestNewLimiterNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewLimiter(nil) did not panic")
		}
	}()
	NewLimiter(nil)
}

// TestLimiterConcurrent hammers one limiter from many goroutines: the
// in-flight count must never go negative, never exceed a fixed limit, and
// come back to 0; with an adaptive algorithm, every outcome mixed.
func TestLimiterConcurrent(t *testing.T) {
	specs := map[string]Spec{
		"fixed":     {Kind: KindFixed, Limit: 4},
		"aimd":      {Kind: KindAIMD},
		"vegas":     {Kind: KindVegas},
		"gradient2": {Kind: KindGradient2},
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			alg, err := spec.New()
			if err != nil {
				t.Fatal(err)
			}
			var d killswitch.Dials
			l := NewLimiter(alg, WithDials(&d))
			const goroutines, rounds = 8, 2000
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range rounds {
						now := t0.Add(time.Duration(i) * ms)
						p, ok := l.AcquireAt(now)
						n := l.InFlight()
						if n < 0 || name == "fixed" && n > 4 {
							t.Errorf("InFlight = %d", n)
							return
						}
						if !ok {
							continue
						}
						end := now.Add(time.Duration(1+(g+i)%20) * ms)
						switch (g + i) % 5 {
						case 0:
							p.DroppedAt(end)
						case 1:
							p.IgnoreAt(end)
						default:
							p.SuccessAt(end)
						}
						if g == 0 && i%500 == 0 {
							_ = d.SetLimitOverride((i / 500) % 2 * 3)
						}
					}
				})
			}
			wg.Wait()
			if n := l.InFlight(); n != 0 {
				t.Errorf("InFlight = %d after all releases, want 0", n)
			}
			if lim := l.AlgorithmLimit(); lim < 1 {
				t.Errorf("AlgorithmLimit = %d, want ≥ 1", lim)
			}
		})
	}
}
