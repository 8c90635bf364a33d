package sim

import (
	"fmt"
	"math"
	"time"
)

// judge decides a run's verdict from its time series, by this rule:
//
//  1. Demand D and goodput G are summed over all clients, per bin. A bin
//     is healthy when, over a window of k bins ending with it, ΣG ≥ h × ΣD
//     (h = verdict.healthy, default 0.9; k = the longest client timeout in
//     bins, plus one, at least 2 and at most a tenth of the run). A window
//     with no demand is healthy.
//  2. Bins that start before the warm-up (verdict.warmup, default the
//     longest client timeout) are not judged.
//  3. The settling stretch is S = max(3 bins, 10 % of the time after the
//     last trigger ended).
//  4. stable: every judged bin is healthy. recovery_s = 0.
//  5. metastable: more than a third of the last S of the run is unhealthy:
//     the system had not come back by the end, although the trigger was
//     long gone. recovery_s = null.
//  6. recovered: otherwise. The system recovered at the start of the first
//     S consecutive healthy bins at or after the end of the last trigger
//     (or, if there is no such stretch, after the last unhealthy bin);
//     recovery_s = that time minus the end of the last trigger. An isolated
//     unhealthy bin later on does not move it.
func judge(r *Result, sc Scenario) {
	n := int(math.Round(r.DurationS / r.BinS))
	if n == 0 {
		r.Verdict, r.RecoveryS, r.Why = "stable", ptr(0), "nothing was simulated"
		return
	}
	var maxTimeout time.Duration
	for _, c := range sc.Clients {
		maxTimeout = max(maxTimeout, c.Timeout)
	}
	k := max(2, min(int(math.Ceil(maxTimeout.Seconds()/r.BinS))+1, n/10))
	// Prefix sums: cd[b] = Σ demand of bins < b, cg the same for goodput.
	cd := make([]float64, n+1)
	cg := make([]float64, n+1)
	for b := range n {
		var db, gb float64
		for _, c := range r.Clients {
			if b < len(c.Bins) {
				db += c.Bins[b].Demand
				gb += c.Bins[b].Goodput
			}
		}
		cd[b+1], cg[b+1] = cd[b]+db, cg[b]+gb
	}
	first := min(n, int(math.Ceil(sc.Verdict.Warmup.Seconds()/r.BinS)))
	healthy := make([]bool, n)
	anyBad := false
	for b := range n {
		lo := max(0, b-k+1)
		sd, sg := cd[b+1]-cd[lo], cg[b+1]-cg[lo]
		healthy[b] = b < first || sd == 0 || sg >= sc.Verdict.Healthy*sd
		anyBad = anyBad || !healthy[b]
	}
	pct := 100 * sc.Verdict.Healthy
	if !anyBad {
		r.Verdict, r.RecoveryS = "stable", ptr(0)
		r.Why = fmt.Sprintf("goodput stayed ≥ %.0f%% of demand throughout", pct)
		return
	}
	var trigEnd float64
	for _, t := range r.TriggerS {
		trigEnd = math.Max(trigEnd, t[1])
	}
	settle := max(3, int(math.Ceil(0.1*(r.DurationS-trigEnd)/r.BinS)))
	settle = min(settle, n)
	bad := 0
	for b := n - settle; b < n; b++ {
		if !healthy[b] {
			bad++
		}
	}
	if 3*bad > settle {
		r.Verdict, r.RecoveryS = "metastable", nil
		r.Why = fmt.Sprintf("goodput was still below %.0f%% of demand at the end, %.0f s after the trigger ended", pct, r.DurationS-trigEnd)
		if len(r.TriggerS) == 0 {
			r.Why = fmt.Sprintf("goodput was still below %.0f%% of demand at the end of the run", pct)
		}
		return
	}
	from := int(math.Floor(trigEnd / r.BinS))
	rec := -1
	for b, run := from, 0; b < n; b++ {
		if healthy[b] {
			run++
			if run == settle {
				rec = b - settle + 1
				break
			}
		} else {
			run = 0
		}
	}
	if rec < 0 { // no stretch of S: after the last unhealthy bin
		for b := n - 1; b >= 0; b-- {
			if !healthy[b] {
				rec = b + 1
				break
			}
		}
	}
	recS := math.Max(0, float64(rec)*r.BinS-trigEnd)
	r.Verdict, r.RecoveryS = "recovered", ptr(recS)
	r.Why = fmt.Sprintf("goodput was back above %.0f%% of demand %.1f s after the trigger ended", pct, recS)
}

func ptr(f float64) *float64 { return &f }
