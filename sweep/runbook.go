package sweep

import (
	"fmt"
	"math"
	"slices"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep/plan"
)

// The runbook questions' searches (their plans, and what each asks, are
// package plan's; see plan/runbook.go): each is a bisection over the
// simulator's verdict, or one run per seed.

// runCapacity bisects the capacity question of a run.
func runCapacity(rp RunPlan, simulate simulateFunc) (CapacitySearch, error) {
	cs := CapacitySearch{CapacityPlan: *rp.AddCapacity}
	at := plan.Seconds(cs.AtS)
	memo := map[int]Probe{}
	recovers := func(k int) (bool, error) {
		f := cs.Size(k)
		res, err := simulate(rp.CapacityScenario(at, f), fmt.Sprintf("%s/capacity-at=%s/factor=%s", rp.Name, plan.FormatDuration(at), plan.FormatNumber(f)))
		if err != nil {
			return false, err
		}
		cs.Simulations++
		cs.VirtualS += res.DurationS
		memo[k] = Probe{Size: f, Verdict: res.Verdict, RecoveryS: res.RecoveryS}
		return !result.Down(res.Verdict), nil
	}
	k, ok, err := Bisect(cs.Sizes(), recovers)
	if ok {
		f := cs.Size(k)
		cs.Factor = &f
	}
	cs.Probes = sorted(memo)
	return cs, err
}

// runLatest bisects the latest-time question of a run: the first time at
// which the run stays stuck, and the one before it.
func runLatest(rp RunPlan, simulate simulateFunc) (LatestSearch, error) {
	ls := LatestSearch{LatestPlan: *rp.Latest}
	memo := map[int]Probe{}
	stuck := func(k int) (bool, error) {
		t := ls.Size(k)
		res, err := simulate(rp.CapacityScenario(plan.Seconds(t), ls.Factor), fmt.Sprintf("%s/capacity=%s/at=%s", rp.Name, plan.FormatNumber(ls.Factor), plan.FormatDuration(plan.Seconds(t))))
		if err != nil {
			return false, err
		}
		ls.Simulations++
		ls.VirtualS += res.DurationS
		memo[k] = Probe{Size: t, Verdict: res.Verdict, RecoveryS: res.RecoveryS}
		return result.Down(res.Verdict), nil
	}
	k, ok, err := Bisect(ls.Sizes(), stuck)
	switch {
	case err != nil:
	case !ok:
		ls.Unneeded = true
	case k > 0:
		t := ls.Size(k - 1)
		ls.LatestS = &t
	}
	ls.Probes = sorted(memo)
	return ls, err
}

// runCompareSeed runs one run of the comparison: the run with its seed +
// k.
func runCompareSeed(rp RunPlan, k int, simulate simulateFunc) (SeedRun, error) {
	s := rp.SeedScenario(k)
	res, err := simulate(s, fmt.Sprintf("%s/seed=%d", rp.Name, s.Seed))
	if err != nil {
		return SeedRun{}, err
	}
	out := SeedRun{Seed: s.Seed, Verdict: res.Verdict, RecoveryS: res.RecoveryS, CollapseS: res.CollapseS, VirtualS: res.DurationS}
	out.ToRecoverS = toRecover(res, s)
	out.Relapsed = relapsed(res, s)
	return out, nil
}

// toRecover is the comparison's time to recover: from the start of the
// incident — the run's first trigger, or the collapse the verdict reports
// when that began earlier (or the run has no trigger) — until the run was
// back for good, when the verdict says requests succeeded again. 0 when
// stable, nil when metastable.
//
// sim's recovery_s counts from the end of the last trigger, or from the
// collapse's start when the run came back before the trigger ended or
// collapsed after it: runs of one file that come back at the same moment
// can then differ in recovery_s, and a run that relapses counts from its
// relapse. The comparison counts every run from the same start.
func toRecover(r result.Result, s scenario.Scenario) *float64 {
	if r.RecoveryS == nil {
		return nil
	}
	if r.CollapseS == nil {
		zero := 0.0
		return &zero
	}
	back := recoveredAt(r, s)
	start := *r.CollapseS
	for _, t := range r.TriggerS {
		start = math.Min(start, t[0])
	}
	d := math.Max(0, back-start)
	return &d
}

// recoveredAt is when the verdict says a recovered run was back
// (result.Result.RecoveredS).
func recoveredAt(r result.Result, _ scenario.Scenario) float64 {
	if r.RecoveredS == nil {
		return *r.CollapseS + *r.RecoveryS
	}
	return *r.RecoveredS
}

// relapsed reports whether the run had collapsed and come back before the
// collapse its verdict reports: the verdict of the run up to that
// collapse's start is not stable.
func relapsed(r result.Result, s scenario.Scenario) bool {
	if r.CollapseS == nil || *r.CollapseS <= 0 {
		return false
	}
	before := r
	before.DurationS = *r.CollapseS
	// Judge sets the parts' verdicts too: not r's.
	before.Clients, before.Services = slices.Clone(r.Clients), slices.Clone(r.Services)
	result.Judge(&before, s)
	return before.Verdict != "stable"
}
