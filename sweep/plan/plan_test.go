package plan

import (
	"math"
	"strings"
	"testing"
)

func TestMedianWorst(t *testing.T) {
	never := (*float64)(nil)
	for _, c := range []struct {
		xs            []*float64
		median, worst *float64
	}{
		{[]*float64{ptr(3), ptr(1), ptr(2)}, ptr(2), ptr(3)},
		{[]*float64{ptr(4), ptr(1), ptr(2), ptr(3)}, ptr(2.5), ptr(4)},
		{[]*float64{ptr(1), never, ptr(2)}, ptr(2), never},
		{[]*float64{ptr(1), never, never}, never, never},
		{[]*float64{ptr(1), never}, never, never},
		{nil, never, never},
	} {
		m, w := medianWorst(c.xs)
		if !eqPtr(m, c.median) || !eqPtr(w, c.worst) {
			t.Errorf("medianWorst(%v) = %v, %v; want %v, %v", c.xs, show(m), show(w), show(c.median), show(c.worst))
		}
	}
}

// TestCompareOrder: the ranking's rule, on made-up outcomes.
func TestCompareOrder(t *testing.T) {
	run := func(verdict string, ttr *float64, relapsed bool) SeedRun {
		return SeedRun{Verdict: verdict, ToRecoverS: ttr, Relapsed: relapsed}
	}
	names := []string{"never", "slow", "fast-relapse", "fast", "one-stuck", "stable"}
	outcomes := [][]SeedRun{
		{run("metastable", nil, false), run("metastable", nil, false)},
		{run("recovered", ptr(90), false), run("recovered", ptr(100), false)},
		{run("recovered", ptr(10), true), run("recovered", ptr(20), false)},
		{run("recovered", ptr(10), false), run("recovered", ptr(20), false)},
		{run("recovered", ptr(1), false), run("metastable", nil, false)},
		{run("stable", ptr(0), false), run("stable", ptr(0), false)},
	}
	c := compare(names, outcomes, 2)
	var got []string
	for _, r := range c.Rows {
		got = append(got, r.Run)
	}
	if want := "stable fast fast-relapse slow one-stuck never"; strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q", got, want)
	}
}

func TestParseShard(t *testing.T) {
	if s, err := ParseShard("2/4"); err != nil || s != (Shard{2, 4}) || s.String() != "2/4" {
		t.Errorf("2/4: %v %v", s, err)
	}
	for _, bad := range []string{"0/3", "4/3", "1/0", "a/b", "3", "-1/2", ""} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("%q: no error", bad)
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

// TestMergeRejectsBadShards: a part's shard is checked before anything
// is sized by it.
func TestMergeRejectsBadShards(t *testing.T) {
	for _, sh := range []Shard{{1, -1}, {0, 0}, {1, 1 << 62}, {3, 2}} {
		if _, err := Merge(Partial{Format: PartialFormat, Shard: sh}); err == nil || !strings.Contains(err.Error(), "want 1 ≤ I ≤ N") {
			t.Errorf("shard %v: %v", sh, err)
		}
	}
}
