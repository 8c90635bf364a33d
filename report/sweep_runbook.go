package report

import (
	"fmt"
	"strings"

	"github.com/stormguard/stormguard/sweep/plan"
)

// The runbook questions of a sweep, as the command line and the HTML
// report show them: one sentence that says what was searched, and a row
// of text per run.

// CapacityRow is one run's answer to the capacity question.
type CapacityRow struct {
	Run string
	// Factor: the smallest factor that brought it back ("2×", "none up to
	// 4×", "1× (no capacity needed)"); Stuck: the largest factor tried
	// that left it metastable ("1.95×", "-"); Recovery: sim's recovery
	// at Factor ("167 s", "-").
	Factor, Stuck, Recovery string
	Class                   string // metastable when no factor did, else recovered
}

// LatestRow is one run's answer to the latest-time question.
type LatestRow struct {
	Run string
	// Latest: the latest time tried at which the factor brought it back
	// ("50 s", "too late even at 30 s", "not needed"); StuckFrom: the
	// earliest time tried after which it stayed stuck; Recovery: sim's
	// recovery when added at Latest.
	Latest, StuckFrom, Recovery string
	Class                       string
}

// CompareText is one row of the comparison of runbooks, best first.
type CompareText struct {
	Rank int
	Run  string
	// Verdicts: "5 recovered", "3 recovered, 2 metastable"; Median and
	// Worst: the time to recover ("130 s", "never"); Relapsed: "2 of 5";
	// Recovery: the median of sim's recovery_s.
	Verdicts, Median, Worst, Relapsed, Recovery string
	Class                                       string // the badge: stable, recovered or metastable
}

// sweepSeconds writes seconds briefly: "130 s", "0.5 s".
func sweepSeconds(v float64) string { return sweepNum(v) + " s" }

func sweepSecondsOr(v *float64, none string) string {
	if v == nil {
		return none
	}
	return sweepSeconds(*v)
}

func factorText(f float64) string { return sweepNum(f) + "×" }

// CapacityQuestion says what the capacity search did, from the first run
// that asked it ("" when none did).
func CapacityQuestion(r plan.Result) string {
	for _, run := range r.Runs {
		if c := run.AddCapacity; c != nil {
			return fmt.Sprintf("Capacity to add at %s: the smallest factor of %s's capacity (a capacity action at %s, replacing the run's own capacity steps on it) with which the run is no longer metastable at its end, bisected from %s to %s to within %s.",
				sweepSeconds(c.AtS), run.Target, sweepSeconds(c.AtS), factorText(c.Min), factorText(c.Max), factorText(c.Resolution))
		}
	}
	return ""
}

// CapacityRows lists the runs' answers to the capacity question.
func CapacityRows(r plan.Result) []CapacityRow {
	var out []CapacityRow
	for _, run := range r.Runs {
		c := run.AddCapacity
		if c == nil {
			continue
		}
		row := CapacityRow{Run: run.Name, Stuck: "-", Recovery: "-", Class: "recovered"}
		stuck := 0.0
		for _, p := range c.Probes {
			if p.Verdict == "metastable" && p.Size > stuck {
				stuck = p.Size
				row.Stuck = factorText(p.Size)
			}
			if c.Factor != nil && p.Size == *c.Factor {
				row.Recovery = sweepSecondsOr(p.RecoveryS, "-")
			}
		}
		switch {
		case c.Factor == nil:
			row.Factor, row.Class = "none up to "+factorText(c.Max), "metastable"
		case *c.Factor == c.Min:
			row.Factor, row.Class = "1× (recovers without)", "stable"
		default:
			row.Factor = factorText(*c.Factor)
		}
		out = append(out, row)
	}
	return out
}

// LatestQuestion says what the latest-time search did ("" when not asked).
func LatestQuestion(r plan.Result) string {
	for _, run := range r.Runs {
		if l := run.Latest; l != nil {
			return fmt.Sprintf("Latest time to add capacity: the latest time at which setting %s's capacity to %s (a capacity action, replacing the run's own capacity steps on it) still brings the run back by its end, bisected from %s (the end of the trigger) to %s (the end of the run) to within %s.",
				run.Target, factorText(l.Factor), sweepSeconds(l.FromS), sweepSeconds(l.ToS), sweepSeconds(l.ResolutionS))
		}
	}
	return ""
}

