package result

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// The verdicts, from the best to the worst (see Severity).
const (
	// Stable: every judged window was healthy.
	Stable = "stable"
	// Recovered: it collapsed and came back.
	Recovered = "recovered"
	// NotJudged: the evidence does not decide: nothing ended, or the fates
	// of too many requests were still open at the end.
	NotJudged = "not judged"
	// Degraded: unhealthy before anything happened to it (no trigger, no
	// change of load yet): a steady fault or overload, not a collapse that
	// outlived its cause; or a burst served below the healthy share.
	Degraded = "degraded"
	// Metastable: it collapsed and had not come back by the end.
	Metastable = "metastable"
)

// Severity orders verdicts for the run's headline, which is the worst of
// its parts': stable 0, recovered 1, not judged 2, degraded 3, metastable
// 4. Another word (the lab's "inconclusive") ranks as not judged.
func Severity(verdict string) int {
	switch verdict {
	case Stable:
		return 0
	case Recovered:
		return 1
	case Degraded:
		return 3
	case Metastable:
		return 4
	}
	return 2
}

// Down reports whether a verdict says the system was unhealthy at the end:
// metastable or degraded.
func Down(verdict string) bool { return verdict == Metastable || verdict == Degraded }

// Judged reports whether a verdict says anything about the system: stable,
// recovered, degraded or metastable.
func Judged(verdict string) bool { return Severity(verdict) != 2 }

// MinWindow is how many requests a window of the verdict's rule should
// hold (rule 2 of Judge): the window is widened at low rates until the
// expected count reaches it. A judged run that stops early (package sim's
// RunJudged) sizes its margin with it.
const MinWindow = 20

// Constants of the verdict's rule (see judge).
const (
	// verdictZ is the one-sided z-score of the test that calls a window
	// unhealthy: its success share must be below verdict.healthy with
	// about 99.9 % confidence, so Poisson noise alone almost never fails a
	// window (see TestVerdictCorpus).
	verdictZ = 3.0
	// verdictPendingTail: arrival bins at the end of the run with more than
	// this share of their requests still in flight are not judged (their
	// fate is unknown).
	verdictPendingTail = 0.1
)

// Judge sets the verdict of every client and service of r (their
// Judgement) and the run's (Verdict, RecoveryS, CollapseS,
// FirstCollapseS, RecoveredS, Why, DecidedBy) from its time series, by
// the rule of judge, below: the simulator judges its own runs with it,
// and the lab the runs it measures. s is the scenario r ran; its zero
// fields take their defaults.
func Judge(r *Result, s scenario.Scenario) { judge(r, s.WithDefaults(), 0) }

// JudgeStopped judges r, a run stopped at the end of its series once
// every request arriving from then on was sure to fail (package sim's
// RunJudged), as the whole run of s would be judged: the bins from the
// stop to the end of s are taken to hold, for each client, its demand of
// the last bin, every request failed. r's series are not changed.
func JudgeStopped(r *Result, s scenario.Scenario) {
	s = s.WithDefaults()
	judge(r, s, int(math.Round(s.Duration.Seconds()/r.BinS)))
}

