package sim

import (
	"fmt"
	"math"
)

// Constants of the verdict's rule (see judge).
const (
	// verdictZ is the one-sided z-score of the test that calls a window
	// unhealthy: its success share must be below verdict.healthy with
	// about 99.9 % confidence, so Poisson noise alone almost never fails a
	// window (see TestVerdictCorpus).
	verdictZ = 3.0
	// verdictMinWindow is how many requests a window should hold: the
	// window is widened at low rates until the expected count reaches it.
	verdictMinWindow = 20
	// verdictPendingTail: arrival bins at the end of the run with more than
	// this share of their requests still in flight are not judged (their
	// fate is unknown).
	verdictPendingTail = 0.1
)

// judge decides a run's verdict from its time series, by this rule:
//
//  1. Requests are judged by the bin they arrived in: for each bin, the
//     requests of all clients that arrived in it and later succeeded (OK)
//     and failed (F), from ClientBin.ArrivedOK and ArrivedFailed. A
//     request still in flight at the end counts as neither.
//  2. A bin is healthy unless the window of k bins ending with it shows,
//     with confidence, a success share below h (verdict.healthy, default
//     0.9): the upper end of the Wilson score interval of ΣOK / Σ(OK+F) at
//     z = 3 is below h. A window where nothing ended is healthy. k is the
//     smallest number of bins that holds 20 requests at the run's mean
//     demand, at least 1 and at most a tenth of the run. Deciding on counts
//     with a test, instead of comparing goodput with demand per bin, keeps
//     Poisson noise and the lag between arrival and answer from failing a
//     healthy run at low rates.
//  3. Bins that start before the warm-up (verdict.warmup, default the
//     longest client timeout) are not judged, nor the bins at the end whose
//     requests are more than 10 % still in flight.
//  4. The settling stretch is S = max(3 bins, 10 % of the time after the
//     last trigger ended, or of the run without triggers).
//  5. stable: every judged bin is healthy. recovery_s = 0.
//  6. The unhealthy bins form episodes: unhealthy bins less than S bins
//     apart belong to one. The collapse the verdict reports is the last
//     episode of two or more unhealthy bins (or, if there is none, the
//     first episode): a lone unhealthy bin after it does not move it.
//  7. metastable: more than a third of the last S judged bins are
//     unhealthy: the system had not come back by the end. recovery_s = null.
//  8. recovered: otherwise. It recovered at the start of the first S
//     consecutive healthy bins after the collapse began (or, without such a
//     stretch, after its last unhealthy bin). recovery_s is that time minus
//     the end of the last trigger when the collapse began before that end
//     or within a bin of it, and minus the collapse's start when it began
//     later (a collapse under a load episode, with no trigger active) or
//     came back while the trigger was still active (a runbook's doing).
func judge(r *Result, sc Scenario) {
	r.CollapseS, r.RecoveredS = nil, nil
	n := int(math.Round(r.DurationS / r.BinS))
	if n == 0 {
		r.Verdict, r.RecoveryS, r.Why = "stable", ptr(0), "nothing was simulated"
		return
	}
	ok, ended, demand := arrivalCounts(r, n)
	pct := 100 * sc.Verdict.Healthy

	// The judged bins: after the warm-up, before the unresolved tail.
	first := min(n, int(math.Ceil(sc.Verdict.Warmup.Seconds()/r.BinS)))
	last := n - 1
	for last >= first && demand[last] > 0 && demand[last]-ended[last] > verdictPendingTail*demand[last] {
		last--
	}
	if last < first {
		r.Verdict, r.RecoveryS = "stable", ptr(0)
		r.Why = "no request had ended after the warm-up: nothing to judge"
		return
	}
	totalDemand := 0.0
	for _, d := range demand {
		totalDemand += d
	}
	k := 1
	if perBin := totalDemand / float64(n); perBin > 0 {
		k = int(math.Ceil(verdictMinWindow / perBin))
	}
	k = max(1, min(k, n/10))

	// Prefix sums over arrival bins.
	cOK := make([]float64, n+1)
	cEnd := make([]float64, n+1)
	for b := range n {
		cOK[b+1], cEnd[b+1] = cOK[b]+ok[b], cEnd[b]+ended[b]
	}
	healthy := make([]bool, n)
	anyBad := false
	for b := range n {
		healthy[b] = true
		if b < first || b > last {
			continue
		}
		lo := max(first, b-k+1)
		s, m := cOK[b+1]-cOK[lo], cEnd[b+1]-cEnd[lo]
		healthy[b] = m == 0 || wilsonUpper(s, m, verdictZ) >= sc.Verdict.Healthy
		anyBad = anyBad || !healthy[b]
	}
	if !anyBad {
		r.Verdict, r.RecoveryS = "stable", ptr(0)
		r.Why = fmt.Sprintf("requests succeeded ≥ %.0f%% throughout (%s of those that ended)", pct, share(cOK[n], cEnd[n]))
		return
	}

	var trigEnd float64
	for _, t := range r.TriggerS {
		trigEnd = math.Max(trigEnd, t[1])
	}
	span := r.DurationS - trigEnd
	if len(r.TriggerS) == 0 {
		span = r.DurationS
	}
	settle := min(max(3, int(math.Ceil(0.1*span/r.BinS))), last-first+1)

	onset, lastBad := collapse(healthy, first, last, settle)
	onsetS := float64(onset) * r.BinS
	r.CollapseS = ptr(onsetS)
	since := fmt.Sprintf("%s of the requests that arrived from %.0f s on succeeded", share(cOK[last+1]-cOK[onset], cEnd[last+1]-cEnd[onset]), onsetS)
	// A collapse that begins more than a bin after the last trigger ended
	// (or with no trigger) is its own event: its recovery is measured from
	// its start.
	late := len(r.TriggerS) == 0 || onsetS > trigEnd+r.BinS
	cause := "during a trigger"
	switch {
	case len(r.TriggerS) == 0:
		cause = "with no trigger"
	case late:
		cause = fmt.Sprintf("%.0f s after the last trigger ended", onsetS-trigEnd)
	case onsetS >= trigEnd:
		cause = "as the trigger ended"
	}

	bad := 0
	for b := last - settle + 1; b <= last; b++ {
		if !healthy[b] {
			bad++
		}
	}
	if 3*bad > settle {
		r.Verdict, r.RecoveryS = "metastable", nil
		r.Why = fmt.Sprintf("collapsed at %.0f s (%s) and had not come back by the end: %s", onsetS, cause, since)
		if !late {
			r.Why = fmt.Sprintf("collapsed at %.0f s (%s) and had not come back %.0f s after the trigger ended: %s", onsetS, cause, r.DurationS-trigEnd, since)
		}
		return
	}

	rec := -1
	for b, run := onset, 0; b <= last; b++ {
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
	if rec < 0 {
		rec = lastBad + 1
	}
	recAt := float64(rec) * r.BinS
	var recS float64
	switch {
	case !late && recAt >= trigEnd:
		recS = math.Max(0, recAt-trigEnd)
		r.Why = fmt.Sprintf("collapsed at %.0f s (%s); requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the trigger ended", onsetS, cause, pct, recAt, recS)
	case !late:
		// Back before the trigger was over (a runbook, say): how long
		// the collapse lasted.
		recS = recAt - onsetS
		r.Why = fmt.Sprintf("collapsed at %.0f s (%s); requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the collapse began and while the trigger was still active", onsetS, cause, pct, recAt, recS)
	default:
		recS = recAt - onsetS
		r.Why = fmt.Sprintf("collapsed at %.0f s (%s); requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the collapse began", onsetS, cause, pct, recAt, recS)
	}
	r.Verdict, r.RecoveryS, r.RecoveredS = "recovered", ptr(recS), ptr(recAt)
}

// arrivalCounts returns, per arrival bin and summed over clients, the
// requests that succeeded, the requests that ended (succeeded or failed),
// and the demand, as counts.
func arrivalCounts(r *Result, n int) (ok, ended, demand []float64) {
	ok, ended, demand = make([]float64, n), make([]float64, n), make([]float64, n)
	for _, c := range r.Clients {
		for b := range min(n, len(c.Bins)) {
			x := c.Bins[b]
			ok[b] += math.Round(x.ArrivedOK * r.BinS)
			ended[b] += math.Round((x.ArrivedOK + x.ArrivedFailed) * r.BinS)
			demand[b] += math.Round(x.Demand * r.BinS)
		}
	}
	return ok, ended, demand
}

// collapse returns the first bin of the episode the verdict reports and the
// episode's last unhealthy bin (rule 6 of judge).
func collapse(healthy []bool, first, last, settle int) (onset, lastBad int) {
	type episode struct{ start, end, bad int }
	var eps []episode
	for b := first; b <= last; b++ {
		if healthy[b] {
			continue
		}
		if n := len(eps); n > 0 && b-eps[n-1].end < settle {
			eps[n-1].end = b
			eps[n-1].bad++
			continue
		}
		eps = append(eps, episode{b, b, 1})
	}
	pick := eps[0]
	for i := len(eps) - 1; i >= 0; i-- {
		if eps[i].bad >= 2 {
			pick = eps[i]
			break
		}
	}
	return pick.start, pick.end
}

// wilsonUpper is the upper end of the Wilson score interval for a success
// share of s in m trials at z.
func wilsonUpper(s, m, z float64) float64 {
	p := s / m
	z2 := z * z
	return (p + z2/(2*m) + z*math.Sqrt(p*(1-p)/m+z2/(4*m*m))) / (1 + z2/m)
}

// share formats s/m as a percentage ("n/a" when m is 0).
func share(s, m float64) string {
	if m == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*s/m)
}

func ptr(f float64) *float64 { return &f }
