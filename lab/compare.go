package lab

import (
	"fmt"
	"math"

	"github.com/stormguard/stormguard/sim/result"
)

// DefaultTolerance is the largest Comparison.Error at which the lab and
// the simulator are said to agree: the summed absolute difference of
// their goodput curves, in 1 s windows, at most 15 % of the demand.
// Arrivals are random on both sides (different streams), so even two
// simulations with different seeds differ by a few percent.
const DefaultTolerance = 0.15

// DefaultWindow is the width, in seconds, of the windows in which
// Compare sums goodput: 100 ms bins hold too few requests to compare.
const DefaultWindow = 1.0

// Comparison sets a lab run's goodput beside the simulator's for the same
// scenario.
type Comparison struct {
	// Run is the run's name.
	Run string `json:"run"`
	// WindowS is the width of the windows, in seconds.
	WindowS float64 `json:"window_s"`
	// T is the start of each window, seconds; Demand the lab's demand,
	// Lab and Sim the goodputs and Diff = Lab − Sim, in requests per
	// second, averaged over the window.
	T      []float64 `json:"t"`
	Demand []float64 `json:"demand"`
	Lab    []float64 `json:"lab_goodput"`
	Sim    []float64 `json:"sim_goodput"`
	Diff   []float64 `json:"diff"`
	// MeanAbsDiff is the mean of |Diff|, requests per second.
	MeanAbsDiff float64 `json:"mean_abs_diff"`
	// Error is Σ|Diff| / Σ Demand: 0 when the curves agree, 1 when the
	// difference is as large as the whole demand.
	Error float64 `json:"error"`
	// LabAfter and SimAfter are goodput / demand after the last trigger
	// ended (over the whole run without triggers).
	LabAfter float64 `json:"lab_after"`
	SimAfter float64 `json:"sim_after"`
	// The verdicts of the two runs.
	LabVerdict string `json:"lab_verdict"`
	SimVerdict string `json:"sim_verdict"`
	// Tolerance is the bound on Error; Within reports Error ≤ Tolerance
	// and equal verdicts.
	Tolerance float64 `json:"tolerance"`
	Within    bool    `json:"within"`
	// Inconclusive reports that the lab's run was inconclusive (its host
	// was starved, see Host): the figures above are given for
	// information, the two are not compared, and Within is false.
	// Reason is the lab run's Host.Reason (set by Output.Add).
	Inconclusive bool   `json:"inconclusive"`
	Reason       string `json:"reason,omitempty"`
}

// Compare compares the goodput of a lab run with that of the simulator's
// run of the same scenario, in windows of window seconds (DefaultWindow
// if 0), against DefaultTolerance.
func Compare(labRun, simRun result.Result, window float64) Comparison {
	if window <= 0 {
		window = DefaultWindow
	}
	c := Comparison{Run: labRun.Name, WindowS: window, Tolerance: DefaultTolerance,
		LabVerdict: labRun.Verdict, SimVerdict: simRun.Verdict}
	lg, ld := clientSums(labRun)
	sg, _ := clientSums(simRun)
	per := max(1, int(math.Round(window/labRun.BinS)))
	simPer := max(1, int(math.Round(window/simRun.BinS)))
	n := len(lg) / per
	var sumAbs, sumDemand float64
	for w := range n {
		var l, d, s float64
		for b := w * per; b < (w+1)*per; b++ {
			l += lg[b]
			d += ld[b]
		}
		for b := w * simPer; b < (w+1)*simPer && b < len(sg); b++ {
			s += sg[b]
		}
		l, d, s = l/float64(per), d/float64(per), s/float64(simPer)
		c.T = append(c.T, float64(w)*window)
		c.Demand = append(c.Demand, d)
		c.Lab = append(c.Lab, l)
		c.Sim = append(c.Sim, s)
		c.Diff = append(c.Diff, l-s)
		sumAbs += math.Abs(l - s)
		sumDemand += d
	}
	if n > 0 {
		c.MeanAbsDiff = sumAbs / float64(n)
	}
	if sumDemand > 0 {
		c.Error = sumAbs / sumDemand
	}
	c.LabAfter = afterRatio(labRun)
	c.SimAfter = afterRatio(simRun)
	c.Inconclusive = c.LabVerdict == VerdictInconclusive
	c.Within = !c.Inconclusive && c.Error <= c.Tolerance && c.LabVerdict == c.SimVerdict
	return c
}

// String is the comparison in one line.
func (c Comparison) String() string {
	if c.Inconclusive {
		reason := ""
		if c.Reason != "" {
			reason = " (" + c.Reason + ")"
		}
		return fmt.Sprintf("%s: lab inconclusive%s, sim %s; not compared (for information: goodput after the trigger %.0f%% vs %.0f%% of demand, |lab − sim| %.1f%% of demand)",
			c.Run, reason, c.SimVerdict, 100*c.LabAfter, 100*c.SimAfter, 100*c.Error)
	}
	agree := "within"
	if !c.Within {
		agree = "OUTSIDE"
	}
	return fmt.Sprintf("%s: lab %s, sim %s; goodput after the trigger %.0f%% vs %.0f%% of demand; |lab − sim| = %.1f req/s on average, %.1f%% of demand (%s the %.0f%% tolerance)",
		c.Run, c.LabVerdict, c.SimVerdict, 100*c.LabAfter, 100*c.SimAfter, c.MeanAbsDiff, 100*c.Error, agree, 100*c.Tolerance)
}

// clientSums returns goodput and demand per bin, all clients together.
func clientSums(r result.Result) (goodput, demand []float64) {
	for _, c := range r.Clients {
		for b, bin := range c.Bins {
			if b >= len(goodput) {
				goodput = append(goodput, 0)
				demand = append(demand, 0)
			}
			goodput[b] += bin.Goodput
			demand[b] += bin.Demand
		}
	}
	return goodput, demand
}

// AfterTrigger returns the start of the "after" stretch of r (the end of
// its last trigger, 0 without triggers) and goodput / demand over the
// bins that start there or later.
func AfterTrigger(r result.Result) (from, ratio float64) {
	for _, t := range r.TriggerS {
		from = max(from, t[1])
	}
	return from, ratioFrom(r, from)
}

// AfterRecovery returns goodput / demand from the recovery on (the end of
// the last trigger plus RecoveryS) to the end of the run, or NaN when r
// never recovered.
func AfterRecovery(r result.Result) float64 {
	if r.RecoveryS == nil {
		return math.NaN()
	}
	from, _ := AfterTrigger(r)
	return ratioFrom(r, from+*r.RecoveryS)
}

func afterRatio(r result.Result) float64 {
	_, ratio := AfterTrigger(r)
	return ratio
}

// ratioFrom is goodput / demand over the bins that start at from seconds
// or later.
func ratioFrom(r result.Result, from float64) float64 {
	g, d := clientSums(r)
	var sg, sd float64
	for b := range g {
		if float64(b)*r.BinS >= from-1e-9 {
			sg += g[b]
			sd += d[b]
		}
	}
	if sd == 0 {
		return 0
	}
	return sg / sd
}
