package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/stormguard/stormguard/analyze"
)

// The analyze charts' colours, from the one palette: the worst case is
// drawn as retries are in the sim charts (orange), the budget-limited
// figure as first tries (blue: within a budget nearly every attempt is a
// first try), the figure at the configured error rates as throughput. The
// regions and thresholds take the verdict colours of the sweep's phase
// diagram: stable green, vulnerable pale red (the sweep's bistable band),
// metastable red; collapse red, recovery blue.
var (
	analyzeWorstColour    = palette["offered_retries"]
	analyzeBudgetColour   = palette["offered_first"]
	analyzeExpectedColour = palette["throughput"]
)

// analyzeVulnerablePale is how much of the metastable colour the
// vulnerable region keeps (0.3 for the metastable region itself).
const analyzeVulnerablePale = 0.16

// analyzeMaxBars bounds the paths of an amplification panel: the ones
// with the highest worst case are kept.
const analyzeMaxBars = 12

// analyzeAmplificationChart draws, for each run, the worst-case and the
// budget-limited amplification of every dependency path.
func analyzeAmplificationChart(r analyze.Report) (png, svg []byte, err error) {
	var plots []*plot.Plot
	var leg sweepLegend
	rows := 0
	// One scale for every panel, so that runs compare at a glance: log
	// when any run's figures span more than 4×, and the same range.
	top := 1.0
	for _, a := range r.Analyses {
		if len(a.Paths) > 0 {
			top = max(top, analyzeAmplificationTop(a))
		}
	}
	for _, a := range r.Analyses {
		if len(a.Paths) == 0 {
			continue
		}
		p, n, err := analyzeAmplificationPanel(a, top, &leg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a.Run, err)
		}
		plots = append(plots, p)
		rows = max(rows, n)
	}
	if len(plots) == 0 {
		return nil, nil, nil
	}
	return analyzeFigure(plots, leg, analyzeBarRowHeight(rows))
}

// analyzeBarRowHeight is the height of a panel of n horizontal bar groups.
func analyzeBarRowHeight(n int) vg.Length {
	return 1.8*vg.Inch + vg.Length(max(n, 3))*0.5*vg.Inch
}

// analyzeWorstPath is the path with the highest worst case (then the
// highest budget-limited figure).
func analyzeWorstPath(paths []analyze.Path) analyze.Path {
	worst := paths[0]
	for _, p := range paths[1:] {
		if p.Worst > worst.Worst || p.Worst == worst.Worst && p.Budgeted > worst.Budgeted {
			worst = p
		}
	}
	return worst
}

// analyzeShownPaths is the paths an amplification panel draws: all, or
// the analyzeMaxBars with the highest worst case.
func analyzeShownPaths(a analyze.Analysis) []analyze.Path {
	paths := a.Paths
	if len(paths) > analyzeMaxBars {
		paths = slices.Clone(paths)
		slices.SortStableFunc(paths, func(x, y analyze.Path) int { return cmp.Compare(y.Worst, x.Worst) })
		paths = paths[:analyzeMaxBars]
	}
	return paths
}

// analyzeHasExpected reports whether a run's panel shows the figure at the
// configured error rates: only when a service has one, as in the text.
func analyzeHasExpected(a analyze.Analysis) bool {
	for _, s := range a.Services {
		if s.ErrorRate > 0 {
			return true
		}
	}
	return false
}

// analyzeAmplificationTop is the largest figure a run's panel draws (at
// least 1).
func analyzeAmplificationTop(a analyze.Analysis) float64 {
	top, expected := 1.0, analyzeHasExpected(a)
	for _, p := range analyzeShownPaths(a) {
		top = max(top, p.Worst, p.Budgeted)
		if expected {
			top = max(top, p.Expected)
		}
	}
	return top
}

