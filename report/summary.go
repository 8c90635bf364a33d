package report

import (
	"fmt"
	"math"

	"github.com/stormguard/stormguard/sim/result"
)

// Summary is the handful of numbers that tell one run's story; the command
// line table and the HTML report show the same ones.
type Summary struct {
	Name    string
	Verdict string
	// RecoveryS as in result.Result: nil when the run never recovered;
	// RecoveryFrom what it counts from (result.Result.RecoveryFrom).
	RecoveryS    *float64
	RecoveryFrom string
	Why          string
	// Relapsed: the run came back and collapsed again in the incident its
	// verdict judged (result.Result.FirstCollapseS before CollapseS).
	Relapsed bool
	// AfterS is when the "after" rates start: the end of the last trigger
	// (0 without triggers, or when no bin starts after it).
	AfterS float64
	// Demand and Goodput are requests per second, all clients together,
	// averaged over the bins that start at or after AfterS.
	Demand, Goodput float64
	// RetriesPct is the share of attempts that were retries, in percent,
	// at the hop where it is highest: the clients' attempts together, or
	// the attempts arriving at one service (which counts the retries of
	// the services that call it, invisible at the clients when a middle
	// tier retries on their behalf).
	RetriesPct float64
	// WastedPct is the share of completed work at the services whose
	// caller was no longer waiting, in percent.
	WastedPct float64
	// GaveUp counts requests that ended in failure; TopReason is the reason
	// most of them stopped for (attempts, budget, deadline, not-retryable,
	// server-stop or disabled: the fields of result.GiveUps), TopCount how many.
	GaveUp    float64
	TopReason string
	TopCount  float64
}

// reasonNames are the short names of the give-up reasons, in the order of
// the fields of result.GiveUps.
var reasonNames = [...]string{"attempts", "budget", "deadline", "not-retryable", "server-stop", "disabled", "declined", "breaker"}

// Summarize computes a run's Summary from its Result.
func Summarize(r result.Result) Summary {
	s := Summary{Name: r.Name, Verdict: r.Verdict, RecoveryS: r.RecoveryS, RecoveryFrom: r.RecoveryFrom, Why: r.Why,
		Relapsed: r.FirstCollapseS != nil && r.CollapseS != nil && *r.FirstCollapseS < *r.CollapseS}
	for _, t := range r.TriggerS {
		s.AfterS = max(s.AfterS, t[1])
	}
	var bins int
	for _, c := range r.Clients {
		n := 0
		for b := range c.Each() {
			if b.T >= s.AfterS {
				s.Demand += finite(b.Demand)
				s.Goodput += finite(b.Goodput)
				n++
			}
		}
		bins = max(bins, n)
	}
	if bins == 0 && s.AfterS > 0 {
		// The trigger lasts to the end: average over the whole run.
		s.AfterS = 0
		for _, c := range r.Clients {
			n := 0
			for b := range c.Each() {
				s.Demand += finite(b.Demand)
				s.Goodput += finite(b.Goodput)
				n++
			}
			bins = max(bins, n)
		}
	}
	if bins > 0 {
		s.Demand /= float64(bins)
		s.Goodput /= float64(bins)
	}
	var attempts, retries int64
	var reasons [len(reasonNames)]float64
	for _, c := range r.Clients {
		attempts += c.Total.Attempts
		retries += c.Total.Retries
		g := c.Total.GaveUp
		for i, v := range [...]float64{g.Attempts, g.Budget, g.Deadline, g.NotRetryable, g.ServerStop, g.Disabled, g.Declined, g.BreakerOpen} {
			reasons[i] += v
			s.GaveUp += v
		}
	}
	s.RetriesPct = pct(float64(retries), float64(attempts))
	for _, v := range r.Services {
		var first, again float64
		for b := range v.Each() {
			first += finite(b.OfferedFirst)
			again += finite(b.OfferedRetries)
		}
		s.RetriesPct = max(s.RetriesPct, pct(again, first+again))
	}
	for i, v := range reasons {
		if v > s.TopCount {
			s.TopReason, s.TopCount = reasonNames[i], v
		}
	}
	var completed, wasted int64
	for _, v := range r.Services {
		completed += v.Total.Completed
		wasted += v.Total.Wasted
	}
	s.WastedPct = pct(float64(wasted), float64(completed))
	return s
}

// Healthy reports whether the run ended well: stable or recovered.
func (s Summary) Healthy() bool { return s.Verdict == result.Stable || s.Verdict == result.Recovered }

// RecoveryText is the recovery time for people, with what it counts from:
// "2.0 s after the trigger", "9.0 s after the collapse" (a collapse that
// began after the trigger, or with none, or that ended while the trigger
// lasted), "126.0 s after the first collapse" (a relapse); "never" for a
// run that ended down, "-" when there was nothing to recover from or the
// run was not judged.
func (s Summary) RecoveryText() string {
	switch {
	case s.Verdict == result.Stable || !result.Judged(s.Verdict):
		return "-"
	case s.RecoveryS == nil:
		return "never"
	}
	from := map[string]string{"trigger": " after the trigger", "collapse": " after the collapse", "first-collapse": " after the first collapse"}[s.RecoveryFrom]
	return fmt.Sprintf("%.1f s%s", *s.RecoveryS, from)
}

// GaveUpText is the failed requests and their top reason: "2714 (budget)".
func (s Summary) GaveUpText() string {
	if s.GaveUp == 0 {
		return "0"
	}
	return fmt.Sprintf("%.0f (%s)", s.GaveUp, s.TopReason)
}

func pct(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part / whole
}

// finite maps NaN and infinities to 0, so one bad bin cannot poison a mean.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// Parts is the verdicts of every run's clients and services, as a table:
// a column per client and service (in the order they first appear), a
// row per run, "-" where a run has no such part.
type Parts struct {
	// Columns: "client NAME" or "service NAME".
	Columns []string
	Rows    []PartsRow
}

// PartsRow is one run's row of Parts.
type PartsRow struct {
	Run   string
	Cells []string
}

// PartsTable builds the Parts of runs.
func PartsTable(runs []result.Result) Parts {
	var p Parts
	col := map[string]int{}
	add := func(name string) {
		if _, ok := col[name]; !ok {
			col[name] = len(p.Columns)
			p.Columns = append(p.Columns, name)
		}
	}
	for _, r := range runs {
		for _, c := range r.Clients {
			add("client " + c.Name)
		}
	}
	for _, r := range runs {
		for _, v := range r.Services {
			add("service " + v.Name)
		}
	}
	for _, r := range runs {
		row := PartsRow{Run: r.Name, Cells: make([]string, len(p.Columns))}
		for i := range row.Cells {
			row.Cells[i] = "-"
		}
		for _, c := range r.Clients {
			row.Cells[col["client "+c.Name]] = partText(c.Judgement)
		}
		for _, v := range r.Services {
			row.Cells[col["service "+v.Name]] = partText(v.Judgement)
		}
		p.Rows = append(p.Rows, row)
	}
	return p
}

// partText is a part's verdict in a cell: the verdict, and for a
// recovered part its recovery ("recovered 2.0 s").
func partText(j result.Judgement) string {
	switch {
	case j.Verdict == "":
		return "-"
	case j.Verdict == result.Recovered && j.RecoveryS != nil:
		return fmt.Sprintf("recovered %.1f s", *j.RecoveryS)
	}
	return j.Verdict
}
