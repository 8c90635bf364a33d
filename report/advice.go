package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Thresholds above which the advice calls a number high.
const (
	highRetriesPct = 20
	highWastedPct  = 20
)

// Advice says in a sentence or two what to change, from the runs' results
// and, when known, what each run changes in the base scenario (by run name).
// It proposes only what a user can ship (scenario.Shippable): never a
// trigger, a fault rate or the demand, which runs may change to show the
// system under them.
//
//   - Some runs down (metastable or degraded), others not: name the best
//     run that came through — among those that differ from a down one in
//     something a user can ship, the closest to it, then one that did not
//     relapse, then the quickest — and what it changes that can be
//     shipped. When the runs differ only in what a user does not control,
//     say so, and advise from the numbers (below).
//   - Every run down: point at the number that is out of bounds (retries →
//     a budget, wasted work → deadlines and expired drop).
//   - Every run fine: name the slowest recovery and what to try next.
//
// Runs that were not judged (not judged, or the lab's inconclusive) are
// left out and named at the end, with their reason.
func Advice(runs []Summary, changes map[string][]string) string {
	if len(runs) == 0 {
		return "There are no runs to compare."
	}
	var bad, good, unjudged []Summary
	for _, s := range runs {
		switch {
		case s.Healthy():
			good = append(good, s)
		case result.Down(s.Verdict):
			bad = append(bad, s)
		default:
			unjudged = append(unjudged, s)
		}
	}
	var text string
	switch {
	case len(bad) > 0 && len(good) > 0:
		text = adviseBetween(bad, good, changes)
	case len(bad) > 0:
		text = adviseDown(bad, everyDown(bad))
	case len(good) > 0:
		text = adviseFine(good)
	}
	if len(unjudged) == 0 {
		return text
	}
	var names []string
	starved := false
	for _, s := range unjudged {
		names = append(names, fmt.Sprintf("%s (%s)", s.Name, s.Verdict))
		starved = starved || s.Verdict == "inconclusive"
	}
	note := "Not judged: " + strings.Join(names, ", ") + ": the evidence does not decide (see why)"
	if starved {
		note += "; an inconclusive run measured a starved machine: run it again on a quieter one"
	}
	if text == "" {
		return note + "."
	}
	return text + " " + note + "."
}

// adviseBetween advises from runs that ended down and runs that came
// through.
func adviseBetween(bad, good []Summary, changes map[string][]string) string {
	// The run to advise against: the first down one; the run to advise:
	// the closest good one that differs from it in something shippable.
	worst := bad[0]
	ship := func(s Summary) []string { return shippableOnly(diff(changes[s.Name], changes[worst.Name])) }
	best := slices.MinFunc(good, func(a, b Summary) int {
		none := func(s Summary) int {
			if len(ship(s)) == 0 {
				return 1
			}
			return 0
		}
		if c := cmp.Compare(none(a), none(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(len(ship(a)), len(ship(b))); c != 0 {
			return c
		}
		if a.Relapsed != b.Relapsed {
			if a.Relapsed {
				return 1
			}
			return -1
		}
		return cmp.Compare(recovery(a), recovery(b))
	})
	s := fmt.Sprintf("%s %s while %s %s", worst.Name, downText(worst), best.Name, outcome(best))
	if d := ship(best); len(d) > 0 {
		return s + ": ship what it changes: " + strings.Join(d, ", ") + "."
	}
	if d := shippableOnly(diff(changes[worst.Name], changes[best.Name])); len(d) > 0 {
		return s + ": avoid what the run that ended down changes: " + strings.Join(d, ", ") + "."
	}
	own := diff(changes[worst.Name], changes[best.Name])
	if len(own) == 0 {
		own = diff(changes[best.Name], changes[worst.Name])
	}
	if len(own) == 0 {
		return s + ": what differs between the two runs is what to ship."
	}
	return s + ", but they differ only in what the scenario does to the system (" + worst.Name + ": " + strings.Join(own, ", ") +
		"), not in what you can ship. " + adviseDown(bad, "Of the runs that ended down")
}

// downText says how a run ended down.
func downText(s Summary) string {
	if s.Verdict == result.Degraded {
		return "was degraded (below the healthy share before anything happened to it: a steady fault or overload)"
	}
	return "stayed metastable (it had not come back by the end)"
}

// everyDown opens the advice when every judged run ended down.
func everyDown(bad []Summary) string {
	v := bad[0].Verdict
	for _, s := range bad {
		if s.Verdict != v {
			return "Every run ended down (metastable or degraded)"
		}
	}
	if v == result.Degraded {
		return "Every run was degraded"
	}
	return "Every run stayed metastable"
}

// adviseDown advises from the numbers of the runs that ended down: lead
// opens the sentence.
func adviseDown(bad []Summary, lead string) string {
	worst := slices.MaxFunc(bad, func(a, b Summary) int { return cmp.Compare(a.RetriesPct+a.WastedPct, b.RetriesPct+b.WastedPct) })
	var fixes []string
	if worst.RetriesPct >= highRetriesPct {
		fixes = append(fixes, fmt.Sprintf("retries are %.0f%% of the attempts of %s: cap them with a retry budget (the stormguard preset allows about 10%%)", worst.RetriesPct, worst.Name))
	}
	if worst.WastedPct >= highWastedPct {
		fixes = append(fixes, fmt.Sprintf("%.0f%% of the services' work finished after its caller had given up: propagate deadlines and drop expired work (defenses: stormguard)", worst.WastedPct))
	}
	if len(fixes) == 0 {
		fixes = append(fixes, "add a retry budget, propagate deadlines and shed load at the service, or add capacity")
	}
	return lead + ": " + strings.Join(fixes, "; ") + "."
}

// adviseFine advises when every judged run came through.
func adviseFine(good []Summary) string {
	slowest := slices.MaxFunc(good, func(a, b Summary) int { return cmp.Compare(recovery(a), recovery(b)) })
	s := "Every run came through"
	if recovery(slowest) > 0 {
		s += fmt.Sprintf(" (the slowest, %s, %s)", slowest.Name, outcome(slowest))
	}
	if most := slices.MaxFunc(good, func(a, b Summary) int { return cmp.Compare(a.RetriesPct, b.RetriesPct) }); most.RetriesPct >= highRetriesPct {
		return s + fmt.Sprintf(", but retries were %.0f%% of the attempts of %s: a retry budget keeps a longer trigger from tipping it over.", most.RetriesPct, most.Name)
	}
	return s + ": try a longer or larger trigger, or sweep the load, to find where the system tips over."
}

// shippableOnly keeps the changes ("path: value") a user can ship.
func shippableOnly(changes []string) []string {
	var out []string
	for _, c := range changes {
		path, _, _ := strings.Cut(c, ":")
		if scenario.Shippable(strings.TrimSpace(path)) {
			out = append(out, c)
		}
	}
	return out
}

// recovery orders runs: stable first, then by recovery time.
func recovery(s Summary) float64 {
	if s.RecoveryS == nil || s.Verdict == result.Stable {
		return 0
	}
	return *s.RecoveryS
}

func outcome(s Summary) string {
	if s.Verdict == result.Stable || s.RecoveryS == nil {
		return "stayed " + s.Verdict
	}
	return "recovered " + s.RecoveryText()
}

// diff returns the entries of a that are not in b.
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