// analyzeAmplificationPanel draws one run's paths on a scale that reaches
// top (the largest figure of every panel of the chart): log when top is
// above 4×.
func analyzeAmplificationPanel(a analyze.Analysis, top float64, leg *sweepLegend) (*plot.Plot, int, error) {
	paths := a.Paths
	worst := analyzeWorstPath(paths)
	title := fmt.Sprintf("%s: up to %s at %s, %s within budgets", a.Run, analyzeTimes(worst.Worst),
		worst.Services[len(worst.Services)-1], analyzeTimes(worst.Budgeted))
	if len(paths) > analyzeMaxBars {
		title += fmt.Sprintf(" (the %d highest of %d paths)", analyzeMaxBars, len(paths))
	}
	paths = analyzeShownPaths(a)
	series := []struct {
		label string
		c     color.RGBA
		get   func(analyze.Path) float64
	}{
		{"worst case: every attempt fails and is retried", analyzeWorstColour, func(p analyze.Path) float64 { return p.Worst }},
		{"within the retry budgets (at the configured rates)", analyzeBudgetColour, func(p analyze.Path) float64 { return p.Budgeted }},
	}
	if analyzeHasExpected(a) {
		series = append(series, struct {
			label string
			c     color.RGBA
			get   func(analyze.Path) float64
		}{"at the configured error rates", analyzeExpectedColour, func(p analyze.Path) float64 { return p.Expected }})
	}

	p := newSweepPlot(title)
	log := top > 4
	x := func(v float64) float64 { return finite(v) }
	p.X.Label.Text = "attempts at the path's last service per request (×)"
	if log {
		x = func(v float64) float64 { return math.Log10(math.Max(1, finite(v))) }
		p.X.Label.Text += ", log scale"
		p.X.Tick.Marker = analyzeLogTicks{suffix: "×"}
		p.X.Min, p.X.Max = 0, x(top)*1.22+0.08
	} else {
		p.X.Tick.Marker = analyzeTicks{suffix: "×"}
		p.X.Min, p.X.Max = 0, top*1.25
	}
	n := len(paths)
	names := make([]string, n)
	for i, path := range paths {
		names[n-1-i] = path.String()
	}
	p.NominalY(names...)
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4

	const group = 0.78
	h := group / float64(len(series))
	for j, s := range series {
		var labels plotter.XYLabels
		var bar *plotter.Polygon
		for i, path := range paths {
			yc := float64(n - 1 - i)
			y1 := yc + group/2 - float64(j)*h
			v := s.get(path)
			bar = sweepRect(s.c, p.X.Min, y1-h*0.92, x(v), y1)
			p.Add(bar)
			labels.XYs = append(labels.XYs, plotter.XY{X: x(v), Y: y1 - h*0.46})
			labels.Labels = append(labels.Labels, analyzeTimes(v))
		}
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return p, n, err
		}
		for k := range l.TextStyle {
			l.TextStyle[k].Font.Size = vg.Points(9)
			l.TextStyle[k].YAlign = draw.YCenter
			l.TextStyle[k].Color = color.RGBA{40, 40, 40, 255}
		}
		l.Offset = vg.Point{X: vg.Points(3)}
		p.Add(l)
		leg.Add(s.label, bar)
	}
	return p, n, nil
}

// analyzeExposure is one row of the vulnerable-load chart: a service and
// one client that reaches it.
type analyzeExposure struct {
	label                string
	vulnerable, without  float64
	rate                 float64
	rateKnown            bool
	service, client, amp string
}

// analyzeExposures lists the bounded services' exposures, in the order of
// the scenario.
func analyzeExposures(a analyze.Analysis) []analyzeExposure {
	clients := map[string]bool{}
	for _, s := range a.Services {
		for _, x := range s.Clients {
			clients[x.Client] = true
		}
	}
	var out []analyzeExposure
	for _, s := range a.Services {
		if !s.Bounded {
			continue
		}
		for _, x := range s.Clients {
			if !(x.VulnerableAbove > 0) || math.IsInf(x.VulnerableAbove, 0) {
				continue
			}
			e := analyzeExposure{label: s.Name, vulnerable: x.VulnerableAbove, without: x.VulnerableAboveWithoutBudgets,
				rate: x.Rate, rateKnown: x.RateKnown && x.Rate > 0, service: s.Name, client: x.Client, amp: analyzeTimes(x.Effective)}
			if len(clients) > 1 {
				e.label = s.Name + " ← " + x.Client
			} else if len(s.Clients) == 1 {
				e.label = fmt.Sprintf("%s: %s ÷ %s", s.Name, analyzeRate(s.Capacity), e.amp)
			}
			out = append(out, e)
		}
	}
	return out
}

