package report

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/stormguard/stormguard/sweep/plan"
)

// sweepRunbookChart draws, for each run that answered a runbook search,
// the recovery of every run of the search against what it varied: the
// capacity factor added (capacity), or the time it was added (latest).
// A run that stayed metastable sits on the "never" line at the top.
func sweepRunbookChart(r plan.Result, latest bool) (png, svg []byte, err error) {
	var plots []*plot.Plot
	var leg sweepLegend
	for _, run := range r.Runs {
		var probes []plan.Probe
		var answer *float64
		var title, xlabel, answerText string
		switch {
		case !latest && run.AddCapacity != nil:
			c := run.AddCapacity
			probes, answer = c.Probes, c.Factor
			title = fmt.Sprintf("%s: capacity set at %s", run.Name, sweepSeconds(c.AtS))
			xlabel = run.Target + ": capacity factor added (×)"
			if answer != nil {
				answerText = "recovers from " + factorText(*answer)
			}
		case latest && run.Latest != nil:
			l := run.Latest
			probes, answer = l.Probes, l.LatestS
			title = fmt.Sprintf("%s: when %s capacity comes", run.Name, factorText(l.Factor))
			xlabel = run.Target + ": time the capacity is set (s)"
			if answer != nil {
				answerText = "latest " + sweepSeconds(*answer)
			}
		default:
			continue
		}
		p, err := sweepRunbookPanel(title, xlabel, probes, answer, answerText, &leg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", run.Name, err)
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil, nil, nil
	}
	return sweepFigure(plots, leg)
}

func sweepRunbookPanel(title, xlabel string, probes []plan.Probe, answer *float64, answerText string, leg *sweepLegend) (*plot.Plot, error) {
	p := newSweepPlot(title)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "recovery_s (s), as sim reports it"
	probes = slices.Clone(probes)
	slices.SortFunc(probes, func(a, b plan.Probe) int { return cmpFloat(a.Size, b.Size) })
	top := 10.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pr := range probes {
		if pr.RecoveryS != nil {
			top = math.Max(top, *pr.RecoveryS)
		}
		lo, hi = math.Min(lo, pr.Size), math.Max(hi, pr.Size)
	}
	never := top * 1.15
	p.Y.Min, p.Y.Max = 0, never*1.1
	if lo >= hi {
		lo, hi = lo-1, hi+1
	}
	pad := (hi - lo) * 0.04
	p.X.Min, p.X.Max = lo-pad, hi+pad

	nl, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: never}, {X: p.X.Max, Y: never}})
	if err != nil {
		return p, err
	}
	nl.LineStyle = draw.LineStyle{Color: sweepPale(sweepVerdictColours["metastable"], 0.6), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	p.Add(nl)
	leg.Add("never recovers (metastable)", nl)
	if err := sweepLabels(p, []sweepThreshold{{p.X.Min, "never", sweepVerdictColours["metastable"], false}}, never*1.07); err != nil {
		return p, err
	}

	var back plotter.XYs
	var xys plotter.XYs
	var verdicts []string
	for _, pr := range probes {
		y := never
		if pr.RecoveryS != nil {
			y = *pr.RecoveryS
			back = append(back, plotter.XY{X: pr.Size, Y: y})
		}
		xys = append(xys, plotter.XY{X: finite(pr.Size), Y: finite(y)})
		verdicts = append(verdicts, pr.Verdict)
	}
	if len(back) > 1 {
		l, err := plotter.NewLine(back)
		if err != nil {
			return p, err
		}
		l.LineStyle = draw.LineStyle{Color: sweepPale(sweepVerdictColours["recovered"], 0.5), Width: vg.Points(1)}
		p.Add(l)
	}
	if answer != nil {
		l := sweepVLine(*answer, p.Y.Max, sweepRecoveryColour, 1.4, []vg.Length{vg.Points(5), vg.Points(3)})
		p.Add(l)
		leg.Add("the answer of the bisection", l)
		if err := sweepLabels(p, []sweepThreshold{{*answer, answerText, sweepRecoveryColour, false}}, never*0.95); err != nil {
			return p, err
		}
	}
	if len(xys) > 0 {
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return p, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: palette["demand"], Radius: vg.Points(3), Shape: sweepProbeGlyph{}}
		sc.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			g := sc.GlyphStyle
			if c, ok := sweepVerdictColours[verdicts[i]]; ok {
				g.Color = c
			}
			return g
		}
		p.Add(sc)
		leg.Add("a simulated run (its verdict)", sc)
	}
	return p, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