// judge decides every part's verdict, and the run's, by this rule.
//
// Each client is judged on its requests, each service on its work, each
// apart. The run's verdict is the worst of its clients' (Severity), ties
// going to the first, and among recovered clients to the one back last;
// a service decides it when it ended down (metastable or degraded) and
// worse than every client: a collapse its callers did not see, served
// from a cache or a fallback, or a queue that grows while they wait. A
// service that came back counts only in its own verdict: the work it
// finishes for callers who gave up lags their requests' recovery; for the
// same reason a service does not decide when a client came back within
// the last S bins of the run (rule 4), its backlog still draining. A client
// no request of which arrived, or a service that completed nothing after
// the warm-up and whose queue did not grow, is not judged and does not
// count.
//
//  1. A client's requests are judged by the bin they arrived in: for each
//     bin, the requests that arrived in it and later succeeded (OK) and
//     failed (F), from ClientBin.ArrivedOK and ArrivedFailed. A request
//     still in flight at the end counts as failed when it is older than
//     its caller's patience (verdict.patience, default the client's
//     Lifetime), and as neither otherwise: its fate is open. A service's
//     work is judged by the bin it was completed in: OK is the work done
//     for a caller still waiting, F the wasted work (ServiceBin.Wasted).
//  2. A bin is unhealthy when the window of k bins ending with it shows,
//     with confidence, a success share below h (verdict.healthy, default
//     0.9): the upper end of the Wilson score interval of ΣOK / Σ(OK+F) at
//     z = 3 is below h; healthy otherwise. A window where nothing ended is
//     neither: it is no evidence either way (see rules 7 and 8). k is the
//     smallest number of bins that holds 20 requests (or completions) at
//     the part's mean rate, at least 1 and at most a tenth of the run.
//     Deciding on counts with a test, instead of comparing goodput with
//     demand per bin, keeps Poisson noise and the lag between arrival and
//     answer from failing a healthy run at low rates. A service whose
//     queue grows without bound at the end of the run (it rose through the
//     last half of the judged bins to more than 10 s of its work; see
//     queueGrowth) is unhealthy from where the growth began, whatever its
//     windows say.
//  3. Bins that start before the warm-up (verdict.warmup, default the
//     longest client timeout, at most a quarter of the run) are not
//     judged, nor a client's bins at the end in which no request arrived
//     or whose requests are more than 10 % still open: from the end, such
//     bins are dropped until one that is neither. When no bin is left, or
//     none shows anything, the part is not judged.
//  4. The settling stretch is S = max(3 bins, 10 % of the time after the
//     last trigger ended, or of the run without triggers).
//  5. stable: every judged bin is healthy (and rule 9 does not apply).
//     recovery_s = 0.
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
//  9. degraded, before rules 5 to 8: the part was unhealthy before
//     anything happened to it — before the first trigger, runbook step,
//     change of a client's rate or burst (Scenario.Disturbed) — so nothing
//     but a steady fault or overload can be the cause. That is: its judged
//     bins before the first unhealthy episode (or, with none, before the
//     disturbance) hold a success share below h with confidence (the
//     Wilson test of rule 2 on their sum); or that episode began there, in
//     the first S judged bins that show anything, and it had not come back
//     by the end (rule 7). recovery_s = null.
//  10. A client whose arrivals are one burst is judged on the burst's
//     requests together: stable when their success share is not below h
//     with confidence (rule 2's test, the open ones counted as failed),
//     degraded when it is below even with the open ones counted as
//     succeeded, not judged otherwise.
//
// stopAt, when it is more than the run's bins, is the number of bins of
// the whole run that r's series were cut from (see JudgeStopped).
func judge(r *Result, sc scenario.Scenario, stopAt int) {
	x := newRun(r, sc, stopAt)
	for i := range r.Clients {
		r.Clients[i].Judgement = x.client(i)
	}
	for i := range r.Services {
		r.Services[i].Judgement = x.service(i)
	}
	x.headline()
}

// run holds what judging one Result needs besides the part judged.
type run struct {
	r  *Result
	sc scenario.Scenario
	// n is the number of bins judged, stop the number of the Result's bins
	// (n > stop for a stopped run).
	n, stop          int
	binS, durationS  float64
	trigEnd          float64
	disturbed        float64 // Scenario.Disturbed, seconds
	healthy, pct     float64
	warmBins, settle int
	// counted marks the parts that count for the headline.
	clientCounted, serviceCounted []bool
}

func newRun(r *Result, sc scenario.Scenario, stopAt int) *run {
	x := &run{r: r, sc: sc, binS: r.BinS, durationS: r.DurationS, healthy: sc.Verdict.Healthy, pct: 100 * sc.Verdict.Healthy}
	x.stop = bins(r)
	x.n = max(x.stop, stopAt)
	if stopAt > x.stop {
		x.durationS = float64(x.n) * r.BinS
	}
	for _, t := range r.TriggerS {
		x.trigEnd = math.Max(x.trigEnd, t[1])
	}
	x.disturbed = x.durationS
	if d := sc.Disturbed(); d < sc.Duration {
		x.disturbed = math.Min(x.disturbed, d.Seconds())
	}
	for _, t := range r.TriggerS {
		x.disturbed = math.Min(x.disturbed, t[0])
	}
	if x.binS > 0 {
		x.warmBins = min(x.n, int(math.Ceil(sc.Verdict.Warmup.Seconds()/x.binS)))
	}
	span := x.durationS - x.trigEnd
	if len(r.TriggerS) == 0 {
		span = x.durationS
	}
	x.settle = 3
	if x.binS > 0 {
		x.settle = max(3, int(math.Ceil(0.1*span/x.binS)))
	}
	x.clientCounted = make([]bool, len(r.Clients))
	x.serviceCounted = make([]bool, len(r.Services))
	return x
}