// analyzeVulnerableChart draws, for each run, every service's vulnerable
// load against the client's configured rate.
func analyzeVulnerableChart(r analyze.Report) (png, svg []byte, err error) {
	var plots []*plot.Plot
	var leg sweepLegend
	rows := 0
	for _, a := range r.Analyses {
		ex := analyzeExposures(a)
		if len(ex) == 0 {
			continue
		}
		p, err := analyzeVulnerablePanel(a.Run, ex, &leg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a.Run, err)
		}
		plots = append(plots, p)
		rows = max(rows, len(ex))
	}
	if len(plots) == 0 {
		return nil, nil, nil
	}
	return analyzeFigure(plots, leg, analyzeBarRowHeight(rows))
}

func analyzeVulnerablePanel(run string, ex []analyzeExposure, leg *sweepLegend) (*plot.Plot, error) {
	lo, hi := math.Inf(1), 0.0
	var worst *analyzeExposure
	clients := map[string]bool{}
	for i, e := range ex {
		clients[e.client] = true
		for _, v := range []float64{e.vulnerable, e.without} {
			if v > 0 && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if e.rateKnown {
			lo, hi = min(lo, e.rate), max(hi, e.rate)
			if worst == nil || e.rate/e.vulnerable > worst.rate/worst.vulnerable {
				worst = &ex[i]
			}
		}
	}
	var title string
	switch {
	case worst == nil:
		title = fmt.Sprintf("%s: vulnerable loads (no client has a steady rate to compare)", run)
	case worst.rate > worst.vulnerable*(1+1e-9):
		title = fmt.Sprintf("%s: %s is vulnerable above %s; %s runs at %s, %s above it", run, worst.service,
			analyzeRate(worst.vulnerable), worst.client, analyzeRate(worst.rate), analyzeTimes(analyzeRound(worst.rate/worst.vulnerable)))
	default:
		title = fmt.Sprintf("%s: every service holds; the closest, %s, at %s%% of its vulnerable load", run, worst.service,
			analyzeNum(analyzeRound(100*worst.rate/worst.vulnerable)))
	}
	p := newSweepPlot(title)
	p.X.Label.Text = "the client's rate (new requests/s), log scale"
	if len(clients) == 1 {
		for c := range clients {
			p.X.Label.Text = c + ": rate (new requests/s), log scale"
		}
	}
	x := func(v float64) float64 { return math.Log10(v) }
	p.X.Min, p.X.Max = x(lo)-0.45, x(hi)+0.75
	p.X.Tick.Marker = analyzeLogTicks{}
	n := len(ex)
	names := make([]string, n)
	for i, e := range ex {
		names[n-1-i] = e.label
	}
	p.NominalY(names...)
	p.Y.Tick.Label.Font.Size = vg.Points(10)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4

	safeFill := sweepPale(sweepVerdictColours["stable"], 0.3)
	vulnFill := sweepPale(sweepVerdictColours["metastable"], analyzeVulnerablePale)
	black := color.RGBA{0, 0, 0, 255}
	var labels []analyzeText
	for i, e := range ex {
		yc := float64(n - 1 - i)
		const half = 0.38
		safe := sweepRect(safeFill, p.X.Min, yc-half, x(e.vulnerable), yc+half)
		vuln := sweepRect(vulnFill, x(e.vulnerable), yc-half, p.X.Max, yc+half)
		p.Add(safe, vuln)
		leg.Add("safe: a storm's load stays within capacity", safe)
		leg.Add("vulnerable: a storm's load exceeds capacity", vuln)
		mark := sweepVLineY(x(e.vulnerable), yc-half, yc+half, black, 2, nil)
		p.Add(mark)
		leg.Add("vulnerable above (with budgets)", mark)
		labels = append(labels, analyzeText{x(e.vulnerable), yc + half*0.92, "vulnerable above " + analyzeRate(e.vulnerable), black, draw.YTop})
		if e.without > 0 && math.Abs(e.without-e.vulnerable) > 0.005*e.vulnerable {
			w := sweepVLineY(x(e.without), yc-half, yc+half, black, 1, []vg.Length{vg.Points(3), vg.Points(2)})
			p.Add(w)
			leg.Add("vulnerable above, without budgets", w)
			labels = append(labels, analyzeText{x(e.without), yc - half*0.92, "without budgets " + analyzeRate(e.without), black, draw.YBottom})
		}
		if e.rateKnown {
			sc, err := plotter.NewScatter(plotter.XYs{{X: x(e.rate), Y: yc - 0.08}})
			if err != nil {
				return p, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: black, Radius: vg.Points(5.5), Shape: analyzeDiamondGlyph{}}
			p.Add(sc)
			leg.Add("you run here (the configured rate)", sc)
			text := "you run here: " + analyzeRate(e.rate)
			if m := e.rate / e.vulnerable; m > 1+1e-9 {
				text += fmt.Sprintf(", %s above", analyzeTimes(analyzeRound(m)))
			} else {
				text += ", " + analyzeNum(analyzeRound(100*m)) + "% of it"
			}
			labels = append(labels, analyzeText{x(e.rate), yc - 0.08, text, black, draw.YCenter})
		}
	}
	if err := analyzeLabels(p, labels, vg.Points(8)); err != nil {
		return p, err
	}
	return p, nil
}

// analyzeFluidService is the service whose fluid model a run's panel
// draws: the first one the model describes (a service without calls that
// one client calls), nil when none.
func analyzeFluidService(a analyze.Analysis) *analyze.ServiceFigure {
	for i := range a.Services {
		if a.Services[i].Fluid != nil {
			return &a.Services[i]
		}
	}
	return nil
}

// analyzeFluidChart draws, for each run with a fluid model, goodput at the
// model's equilibria against the offered load, the regions shaded and the
// thresholds marked.
func analyzeFluidChart(r analyze.Report) (png, svg []byte, err error) {
	var plots []*plot.Plot
	var leg sweepLegend
	for _, a := range r.Analyses {
		s := analyzeFluidService(a)
		if s == nil {
			continue
		}
		p, err := analyzeFluidPanel(a.Run, *s, &leg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a.Run, err)
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil, nil, nil
	}
	return analyzeFigure(plots, leg, sweepRowHeight)
}

func analyzeFluidPanel(run string, s analyze.ServiceFigure, leg *sweepLegend) (*plot.Plot, error) {
	f := s.Fluid
	th := f.Thresholds
	rate, known := 0.0, false
	for _, x := range s.Clients {
		if x.Client == f.Client && x.RateKnown && x.Rate > 0 {
			rate, known = x.Rate, true
		}
	}
	var title string
	if known && f.Region != nil {
		title = fmt.Sprintf("%s: %s is %s at %s (recovers below %s, collapses above %s)", run, s.Name, *f.Region,
			analyzeRate(rate), analyzeRate(th.Recovery), analyzeRate(th.Collapse))
	} else {
		title = fmt.Sprintf("%s: %s recovers below %s, collapses above %s", run, s.Name, analyzeRate(th.Recovery), analyzeRate(th.Collapse))
	}
	p := newSweepPlot(title)
	p.X.Label.Text = f.Client + ": offered load (new requests/s)"
	p.Y.Label.Text = f.Client + ": goodput (requests/s)"
	xmax := max(th.Collapse, th.Recovery, rate) * 1.35
	if !(xmax > 0) || math.IsInf(xmax, 0) {
		return p, fmt.Errorf("fluid thresholds %v", th)
	}
	p.X.Min, p.X.Max = 0, xmax

	// The equilibria on a grid of loads, with the thresholds themselves.
	const steps = 240
	loads := make([]float64, 0, steps+5)
	for i := range steps + 1 {
		loads = append(loads, xmax*float64(i)/steps)
	}
	for _, t := range []float64{th.Collapse, th.Recovery} {
		if t > 0 && t < xmax {
			loads = append(loads, t*(1-1e-9), t*(1+1e-9))
		}
	}
	slices.Sort(loads)
	var healthy, collapsed plotter.XYs
	top := 0.0
	for _, l := range loads {
		for _, e := range analyze.Equilibria(f.Params, l) {
			if !e.Stable {
				continue
			}
			xy := plotter.XY{X: l, Y: finite(e.Goodput)}
			top = max(top, xy.Y)
			if !e.Collapsed {
				healthy = append(healthy, xy)
			} else {
				collapsed = append(collapsed, xy)
			}
		}
	}
	// A little below 0, so that the collapsed state's goodput (near 0)
	// shows above the axis.
	p.Y.Max = max(top, th.Collapse) * 1.2
	p.Y.Min = -0.03 * p.Y.Max

	// The regions, by the equilibria that exist.
	regions := []struct {
		name, legend string
		lo, hi       float64
		fill         color.RGBA
	}{
		{"stable", "stable: only the healthy state", 0, th.Recovery, sweepPale(sweepVerdictColours["stable"], 0.3)},
		{"vulnerable", "vulnerable: a trigger can tip it", th.Recovery, th.Collapse, sweepPale(sweepVerdictColours["metastable"], analyzeVulnerablePale)},
		{"metastable", "metastable: it collapses by itself", th.Collapse, xmax, sweepPale(sweepVerdictColours["metastable"], 0.3)},
	}
	var texts []analyzeText
	for _, r := range regions {
		lo, hi := max(0, r.lo), min(xmax, r.hi)
		if hi <= lo {
			continue
		}
		band := sweepRect(r.fill, lo, p.Y.Min, hi, p.Y.Max)
		p.Add(band)
		leg.Add(r.legend, band)
		c := sweepVerdictColours[r.name]
		if r.name == "vulnerable" {
			c = sweepVerdictColours["metastable"]
		}
		if (hi-lo)/xmax > 0.07 {
			texts = append(texts, analyzeText{(lo + hi) / 2, p.Y.Max * 0.985, r.name, c, draw.YTop})
		}
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: min(xmax, p.Y.Max), Y: min(xmax, p.Y.Max)}})
	if err != nil {
		return p, err
	}
	diag.LineStyle = draw.LineStyle{Color: palette["demand"], Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(3)}}
	p.Add(diag)
	leg.Add("goodput = demand (all served)", diag)

	for _, b := range []struct {
		xys   plotter.XYs
		label string
		dash  []vg.Length
	}{
		{healthy, "goodput, healthy state (empty queue)", nil},
		{collapsed, "goodput, collapsed state (full queue)", []vg.Length{vg.Points(6), vg.Points(3)}},
	} {
		if len(b.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(b.xys)
		if err != nil {
			return p, err
		}
		l.LineStyle = draw.LineStyle{Color: palette["goodput"], Width: vg.Points(2.2), Dashes: b.dash}
		p.Add(l)
		leg.Add(b.label, l)
	}

	var labels []sweepThreshold
	if th.Collapse > 0 && th.Collapse < xmax {
		l := sweepVLineY(th.Collapse, p.Y.Min, p.Y.Max, sweepCollapseColour, 1.6, nil)
		p.Add(l)
		leg.Add("collapse threshold", l)
		labels = append(labels, sweepThreshold{th.Collapse, "collapse " + analyzeRate(th.Collapse), sweepCollapseColour, false})
	}
	if th.Recovery > 0 && th.Recovery < xmax {
		l := sweepVLineY(th.Recovery, p.Y.Min, p.Y.Max, sweepRecoveryColour, 1.6, nil)
		p.Add(l)
		leg.Add("recovery threshold", l)
		labels = append(labels, sweepThreshold{th.Recovery, "recovery " + analyzeRate(th.Recovery), sweepRecoveryColour, true})
	}
	if err := sweepLabels(p, labels, p.Y.Max*0.9); err != nil {
		return p, err
	}
	if known {
		l := sweepVLineY(rate, p.Y.Min, p.Y.Max*0.75, sweepMarkColour, 1, []vg.Length{vg.Points(1), vg.Points(2)})
		p.Add(l)
		sc, err := plotter.NewScatter(plotter.XYs{{X: rate, Y: p.Y.Max * 0.75}})
		if err != nil {
			return p, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: sweepMarkColour, Radius: vg.Points(5.5), Shape: analyzeDiamondGlyph{}}
		p.Add(sc)
		leg.Add("you run here (the configured rate)", sc)
		texts = append(texts, analyzeText{rate, p.Y.Max * 0.75, "you run here: " + analyzeRate(rate), sweepMarkColour, draw.YCenter})
	}
	if err := analyzeLabels(p, texts, vg.Points(8)); err != nil {
		return p, err
	}
	return p, nil
}

