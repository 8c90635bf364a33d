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
//  2. A bin is unhealthy when the window of k bins ending with it shows,
//     with confidence, a success share below h (verdict.healthy, default
//     0.9): the upper end of the Wilson score interval of ΣOK / Σ(OK+F) at
//     z = 3 is below h; healthy otherwise. A window where nothing ended is
//     neither: it is no evidence either way (see rules 7 and 8). k is the
//     smallest number of bins that holds 20 requests at the run's mean
//     demand, at least 1 and at most a tenth of the run. Deciding on counts
//     with a test, instead of comparing goodput with demand per bin, keeps
//     Poisson noise and the lag between arrival and answer from failing a
//     healthy run at low rates.
//  3. Bins that start before the warm-up (verdict.warmup, default the
//     longest client timeout) are not judged, nor the bins at the end in
//     which no request arrived or whose requests are more than 10 % still
//     in flight: from the end, such bins are dropped until one that is
//     neither.
//  4. The settling stretch is S = max(3 bins, 10 % of the time after the
//     last trigger ended, or of the run without triggers).
//  5. stable: every judged bin is healthy. recovery_s = 0.
//  6. The unhealthy bins form episodes: two unhealthy bins with fewer than
//     S − 1 healthy bins between them belong to one (bins without evidence
//     do not separate them). The collapse the verdict reports is the last
//     episode of two or more unhealthy bins (or, if there is none, the
//     first episode): a lone unhealthy bin after it does not move it.
//     When that collapse began while a trigger was active (or within a bin
//     of its end) and an earlier episode of two or more unhealthy bins
//     began after that trigger started, the run relapsed: it had come back
//     and collapsed again in one incident, whose first collapse is the
//     earliest such episode (Result.FirstCollapseS).
//  7. metastable: more than a third of the last S judged bins that are
//     healthy or unhealthy are unhealthy, or no healthy bin follows the
//     collapse's last unhealthy bin: the system had not come back by the
//     end, or by the time its load stopped. recovery_s = null.
//  8. recovered: otherwise. It recovered at the start of the first S
//     healthy bins after the collapse began, with no unhealthy bin among
//     them (bins without evidence neither count nor break the stretch), or,
//     without such a stretch, at the first healthy bin after its last
//     unhealthy bin. recovery_s is that time minus the end of the last
//     trigger when the collapse began before that end or within a bin of
//     it, and minus the collapse's start when it began later (a collapse
//     under a load episode, with no trigger active) or came back while the
//     trigger was still active (a runbook's doing) — for a run that
//     relapsed, minus the incident's first collapse: how long the incident
//     lasted, not the relapse alone.
func judge(r *Result, sc Scenario) {
	r.CollapseS, r.FirstCollapseS, r.RecoveredS = nil, nil, nil
	n := int(math.Round(r.DurationS / r.BinS))
	if n == 0 {
		r.Verdict, r.RecoveryS, r.Why = "stable", ptr(0), "nothing was simulated"
		return
	}
	ok, ended, demand := arrivalCounts(r, n)
	pct := 100 * sc.Verdict.Healthy

	// The judged bins: after the warm-up, before the tail in which nothing
	// arrived or whose fate is unknown.
	first := min(n, int(math.Ceil(sc.Verdict.Warmup.Seconds()/r.BinS)))
	last := n - 1
	for last >= first && (demand[last] == 0 || demand[last]-ended[last] > verdictPendingTail*demand[last]) {
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
	perBin := totalDemand / float64(n)
	k := 1
	if perBin > 0 {
		k = int(math.Ceil(verdictMinWindow / perBin))
	}
	k = max(1, min(k, n/10))
	stopS, stopped := loadStopped(demand, perBin, r.BinS)

	// Prefix sums over arrival bins.
	cOK := make([]float64, n+1)
	cEnd := make([]float64, n+1)
	for b := range n {
		cOK[b+1], cEnd[b+1] = cOK[b]+ok[b], cEnd[b]+ended[b]
	}
	// good and bad: the bin's window shows the run healthy or unhealthy;
	// neither when nothing in it ended (rule 2).
	good, bad := make([]bool, n), make([]bool, n)
	anyBad := false
	for b := first; b <= last; b++ {
		lo := max(first, b-k+1)
		s, m := cOK[b+1]-cOK[lo], cEnd[b+1]-cEnd[lo]
		switch {
		case m == 0:
		case wilsonUpper(s, m, verdictZ) >= sc.Verdict.Healthy:
			good[b] = true
		default:
			bad[b] = true
			anyBad = true
		}
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

	eps := episodes(good, bad, first, last, settle)
	pick := reported(eps)
	onset, lastBad := eps[pick].start, eps[pick].end
	onsetS := float64(onset) * r.BinS
	r.CollapseS = ptr(onsetS)
	since := fmt.Sprintf("%s of the requests that arrived from %.0f s on succeeded", share(cOK[last+1]-cOK[onset], cEnd[last+1]-cEnd[onset]), onsetS)
	// A collapse that begins more than a bin after the last trigger ended
	// (or with no trigger) is its own event: its recovery is measured from
	// its start.
	late := len(r.TriggerS) == 0 || onsetS > trigEnd+r.BinS
	firstS := onsetS
	if !late {
		firstS = float64(eps[incident(eps, pick, r.TriggerS, r.BinS)].start) * r.BinS
	}
	r.FirstCollapseS = ptr(firstS)
	relapsed := firstS < onsetS
	cause := func(at float64) string {
		switch {
		case len(r.TriggerS) == 0:
			return "with no trigger"
		case at > trigEnd+r.BinS:
			return fmt.Sprintf("%.0f s after the last trigger ended", at-trigEnd)
		case at >= trigEnd:
			return "as the trigger ended"
		}
		return "during a trigger"
	}
	head := fmt.Sprintf("collapsed at %.0f s (%s)", onsetS, cause(onsetS))
	if relapsed {
		head = fmt.Sprintf("collapsed at %.0f s (%s), came back, and collapsed again at %.0f s", firstS, cause(firstS), onsetS)
	}

	// The last S judged bins that show anything, and whether any healthy
	// bin follows the collapse.
	seen, down := 0, 0
	for b := last; b >= first && seen < settle; b-- {
		if good[b] || bad[b] {
			seen++
			if bad[b] {
				down++
			}
		}
	}
	back := -1
	for b := lastBad + 1; b <= last; b++ {
		if good[b] {
			back = b
			break
		}
	}
	if 3*down > seen || back < 0 {
		var end string
		switch {
		case stopped:
			end = fmt.Sprintf("was still down when its load stopped at %.0f s, so it never showed a recovery", stopS)
		case late:
			end = "had not come back by the end"
		case trigEnd >= r.DurationS:
			end = "had not come back by the end, with the trigger still active"
		default:
			end = fmt.Sprintf("had not come back %.0f s after the trigger ended", r.DurationS-trigEnd)
		}
		r.Verdict, r.RecoveryS = "metastable", nil
		r.Why = fmt.Sprintf("%s and %s: %s", head, end, since)
		return
	}

	// The first S healthy bins after the onset with no unhealthy bin among
	// them; bins that show nothing neither count nor break the stretch.
	rec := back
	for b, run, start := onset, 0, 0; b <= last; b++ {
		switch {
		case good[b]:
			if run == 0 {
				start = b
			}
			run++
		case bad[b]:
			run = 0
		}
		if run == settle {
			rec = start
			break
		}
	}
	recAt := float64(rec) * r.BinS
	var recS float64
	switch {
	case !late && recAt >= trigEnd:
		recS = math.Max(0, recAt-trigEnd)
		r.Why = fmt.Sprintf("%s; requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the trigger ended", head, pct, recAt, recS)
	case !late && relapsed:
		// Back before the trigger was over, after a relapse: how long the
		// whole incident lasted.
		recS = recAt - firstS
		r.Why = fmt.Sprintf("%s; requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the first collapse began and while the trigger was still active", head, pct, recAt, recS)
	case !late:
		// Back before the trigger was over (a runbook, say): how long
		// the collapse lasted.
		recS = recAt - onsetS
		r.Why = fmt.Sprintf("%s; requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the collapse began and while the trigger was still active", head, pct, recAt, recS)
	default:
		recS = recAt - onsetS
		r.Why = fmt.Sprintf("%s; requests succeeded ≥ %.0f%% again from %.0f s, %.1f s after the collapse began", head, pct, recAt, recS)
	}
	r.Verdict, r.RecoveryS, r.RecoveredS = "recovered", ptr(recS), ptr(recAt)
}

// loadStopped reports when the load stopped: the end of the last bin in
// which a request arrived, when the empty bins after it would have held at
// least 20 requests (verdictMinWindow) at the run's mean demand per bin, so
// that their emptiness is not chance.
func loadStopped(demand []float64, perBin, binS float64) (float64, bool) {
	stop := len(demand)
	for stop > 0 && demand[stop-1] == 0 {
		stop--
	}
	return float64(stop) * binS, stop < len(demand) && float64(len(demand)-stop)*perBin >= verdictMinWindow
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

// episode is a run of unhealthy bins with fewer than S − 1 healthy bins
// between two of them (rule 6 of judge): its first and last unhealthy bins
// and how many there are.
type episode struct{ start, end, bad int }

// episodes groups the unhealthy bins of [first, last] into episodes; there
// is at least one when any bin is unhealthy. Bins without evidence do not
// separate episodes.
func episodes(good, bad []bool, first, last, settle int) []episode {
	var eps []episode
	healthy := 0 // healthy bins since the last unhealthy one
	for b := first; b <= last; b++ {
		if good[b] {
			healthy++
		}
		if !bad[b] {
			continue
		}
		if n := len(eps); n > 0 && healthy < settle-1 {
			eps[n-1].end = b
			eps[n-1].bad++
		} else {
			eps = append(eps, episode{b, b, 1})
		}
		healthy = 0
	}
	return eps
}

// reported is the index of the episode the verdict reports: the last one of
// two or more unhealthy bins, else the first.
func reported(eps []episode) int {
	for i := len(eps) - 1; i >= 0; i-- {
		if eps[i].bad >= 2 {
			return i
		}
	}
	return 0
}

// incident returns the index of the incident's first collapse for the
// reported episode pick, which began during a trigger or within a bin of
// its end (rule 6 of judge): the earliest episode of two or more unhealthy
// bins that began at or after the start of the triggers active at pick's
// start (less a bin); pick itself when there is none before it.
func incident(eps []episode, pick int, triggers [][2]float64, binS float64) int {
	at := float64(eps[pick].start) * binS
	from := math.Inf(1)
	for _, t := range triggers {
		if t[0]-binS <= at && at <= t[1]+binS {
			from = math.Min(from, t[0])
		}
	}
	for i := range pick {
		if eps[i].bad >= 2 && float64(eps[i].start)*binS >= from-binS {
			return i
		}
	}
	return pick
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