// bins is the number of bins of r's series.
func bins(r *Result) int {
	if !(r.BinS > 0) {
		return 0
	}
	return int(math.Round(r.DurationS / r.BinS))
}

// headline sets the run's verdict from its parts'.
func (x *run) headline() {
	r := x.r
	pick, by := Judgement{}, ""
	better := func(j Judgement) bool {
		if by == "" {
			return true
		}
		a, b := Severity(j.Verdict), Severity(pick.Verdict)
		if a != b {
			return a > b
		}
		// Among recovered parts, the run came back when the last did.
		return j.Verdict == Recovered && j.RecoveredS != nil && pick.RecoveredS != nil && *j.RecoveredS > *pick.RecoveredS
	}
	// A client back within the last S bins: a service's work may still
	// be draining the attempts its callers gave up on.
	draining := false
	for i, c := range r.Clients {
		if x.clientCounted[i] && better(c.Judgement) {
			pick, by = c.Judgement, "clients."+c.Name
		}
		if x.clientCounted[i] && c.RecoveredS != nil && *c.RecoveredS > x.durationS-float64(x.settle)*x.binS {
			draining = true
		}
	}
	for i, s := range r.Services {
		if x.serviceCounted[i] && Down(s.Verdict) && !draining && better(s.Judgement) {
			pick, by = s.Judgement, "services."+s.Name
		}
	}
	switch {
	case x.n == 0:
		pick = Judgement{Verdict: NotJudged, Why: "nothing was simulated"}
	case by == "" && len(r.Clients) > 0:
		pick, by = r.Clients[0].Judgement, "clients."+r.Clients[0].Name
	case by == "":
		pick = Judgement{Verdict: NotJudged, Why: "there are no clients"}
	}
	if by != "" {
		kind, name := "client", by[len("clients."):]
		if by[0] == 's' {
			kind, name = "service", by[len("services."):]
		}
		pick.Why = kind + " " + name + ": " + pick.Why
	}
	r.Judgement = pick
	r.DecidedBy = by
}

// client judges client i's requests.
func (x *run) client(i int) Judgement {
	c := &x.r.Clients[i]
	spec := x.clientSpec(c.Name)
	n := x.n
	ok, ended, demand := make([]float64, n), make([]float64, n), make([]float64, n)
	b := 0
	for v := range c.Each() {
		if b >= x.stop {
			break
		}
		ok[b] = math.Round(v.ArrivedOK * x.binS)
		ended[b] = math.Round((v.ArrivedOK + v.ArrivedFailed) * x.binS)
		demand[b] = math.Round(v.Demand * x.binS)
		b++
	}
	// A stopped run's bins after the stop: the last bin's demand, every
	// request failed.
	if x.stop > 0 && x.stop < n && b >= x.stop {
		d := demand[x.stop-1]
		for b := x.stop; b < n; b++ {
			demand[b], ended[b] = d, d
		}
	}
	total := 0.0
	for _, d := range demand {
		total += d
	}
	if total == 0 {
		return Judgement{Verdict: NotJudged, Why: "no request arrived"}
	}
	x.clientCounted[i] = true
	// Requests still open at the end and older than their caller's
	// patience failed.
	patience := x.sc.Verdict.Patience
	if patience == 0 && spec != nil {
		patience = spec.Lifetime()
	}
	old := 0
	if patience > 0 {
		old = int(math.Floor((x.durationS - patience.Seconds()) / x.binS))
	}
	for b := range min(old, n) {
		ended[b] = math.Max(ended[b], demand[b])
	}
	if spec != nil && spec.Arrivals.Kind == "burst" {
		return x.burst(ok, ended, demand, spec)
	}
	first, last := x.warmBins, n-1
	for last >= first && (demand[last] == 0 || demand[last]-ended[last] > verdictPendingTail*demand[last]) {
		last--
	}
	if last < first {
		return x.unjudged(demand, ended, first, patience)
	}
	ev := evidence{ok: ok, ended: ended, load: demand, window: demand, first: first, last: last, badFrom: -1,
		subject: "requests succeeded", ofEnded: "of those that ended", since: "of the requests that arrived from %.0f s on succeeded"}
	return x.decide(ev)
}