// analyzeText is a label at a point of a plot.
type analyzeText struct {
	x, y   float64
	text   string
	c      color.Color
	yalign draw.YAlignment
}

// analyzeLabels writes each text just right of its point, on a pale box
// so that it stays readable over the lines it crosses.
func analyzeLabels(p *plot.Plot, ts []analyzeText, dx vg.Length) error {
	for _, t := range ts {
		if math.IsNaN(t.x) || math.IsNaN(t.y) {
			return fmt.Errorf("label %q at (%v, %v)", t.text, t.x, t.y)
		}
		st := draw.TextStyle{Color: t.c, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler, YAlign: t.yalign}
		st.Font.Size = vg.Points(9.5)
		p.Add(analyzeBoxedLabel{analyzeText: t, style: st, dx: dx})
	}
	return nil
}

// analyzeBoxedLabel is a text on a translucent white box.
type analyzeBoxedLabel struct {
	analyzeText
	style draw.TextStyle
	dx    vg.Length
}

// Plot implements plot.Plotter.
func (l analyzeBoxedLabel) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	pt := vg.Point{X: tx(l.x) + l.dx, Y: ty(l.y)}
	w, h := l.style.Width(l.text), l.style.Height(l.text)
	pad := vg.Points(1.5)
	y0 := pt.Y + h*vg.Length(l.style.YAlign)
	box := vg.Rectangle{Min: vg.Point{X: pt.X - pad, Y: y0 - pad}, Max: vg.Point{X: pt.X + w + pad, Y: y0 + h + pad}}
	c.SetColor(color.NRGBA{255, 255, 255, 190})
	c.Fill(box.Path())
	c.FillText(l.style, pt, l.text)
}

