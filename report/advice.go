package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Thresholds above which the advice calls a number high.
const (
	highRetriesPct = 20
	highWastedPct  = 20
)

// Advice says in a sentence or two what to change, from the runs' results
// and, when known, what each run changes in the base scenario (by run name).
//
//   - Some runs metastable, others not: name the best run that recovered
//     (the closest to a metastable one, then one that did not relapse, then
//     the quickest) and what it changes compared with a metastable one.
//   - Every run metastable: point at the number that is out of bounds
//     (retries → a budget, wasted work → deadlines and expired drop).
//   - Every run fine: name the slowest recovery and what to try next.
func Advice(runs []Summary, changes map[string][]string) string {
	if len(runs) == 0 {
		return "There are no runs to compare."
	}
	var bad, good []Summary
	for _, s := range runs {
		if s.Healthy() {
			good = append(good, s)
		} else {
			bad = append(bad, s)
		}
	}
	switch {
	case len(bad) > 0 && len(good) > 0:
		worst := bad[0]
		best := slices.MinFunc(good, func(a, b Summary) int {
			// Prefer the run that differs least from the metastable one
			// (the same sweep value), then one that did not relapse, then
			// the quickest to recover.
			if c := cmp.Compare(len(diff(changes[a.Name], changes[worst.Name])), len(diff(changes[b.Name], changes[worst.Name]))); c != 0 {
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
		s := fmt.Sprintf("%s stayed metastable (goodput never came back after the trigger) while %s %s", worst.Name, best.Name, outcome(best))
		if d := diff(changes[best.Name], changes[worst.Name]); len(d) > 0 {
			return s + ": ship what it changes: " + strings.Join(d, ", ") + "."
		}
		if d := diff(changes[worst.Name], changes[best.Name]); len(d) > 0 {
			return s + ": avoid what the metastable run changes: " + strings.Join(d, ", ") + "."
		}
		return s + ": what differs between the two runs is what to ship."
	case len(bad) > 0:
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
		return "Every run stayed metastable: " + strings.Join(fixes, "; ") + "."
	}
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

// recovery orders runs: stable first, then by recovery time.
func recovery(s Summary) float64 {
	if s.RecoveryS == nil || s.Verdict == "stable" {
		return 0
	}
	return *s.RecoveryS
}

func outcome(s Summary) string {
	if s.Verdict == "stable" || s.RecoveryS == nil {
		return "stayed " + s.Verdict
	}
	return fmt.Sprintf("recovered in %.1f s", *s.RecoveryS)
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