// unjudged is a client's verdict when no bin after the warm-up can be
// judged.
func (x *run) unjudged(demand, ended []float64, first int, patience time.Duration) Judgement {
	var arrived, done float64
	for b := first; b < len(demand); b++ {
		arrived += demand[b]
		done += ended[b]
	}
	warm := fmt.Sprintf("after the warm-up (%.0f s)", float64(first)*x.binS)
	switch {
	case arrived == 0:
		return Judgement{Verdict: NotJudged, Why: "no request arrived " + warm + ": nothing to judge"}
	case done == 0:
		return Judgement{Verdict: NotJudged, Why: fmt.Sprintf("none of the %.0f requests that arrived %s had ended by the end of the run, and their callers wait up to %s: their fates are open", arrived, warm, patienceText(patience))}
	}
	return Judgement{Verdict: NotJudged, Why: fmt.Sprintf("%.0f of the %.0f requests that arrived %s were still open at the end, and their callers wait up to %s: the evidence does not decide", arrived-done, arrived, warm, patienceText(patience))}
}

func patienceText(d time.Duration) string {
	if d <= 0 || d == math.MaxInt64 {
		return "no set time"
	}
	return d.String()
}

// burst judges a client whose arrivals are one burst on the burst's
// requests (rule 10).
func (x *run) burst(ok, ended, demand []float64, spec *scenario.Client) Judgement {
	var s, m, all float64
	for b := range ok {
		s, m, all = s+ok[b], m+ended[b], all+demand[b]
	}
	open := all - m
	head := fmt.Sprintf("the burst of %.0f requests at %s s", all, trimFloat(spec.Arrivals.At.Seconds()))
	got := fmt.Sprintf("%s succeeded", share(s, all))
	if open > 0 {
		got += fmt.Sprintf(", %.0f still open at the end", open)
	}
	switch {
	case m == 0:
		return Judgement{Verdict: NotJudged, Why: head + ": none had ended by the end of the run"}
	case wilsonUpper(s, all, verdictZ) >= x.healthy:
		return Judgement{Verdict: Stable, RecoveryS: ptr(0), Why: fmt.Sprintf("%s: %s (≥ %.0f%%)", head, got, x.pct)}
	case wilsonUpper(s+open, all, verdictZ) < x.healthy:
		return Judgement{Verdict: Degraded, Why: fmt.Sprintf("%s: only %s (below %.0f%%): the system did not serve the burst", head, got, x.pct)}
	}
	return Judgement{Verdict: NotJudged, Why: fmt.Sprintf("%s: %s; the open ones decide whether %.0f%% did", head, got, x.pct)}
}

func trimFloat(v float64) string { return fmt.Sprintf("%g", math.Round(v*1000)/1000) }

// clientSpec returns the scenario's client of that name, or nil.
func (x *run) clientSpec(name string) *scenario.Client {
	for i := range x.sc.Clients {
		if x.sc.Clients[i].Name == name {
			return &x.sc.Clients[i]
		}
	}
	return nil
}