// LatestRows lists the runs' answers to the latest-time question.
func LatestRows(r plan.Result) []LatestRow {
	var out []LatestRow
	for _, run := range r.Runs {
		l := run.Latest
		if l == nil {
			continue
		}
		row := LatestRow{Run: run.Name, StuckFrom: "-", Recovery: "-", Class: "recovered"}
		// The earliest time tried after the latest one that stayed stuck.
		first := -1.0
		for _, p := range l.Probes {
			if l.LatestS != nil && p.Size == *l.LatestS {
				row.Recovery = sweepSecondsOr(p.RecoveryS, "-")
			}
			if p.Verdict == "metastable" && (l.LatestS == nil || p.Size > *l.LatestS) && (first < 0 || p.Size < first) {
				first = p.Size
			}
		}
		if first >= 0 {
			row.StuckFrom = sweepSeconds(first)
		}
		switch {
		case l.Unneeded:
			row.Latest, row.Class = "not needed (recovers without)", "stable"
		case l.LatestS == nil:
			row.Latest, row.Class = "too late even at "+sweepSeconds(l.FromS), "metastable"
		default:
			row.Latest = sweepSeconds(*l.LatestS)
		}
		out = append(out, row)
	}
	return out
}

// CompareQuestion says how the runbooks were compared ("" when not asked).
func CompareQuestion(r plan.Result) string {
	if r.Compare == nil {
		return ""
	}
	return fmt.Sprintf("Runbooks compared: every run with %d seeds (its own and the next ones), ranked by the seeds that recovered, then the median and the worst time to recover (from the incident's start, the first trigger, until requests succeeded again for good), then fewer relapses (came back, then collapsed again).",
		r.Compare.Seeds)
}

// CompareRows lists the comparison, best first.
func CompareRows(r plan.Result) []CompareText {
	if r.Compare == nil {
		return nil
	}
	var out []CompareText
	for i, row := range r.Compare.Rows {
		var v []string
		for _, c := range []struct {
			n    int
			word string
		}{{row.Stable, "stable"}, {row.Recovered, "recovered"}, {row.Metastable, "metastable"}} {
			if c.n > 0 {
				v = append(v, fmt.Sprintf("%d %s", c.n, c.word))
			}
		}
		class := "recovered"
		switch {
		case row.Metastable > 0:
			class = "metastable"
		case row.Recovered == 0:
			class = "stable"
		}
		out = append(out, CompareText{Rank: i + 1, Run: row.Run, Verdicts: strings.Join(v, ", "),
			Median: sweepSecondsOr(row.MedianS, "never"), Worst: sweepSecondsOr(row.WorstS, "never"),
			Relapsed: fmt.Sprintf("%d of %d", row.Relapses, len(row.Outcomes)),
			Recovery: sweepSecondsOr(row.MedianRecoveryS, "never"), Class: class})
	}
	return out
}

// runbookAdvice says what the runbook answers mean, one sentence each.
func runbookAdvice(r plan.Result) []string {
	var out []string
	if rows := CompareRows(r); len(rows) > 0 {
		best := rows[0]
		s := fmt.Sprintf("Of the runbooks, %s comes back first (%s, median %s after the incident began)", best.Run, best.Verdicts, best.Median)
		if best.Median == "never" {
			s = fmt.Sprintf("No runbook brings it back in most seeds (the best, %s: %s)", best.Run, best.Verdicts)
		}
		if len(rows) > 1 && rows[1].Median == best.Median && r.Compare.Rows[1].Relapses > r.Compare.Rows[0].Relapses {
			s += fmt.Sprintf("; %s is back as soon but relapsed in %s seeds", rows[1].Run, rows[1].Relapsed)
		}
		out = append(out, s+".")
	}
	// What each run needs, in one sentence; runs that need the same are
	// named together.
	need := map[string][]string{}
	var order []string
	say := func(run, text string) {
		if _, ok := need[text]; !ok {
			order = append(order, text)
		}
		need[text] = append(need[text], run)
	}
	caps, lates := CapacityRows(r), LatestRows(r)
	for _, run := range r.Runs {
		var parts []string
		for _, row := range caps {
			if row.Run != run.Name {
				continue
			}
			at := sweepSeconds(run.AddCapacity.AtS)
			switch row.Class {
			case "metastable":
				parts = append(parts, fmt.Sprintf("no capacity up to %s added at %s brings it back: take load away (shed, pause, retries off) first", factorText(run.AddCapacity.Max), at))
			case "recovered":
				parts = append(parts, fmt.Sprintf("add at least %s capacity at %s (%s stays stuck)", row.Factor, at, row.Stuck))
			}
		}
		for _, row := range lates {
			if row.Run == run.Name && row.Class == "recovered" {
				parts = append(parts, fmt.Sprintf("%s capacity must come by %s (at %s it stays stuck)", factorText(run.Latest.Factor), row.Latest, row.StuckFrom))
			}
		}
		if len(parts) > 0 {
			say(run.Name, strings.Join(parts, "; "))
		}
	}
	for _, text := range order {
		out = append(out, strings.Join(need[text], ", ")+": "+text+".")
	}
	return out
}
