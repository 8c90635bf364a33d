package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/stormguard/stormguard/sweep/plan"
)

// SweepSummary is the handful of numbers that tell one run's sweep: the
// command line and the HTML report show the same ones.
type SweepSummary struct {
	Name     string  // the run's
	Capacity float64 // estimated, requests/s; 0 when unknown
	// Ramp and Phase are the run's results (nil when skipped).
	Ramp  *plan.Ramp
	Phase *plan.Phase
	// MetastableFrom is the lowest load at which a trigger up to the
	// largest tried left the system metastable; nil when none did.
	MetastableFrom *float64
	// OverloadFrom is the lowest load that was metastable without a
	// trigger; nil when none was.
	OverloadFrom *float64
	// Tips lists the columns where a trigger tipped the system and the
	// load alone did not, by load.
	Tips []plan.Column
}

// SummarizeSweep computes a run's SweepSummary.
func SummarizeSweep(r plan.RunResult) SweepSummary {
	s := SweepSummary{Name: r.Name, Capacity: r.Capacity, Ramp: r.Ramp, Phase: r.Phase}
	if r.Phase == nil {
		return s
	}
	for _, c := range r.Phase.Columns {
		if c.Tips == nil {
			continue
		}
		if s.MetastableFrom == nil {
			s.MetastableFrom = sweepPtr(c.Load)
		}
		if c.Overloaded() {
			if s.OverloadFrom == nil {
				s.OverloadFrom = sweepPtr(c.Load)
			}
			continue
		}
		s.Tips = append(s.Tips, c)
	}
	return s
}

// CollapseText is the collapse threshold for people: "310/s", "none up to
// 380/s", or "-" when there was no ramp.
func (s SweepSummary) CollapseText() string {
	switch {
	case s.Ramp == nil:
		return "-"
	case s.Ramp.Collapse == nil:
		return "none up to " + sweepRate(s.Ramp.To)
	}
	return sweepRate(*s.Ramp.Collapse)
}

// RecoveryText is the recovery threshold: "130/s", "not down to 70/s", or
// "-" when there was no collapse to recover from.
func (s SweepSummary) RecoveryText() string {
	switch {
	case s.Ramp == nil || s.Ramp.Collapse == nil:
		return "-"
	case s.Ramp.Recovery == nil:
		return "not down to " + sweepRate(s.Ramp.From)
	}
	return sweepRate(*s.Ramp.Recovery)
}

// MetastableText is where the phase search found metastability: "160/s",
// "none up to 300/s", or "-" when there was no phase search.
func (s SweepSummary) MetastableText() string {
	switch {
	case s.Phase == nil || len(s.Phase.Columns) == 0:
		return "-"
	case s.MetastableFrom == nil:
		return "none up to " + sweepRate(s.Phase.Columns[len(s.Phase.Columns)-1].Load)
	}
	return sweepRate(*s.MetastableFrom)
}

// TipsText is the smallest trigger that tips the system, at the lowest and
// the highest load where a trigger was needed: "1.6 s at 160/s … 0.9 s at
// 300/s", "none up to 40 s", or "no trigger needed from 300/s".
func (s SweepSummary) TipsText() string {
	switch {
	case s.Phase == nil || len(s.Phase.Columns) == 0:
		return "-"
	case len(s.Tips) == 0 && s.OverloadFrom != nil:
		return "no trigger needed from " + sweepRate(*s.OverloadFrom)
	case len(s.Tips) == 0:
		return "none up to " + s.Phase.SizeText(s.Phase.Max)
	}
	at := func(c plan.Column) string { return s.Phase.SizeText(*c.Tips) + " at " + sweepRate(c.Load) }
	lo, hi := s.Tips[0], s.Tips[len(s.Tips)-1]
	if len(s.Tips) == 1 {
		return at(lo)
	}
	return at(lo) + " … " + at(hi)
}

// sweepSizeOrNone writes a column's threshold: the size, or "none ≤ MAX".
func sweepSizeOrNone(ph *plan.Phase, v *float64) string {
	if v == nil {
		return "none ≤ " + ph.SizeText(ph.Max)
	}
	return ph.SizeText(*v)
}

// SweepAdvice says in a few sentences what to change, from the runs of a
// sweep and what each run changes in the base scenario:
//
//   - a run that a trigger tips over, next to one that nothing tips: ship
//     what the second changes;
//   - a run with a hysteresis loop: how far load must fall to come back
//     (its recovery threshold), and how big a trigger tips it;
//   - no run tipped: try larger triggers or higher loads.
//
// The answers to the runbook questions follow: the runbook that comes
// back first, the capacity to add and how late it may come.
func SweepAdvice(r plan.Result) string {
	if len(r.Runs) == 0 {
		return "There are no runs to compare."
	}
	rb := runbookAdvice(r)
	swept := false
	for _, run := range r.Runs {
		swept = swept || run.Ramp != nil || run.Phase != nil
	}
	if !swept {
		if len(rb) == 0 {
			return "Nothing was swept."
		}
		return strings.Join(rb, " ")
	}
	return strings.Join(append([]string{sweepAdvice(r)}, rb...), " ")
}