// analyzeFigure stacks the panels, two to a row when there are more than
// three, with the legend on the right, and encodes it as PNG and SVG.
func analyzeFigure(plots []*plot.Plot, entries sweepLegend, rowHeight vg.Length) (png, svg []byte, err error) {
	leg := entries.plot()
	cols := 1
	if len(plots) > 3 {
		cols = 2
	}
	rows := (len(plots) + cols - 1) / cols
	w := 9*vg.Inch + legendWidth + vg.Inch
	if cols > 1 {
		w = 16*vg.Inch + legendWidth + vg.Inch
	}
	h := vg.Length(rows) * rowHeight
	return gridFigure(plots, rows, cols, leg, w, h, legendWidth+vg.Inch, 3)
}

// analyzeDiamondGlyph is a filled diamond ("you run here").
type analyzeDiamondGlyph struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (analyzeDiamondGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius
	var path vg.Path
	path.Move(vg.Point{X: pt.X, Y: pt.Y + r})
	path.Line(vg.Point{X: pt.X + r*0.75, Y: pt.Y})
	path.Line(vg.Point{X: pt.X, Y: pt.Y - r})
	path.Line(vg.Point{X: pt.X - r*0.75, Y: pt.Y})
	path.Close()
	c.SetColor(sty.Color)
	c.Fill(path)
}

// analyzeTicks are the plain ticks with a unit after each label.
type analyzeTicks struct{ suffix string }

// Ticks implements plot.Ticker.
func (t analyzeTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := ticks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label += t.suffix
		}
	}
	return ts
}

// analyzeLogTicks marks an axis of log10 values at 1, 2 and 5 × 10ⁿ (at
// 10ⁿ only, with unlabelled ticks between, when it spans more than three
// decades), labelled with the values and the suffix.
type analyzeLogTicks struct{ suffix string }

// Ticks implements plot.Ticker; lo and hi are log10 values.
func (t analyzeLogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	wide := hi-lo > 3
	for e := math.Floor(lo) - 1; e <= math.Ceil(hi); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			lv := math.Log10(v)
			if lv < lo-1e-9 || lv > hi+1e-9 {
				continue
			}
			label := analyzeNum(v) + t.suffix
			switch {
			case m == 1:
			case !wide && (m == 2 || m == 5):
			default:
				label = ""
			}
			ts = append(ts, plot.Tick{Value: lv, Label: label})
		}
	}
	return ts
}
