package sweep

import (
	"errors"
	"math"
	"testing"
)

// TestBisectFindsThreshold: on a monotone oracle that tips from t on,
// Bisect finds t exactly, in at most 2 + ⌈log₂ n⌉ calls.
func TestBisectFindsThreshold(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 64, 400, 1000} {
		for thr := 0; thr <= n+1; thr++ {
			calls := 0
			k, ok, err := Bisect(n, func(k int) (bool, error) {
				calls++
				if k < 0 || k > n {
					t.Fatalf("n=%d: tips(%d) asked outside [0, n]", n, k)
				}
				return k >= thr, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case thr > n && (ok || k != n+1):
				t.Errorf("n=%d, threshold %d (none): got k=%d ok=%v, want ok=false", n, thr, k, ok)
			case thr <= n && (!ok || k != thr):
				t.Errorf("n=%d: got k=%d ok=%v, want %d", n, k, ok, thr)
			}
			if limit := 2 + int(math.Ceil(math.Log2(float64(max(n, 1))))); calls > limit {
				t.Errorf("n=%d, threshold %d: %d calls, want ≤ %d", n, thr, calls, limit)
			}
		}
	}
}

func TestBisectStopsAtError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, _, err := Bisect(100, func(k int) (bool, error) {
		calls++
		if calls == 3 {
			return false, boom
		}
		return k >= 50, nil
	})
	if !errors.Is(err, boom) || calls != 3 {
		t.Errorf("err %v after %d calls, want boom after 3", err, calls)
	}
}

// oracle3 is a synthetic system: stable below a, recovered from a, and
// metastable from b (grid steps).
func oracle3(a, b int, calls *int) func(k int) (Probe, error) {
	return func(k int) (Probe, error) {
		*calls++
		v := "stable"
		switch {
		case k >= b:
			v = "metastable"
		case k >= a:
			v = "recovered"
		}
		return Probe{Size: float64(k) / 10, Verdict: v}, nil
	}
}

// TestSearchColumn finds both thresholds of a synthetic three-state
// system, reusing the runs of the first search for the second.
func TestSearchColumn(t *testing.T) {
	const n = 400
	size := func(k int) float64 { return float64(k) / 10 }
	for _, c := range []struct {
		name          string
		a, b          int
		disturbs, tip *float64
	}{
		{"both inside", 7, 16, ptr(0.7), ptr(1.6)},
		{"same step", 12, 12, ptr(1.2), ptr(1.2)},
		{"never metastable", 3, n + 1, ptr(0.3), nil},
		{"never disturbed", n + 1, n + 1, nil, nil},
		{"disturbed by nothing at all", 0, n + 1, ptr(0), nil},
		{"overloaded", 0, 0, ptr(0), ptr(0)},
		{"only the largest tips", 399, 400, ptr(39.9), ptr(40)},
	} {
		calls := 0
		col, err := searchColumn(n, size, oracle3(c.a, c.b, &calls))
		if err != nil {
			t.Fatal(err)
		}
		if !eqPtr(col.Disturbs, c.disturbs) || !eqPtr(col.Tips, c.tip) {
			t.Errorf("%s: disturbs %v tips %v, want %v %v", c.name, show(col.Disturbs), show(col.Tips), show(c.disturbs), show(c.tip))
		}
		if limit := 2 * (2 + int(math.Ceil(math.Log2(n)))); calls > limit {
			t.Errorf("%s: %d runs, want ≤ %d", c.name, calls, limit)
		}
		if calls != len(col.Probes) {
			t.Errorf("%s: %d runs but %d probes: a size was run twice", c.name, calls, len(col.Probes))
		}
		for i := 1; i < len(col.Probes); i++ {
			if col.Probes[i].Size <= col.Probes[i-1].Size {
				t.Errorf("%s: probes not sorted by size: %v", c.name, col.Probes)
			}
		}
		if c.name == "overloaded" && !col.Overloaded() {
			t.Errorf("overloaded: Overloaded() is false")
		}
	}
}

func ptr(v float64) *float64 { return &v }

func eqPtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return math.Abs(*a-*b) < 1e-9
}

func show(p *float64) any {
	if p == nil {
		return "none"
	}
	return *p
}