// service judges service i's work.
func (x *run) service(i int) Judgement {
	v := &x.r.Services[i]
	n := x.n
	ok, ended, load := make([]float64, n), make([]float64, n), make([]float64, n)
	queue := make([]float64, min(x.stop, n))
	any := false
	b := 0
	for s := range v.Each() {
		if b >= x.stop {
			break
		}
		done := math.Round(s.Throughput * x.binS)
		ended[b] = done
		ok[b] = math.Max(0, done-math.Round(s.Wasted*x.binS))
		load[b] = math.Round((s.OfferedFirst + s.OfferedRetries) * x.binS)
		queue[b] = s.Queue
		any = any || done > 0
		b++
	}
	queue = queue[:b]
	// A stopped run's bins after the stop: the last bin's load, nothing
	// ended (no evidence).
	if x.stop > 0 && x.stop < n && b >= x.stop {
		for b := x.stop; b < n; b++ {
			load[b] = load[x.stop-1]
		}
	}
	first := x.warmBins
	growth, from := queueGrowth(queue, ended, first, x.binS)
	last := n - 1
	// A stopped run's service is judged on the bins it has.
	if x.stop < n {
		last = x.stop - 1
	}
	done := 0.0
	for b := first; b <= last; b++ {
		done += ended[b]
	}
	if done == 0 && growth == "" {
		why := "it completed no work and its queue did not grow"
		if any {
			why = fmt.Sprintf("it completed no work after the warm-up (%.0f s) and its queue did not grow", float64(first)*x.binS)
		}
		return Judgement{Verdict: NotJudged, Why: why}
	}
	x.serviceCounted[i] = true
	ev := evidence{ok: ok, ended: ended, load: load, window: ended, first: first, last: last, badFrom: from, note: growth,
		subject: "work done for callers still waiting", ofEnded: "of its completions", since: "of the work it completed from %.0f s on was for a caller still waiting"}
	return x.decide(ev)
}

// queueGrowth reports whether a queue (per bin, at each bin's end) grows
// without bound at the end of the run: over the last half of the judged
// bins (at least 8), it rose at each quarter of that stretch, by at least
// a third of its last value and MinWindow in all, and at the end it holds
// more than 10 s of the service's work at the throughput of that stretch
// (done, completions per bin): a wait no healthy queue holds for long. It
// returns how the queue grew, for the why, and the bin where the growth
// began: the first of the bins before the end in which the queue held
// more than a tenth of its last value; "" and −1 when it did not grow.
func queueGrowth(q, done []float64, first int, binS float64) (string, int) {
	last := len(q) - 1
	w := max((last-first+1)/2, 8)
	if last-w < first || last < 0 {
		return "", -1
	}
	q0, q1 := q[last-w], q[last]
	if !(q1-q0 >= max(MinWindow, q1/3)) {
		return "", -1
	}
	work := 0.0
	for b := last - w + 1; b <= last; b++ {
		work += done[b]
	}
	if !(q1 > 10*work/(float64(w)*binS)) {
		return "", -1
	}
	prev := q0
	for k := 1; k <= 4; k++ {
		v := q[last-w+k*w/4]
		if !(v > prev) {
			return "", -1
		}
		prev = v
	}
	from := last
	for from > first && q[from-1] > q1/10 {
		from--
	}
	return fmt.Sprintf("its queue grew without bound, from %.0f at %.0f s to %.0f at the end", q[from], float64(from)*binS, q1), from
}

// evidence is what one part is judged on: counts per bin of what ended
// well (ok) and what ended at all (ended), and the part's load (requests
// arrived or attempts offered), over the judged bins [first, last].
type evidence struct {
	ok, ended, load []float64
	// window: the series whose mean per bin sizes the window (rule 2).
	window      []float64
	first, last int
	// badFrom, if not −1, makes every bin from it on unhealthy; note says
	// why (a queue that grows without bound).
	badFrom int
	note    string
	// Phrases of the why: what succeeded ("requests succeeded"), the share
	// of what ("of those that ended"), and since the collapse (a format
	// with the collapse's time).
	subject, ofEnded, since string
}

