package sweep

import (
	"slices"

	"github.com/stormguard/stormguard/sim/result"
)

// Bisect returns the smallest k in [0, n] for which tips(k) is true,
// assuming tips is monotone: false up to a threshold, true from it on. It
// asks tips(n) first (ok is false, and k is n + 1, when even n does not
// tip), then tips(0), then halves the interval: about 2 + log₂ n calls,
// always the same ones for the same answers. The first error stops it.
//
// When tips is not monotone (a noisy system), Bisect still returns a k at
// which it changes from false (at k − 1, or k = 0) to true.
func Bisect(n int, tips func(k int) (bool, error)) (k int, ok bool, err error) {
	top, err := tips(n)
	if err != nil || !top {
		return n + 1, false, err
	}
	if n == 0 {
		return 0, true, nil
	}
	bottom, err := tips(0)
	if err != nil || bottom {
		return 0, bottom, err
	}
	k, err = between(0, n, tips)
	return k, err == nil, err
}

// between bisects (lo, hi] given tips(lo) false and tips(hi) true.
func between(lo, hi int, tips func(k int) (bool, error)) (int, error) {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		t, err := tips(mid)
		if err != nil {
			return hi, err
		}
		if t {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// searchColumn finds, at one load, the smallest grid step k (of sizes 0 …
// n) that leaves the system metastable, then the smallest that disturbs
// it (a verdict other than stable), reusing every run of the first search
// for the second. probe runs the system with the trigger of step k. The
// calls, and so the result, depend only on the answers.
func searchColumn(n int, size func(k int) float64, probe func(k int) (Probe, error)) (Column, error) {
	memo := map[int]Probe{}
	get := func(k int) (Probe, error) {
		if p, ok := memo[k]; ok {
			return p, nil
		}
		p, err := probe(k)
		if err != nil {
			return p, err
		}
		memo[k] = p
		return p, nil
	}
	verdictIs := func(pred func(string) bool) func(int) (bool, error) {
		return func(k int) (bool, error) {
			p, err := get(k)
			return pred(p.Verdict), err
		}
	}
	// Stuck: metastable, or degraded when the load alone keeps it down
	// (no trigger needed).
	metastable := verdictIs(result.Down)
	disturbed := verdictIs(func(v string) bool { return v != "stable" })

	var col Column
	kt, ok, err := Bisect(n, metastable)
	if err != nil {
		return col, err
	}
	if ok {
		s := size(kt)
		col.Tips = &s
	}

	// The smallest disturbed step known, and the largest below it: the
	// second search starts from that bracket.
	hi := -1
	for k, p := range memo {
		if p.Verdict != "stable" && (hi < 0 || k < hi) {
			hi = k
		}
	}
	if hi < 0 {
		// Only n was tried, and it stayed stable: nothing disturbs it.
		col.Probes = sorted(memo)
		return col, nil
	}
	kd := hi
	if hi > 0 {
		lo := -1
		for k := range memo {
			if k < hi && k > lo {
				lo = k
			}
		}
		if lo < 0 {
			d, err := disturbed(0)
			if err != nil {
				return col, err
			}
			if d {
				kd, lo = 0, -1
			} else {
				lo = 0
			}
		}
		if lo >= 0 {
			if kd, err = between(lo, hi, disturbed); err != nil {
				return col, err
			}
		}
	}
	s := size(kd)
	col.Disturbs = &s
	col.Probes = sorted(memo)
	return col, nil
}

// sorted returns the probes by size.
func sorted(memo map[int]Probe) []Probe {
	ks := make([]int, 0, len(memo))
	for k := range memo {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	out := make([]Probe, len(ks))
	for i, k := range ks {
		out[i] = memo[k]
	}
	return out
}