// sweepAdvice is the advice of the ramp and the phase search.
func sweepAdvice(r plan.Result) string {
	sums := make([]SweepSummary, len(r.Runs))
	var tipped, safe []int
	for i, run := range r.Runs {
		sums[i] = SummarizeSweep(run)
		if sums[i].vulnerable() {
			tipped = append(tipped, i)
		} else {
			safe = append(safe, i)
		}
	}
	var out []string
	for _, i := range tipped {
		s := sums[i]
		var b strings.Builder
		b.WriteString(s.Name + ": ")
		switch {
		case s.Ramp != nil && s.Ramp.Collapse != nil && s.Ramp.Recovery != nil:
			fmt.Fprintf(&b, "once goodput collapses (at %s on the way up) it comes back only at %s%s or below, so shed load to that (or turn retries off) to recover",
				sweepRate(*s.Ramp.Collapse), sweepRate(*s.Ramp.Recovery), sweepOfCapacity(*s.Ramp.Recovery, s.Capacity))
		case s.Ramp != nil && s.Ramp.Collapse != nil:
			fmt.Fprintf(&b, "once goodput collapses (at %s on the way up) it did not come back even at %s: only removing the retries or the backlog brings it back", sweepRate(*s.Ramp.Collapse), sweepRate(s.Ramp.From))
		default:
			b.WriteString("a trigger leaves it metastable")
		}
		if len(s.Tips) > 0 {
			fmt.Fprintf(&b, "; the smallest %s that tips it over is %s", sweepTriggerNoun(s.Phase, false), strings.ReplaceAll(s.TipsText(), " … ", " and "))
		}
		if s.OverloadFrom != nil {
			fmt.Fprintf(&b, "; at %s and above it tips over with no trigger at all", sweepRate(*s.OverloadFrom))
		}
		b.WriteString(".")
		out = append(out, b.String())
	}
	switch {
	case len(tipped) > 0 && len(safe) > 0:
		best := sums[safe[0]]
		worst := r.Runs[tipped[0]]
		s := fmt.Sprintf("%s did not tip over at any load up to %s with %s up to %s", best.Name, sweepLastLoad(best), sweepTriggerNoun(best.Phase, true), sweepMaxSize(best.Phase))
		if d := diff(r.Runs[safe[0]].Changes, worst.Changes); len(d) > 0 {
			s += ": ship what it changes: " + strings.Join(d, ", ") + "."
		} else if d := diff(worst.Changes, r.Runs[safe[0]].Changes); len(d) > 0 {
			s += ": avoid what " + worst.Name + " changes: " + strings.Join(d, ", ") + "."
		} else {
			s += ": what differs between the runs is what to ship."
		}
		out = append(out, s)
	case len(tipped) > 0:
		out = append(out, "No run is safe: add a retry budget, propagate deadlines and drop expired work (defenses: stormguard), or add capacity, and sweep again.")
	default:
		s := sums[0]
		out = append(out, fmt.Sprintf("No run tipped over (loads up to %s, %s up to %s): try larger triggers (--max) or higher loads (--loads) to find where it does.",
			sweepLastLoad(s), sweepTriggerNoun(s.Phase, true), sweepMaxSize(s.Phase)))
	}
	return strings.Join(out, " ")
}

// vulnerable reports whether the sweep found a metastable state: a
// collapse that did not come straight back, or a phase column that tipped.
func (s SweepSummary) vulnerable() bool {
	if s.MetastableFrom != nil {
		return true
	}
	return s.Ramp != nil && s.Ramp.Collapse != nil && (s.Ramp.Recovery == nil || *s.Ramp.Recovery < *s.Ramp.Collapse)
}

func sweepLastLoad(s SweepSummary) string {
	hi := 0.0
	if s.Ramp != nil {
		hi = s.Ramp.To
	}
	if s.Phase != nil && len(s.Phase.Loads) > 0 {
		hi = math.Max(hi, s.Phase.Loads[len(s.Phase.Loads)-1])
	}
	return sweepRate(hi)
}

// sweepTriggerNoun names a phase search's trigger kind, in the plural if many.
func sweepTriggerNoun(ph *plan.Phase, many bool) string {
	noun := "trigger"
	if ph != nil {
		if n, ok := sweepTriggerNouns[ph.Trigger.Kind]; ok {
			noun = n
		}
	}
	if many {
		return noun + "s"
	}
	return noun
}

var sweepTriggerNouns = map[string]string{
	"outage": "outage", "latency": "latency spike", "capacity": "capacity drop",
	"load": "load spike", "pause": "pause", "errors": "brownout",
	"hang": "hang", "cache-flush": "cache flush",
}

func sweepMaxSize(ph *plan.Phase) string {
	if ph == nil {
		return "-"
	}
	return ph.SizeText(ph.Max)
}

func sweepOfCapacity(load, capacity float64) string {
	if capacity <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%.0f%% of the capacity)", 100*load/capacity)
}

// sweepRate writes a load: "310/s".
func sweepRate(v float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.6g", v), ".") + "/s"
}

func sweepPtr(v float64) *float64 { return &v }