// decide applies rules 2 to 9 of judge to one part.
func (x *run) decide(ev evidence) Judgement {
	r := x.r
	n := x.n
	first, last := ev.first, ev.last
	sum := func(v []float64) float64 {
		t := 0.0
		for _, d := range v {
			t += d
		}
		return t
	}
	k := 1
	if perBin := sum(ev.window) / float64(n); perBin > 0 {
		k = int(math.Ceil(MinWindow / perBin))
	}
	k = max(1, min(k, n/10))
	stopS, stopped := loadStopped(ev.load, sum(ev.load)/float64(n), x.binS)

	// Prefix sums over the bins.
	cOK := make([]float64, n+1)
	cEnd := make([]float64, n+1)
	for b := range n {
		cOK[b+1], cEnd[b+1] = cOK[b]+ev.ok[b], cEnd[b]+ev.ended[b]
	}
	low := func(from, to int) bool { // the bins [from, to) show a share below h
		s, m := cOK[to]-cOK[from], cEnd[to]-cEnd[from]
		return m > 0 && wilsonUpper(s, m, verdictZ) < x.healthy
	}
	good, bad := make([]bool, n), make([]bool, n)
	anyBad := false
	firstEv := -1
	for b := first; b <= last; b++ {
		lo := max(first, b-k+1)
		m := cEnd[b+1] - cEnd[lo]
		switch {
		case ev.badFrom >= 0 && b >= ev.badFrom:
			bad[b], anyBad = true, true
		case m == 0:
		case !low(lo, b+1):
			good[b] = true
		default:
			bad[b], anyBad = true, true
		}
		if firstEv < 0 && (good[b] || bad[b]) {
			firstEv = b
		}
	}
	if firstEv < 0 {
		return Judgement{Verdict: NotJudged, Why: fmt.Sprintf("nothing ended after the warm-up (%.0f s): nothing to judge", float64(first)*x.binS)}
	}
	note := ""
	if ev.note != "" {
		note = "; " + ev.note
	}
	// The baseline: the judged bins before anything happened.
	base := min(last+1, int(math.Ceil(x.disturbed/x.binS-1e-9)))
	before := "with no trigger and a steady load"
	if x.disturbed < x.durationS {
		before = fmt.Sprintf("before the first trigger, runbook step or change of load (%.0f s)", x.disturbed)
	}
	degraded := func(to int) Judgement {
		if ev.badFrom >= 0 && ev.badFrom < to && ev.note != "" {
			// The queue's growth decided it: say so first.
			return Judgement{Verdict: Degraded, Why: fmt.Sprintf("%s, %s: a steady overload, not a collapse that outlived its cause (%s %s from %.0f s on)",
				ev.note, before, share(cOK[to]-cOK[first], cEnd[to]-cEnd[first]), ev.ofEnded, float64(first)*x.binS)}
		}
		return Judgement{Verdict: Degraded, Why: fmt.Sprintf("%s below %.0f%% from the start, %s: %s %s from %.0f s on; a steady fault or overload, not a collapse that outlived its cause%s",
			ev.subject, x.pct, before, share(cOK[to]-cOK[first], cEnd[to]-cEnd[first]), ev.ofEnded, float64(first)*x.binS, note)}
	}
	if !anyBad {
		if base > first && low(first, base) {
			return degraded(base)
		}
		return Judgement{Verdict: Stable, RecoveryS: ptr(0),
			Why: fmt.Sprintf("%s ≥ %.0f%% throughout (%s %s)", ev.subject, x.pct, share(cOK[last+1]-cOK[first], cEnd[last+1]-cEnd[first]), ev.ofEnded)}
	}

	settle := min(x.settle, last-first+1)
	eps := episodes(good, bad, first, last, settle)
	// A window of k bins turns unhealthy only once its failures outweigh
	// the successes before them, and healthy again once its successes
	// outweigh the failures: at low rates (k > 1) both lag. An episode
	// starts, and a recovery begins, at the earliest bin of the window
	// that turned from which its requests are on that side of h (rule 2's
	// share, observed, in that bin and from it to the window's end).
	sharpen := func(lo, at int, below bool) int {
		for b := lo; b < at; b++ {
			s1, m1 := ev.ok[b], ev.ended[b]
			s, m := cOK[at+1]-cOK[b], cEnd[at+1]-cEnd[b]
			if m1 > 0 && below == (s1 < x.healthy*m1) && below == (s < x.healthy*m) {
				return b
			}
		}
		return at
	}
	for i := range eps {
		lo := first
		if i > 0 {
			lo = eps[i-1].end + 1
		}
		if ev.badFrom < 0 || eps[i].start < ev.badFrom {
			eps[i].start = sharpen(max(lo, eps[i].start-k+1), eps[i].start, true)
		}
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
	pick := reported(eps)
	onset, lastBad := eps[pick].start, eps[pick].end
	flagged := eps[pick].flagged
	back := -1
	for b := lastBad + 1; b <= last; b++ {
		if good[b] {
			back = b
			break
		}
	}
	stuck := 3*down > seen || back < 0

	// Rule 9: unhealthy before anything happened.
	if e0 := eps[0].start; e0 < base && (low(first, e0) || pick == 0 && e0 < firstEv+settle && stuck) {
		return degraded(last + 1)
	}

	onsetS := float64(onset) * x.binS
	j := Judgement{CollapseS: ptr(onsetS)}
	since := share(cOK[last+1]-cOK[onset], cEnd[last+1]-cEnd[onset]) + " " + fmt.Sprintf(ev.since, onsetS)
	// A collapse that begins more than a bin after the last trigger ended
	// (or with no trigger) is its own event: its recovery is measured from
	// its start.
	trigEnd := x.trigEnd
	late := len(r.TriggerS) == 0 || onsetS > trigEnd+x.binS
	firstS := onsetS
	if !late {
		firstS = float64(eps[incident(eps, pick, r.TriggerS, x.binS)].start) * x.binS
	}
	j.FirstCollapseS = ptr(firstS)
	relapsed := firstS < onsetS
	cause := func(at float64) string {
		switch {
		case len(r.TriggerS) == 0:
			return "with no trigger"
		case at > trigEnd+x.binS:
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

	if stuck {
		var end string
		switch {
		case stopped:
			end = fmt.Sprintf("was still down when its load stopped at %.0f s, so it never showed a recovery", stopS)
		case late:
			end = "had not come back by the end"
		case trigEnd >= x.durationS:
			end = "had not come back by the end, with the trigger still active"
		default:
			end = fmt.Sprintf("had not come back %.0f s after the trigger ended", x.durationS-trigEnd)
		}
		j.Verdict = Metastable
		j.Why = fmt.Sprintf("%s and %s: %s%s", head, end, since, note)
		return j
	}

	// The first S healthy bins after the onset with no unhealthy bin among
	// them; bins that show nothing neither count nor break the stretch.
	rec := back
	for b, run, start := flagged, 0, 0; b <= last; b++ {
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
	rec = sharpen(max(flagged+1, rec-k+1), rec, false)
	recAt := float64(rec) * x.binS
	var recS float64
	again := fmt.Sprintf("%s ≥ %.0f%% again from %.0f s", ev.subject, x.pct, recAt)
	switch {
	case !late && recAt >= trigEnd:
		recS, j.RecoveryFrom = math.Max(0, recAt-trigEnd), "trigger"
		j.Why = fmt.Sprintf("%s; %s, %.1f s after the trigger ended", head, again, recS)
	case !late && relapsed:
		// Back before the trigger was over, after a relapse: how long the
		// whole incident lasted.
		recS, j.RecoveryFrom = recAt-firstS, "first-collapse"
		j.Why = fmt.Sprintf("%s; %s, %.1f s after the first collapse began and while the trigger was still active", head, again, recS)
	case !late:
		// Back before the trigger was over (a runbook, say): how long
		// the collapse lasted.
		recS, j.RecoveryFrom = recAt-onsetS, "collapse"
		j.Why = fmt.Sprintf("%s; %s, %.1f s after the collapse began and while the trigger was still active", head, again, recS)
	default:
		recS, j.RecoveryFrom = recAt-onsetS, "collapse"
		j.Why = fmt.Sprintf("%s; %s, %.1f s after the collapse began", head, again, recS)
	}
	j.Verdict, j.RecoveryS, j.RecoveredS = Recovered, ptr(recS), ptr(recAt)
	return j
}

// loadStopped reports when the load stopped: the end of the last bin in
// which a request arrived, when the empty bins after it would have held at
// least 20 requests (MinWindow) at the run's mean demand per bin, so
// that their emptiness is not chance.
func loadStopped(demand []float64, perBin, binS float64) (float64, bool) {
	stop := len(demand)
	for stop > 0 && demand[stop-1] == 0 {
		stop--
	}
	return float64(stop) * binS, stop < len(demand) && float64(len(demand)-stop)*perBin >= MinWindow
}

// episode is a run of unhealthy bins with fewer than S − 1 healthy bins
// between two of them (rule 6 of judge): its start, its last unhealthy bin
// and how many there are; flagged is its first unhealthy bin, and start
// that bin or, at low rates, the bin its window says it began in.
type episode struct{ start, end, bad, flagged int }

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
			eps = append(eps, episode{b, b, 1, b})
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
