package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/stormguard/stormguard/sweep/plan"
)

// sweepVerdictColours are the verdicts' colours, the same as the verdict badges
// of the sim report (index.html.tmpl): stable green, recovered blue,
// metastable red, degraded orange (a verdict without a colour, such as not
// judged, is drawn grey).
var sweepVerdictColours = map[string]color.RGBA{
	"stable":     {44, 160, 44, 255},
	"recovered":  {31, 119, 180, 255},
	"metastable": {214, 39, 40, 255},
	"degraded":   {199, 91, 18, 255},
}

// The collapse threshold is drawn in the metastable
// colour, the recovery threshold in the recovered colour.
var (
	sweepCollapseColour = sweepVerdictColours["metastable"]
	sweepRecoveryColour = sweepVerdictColours["recovered"]
	sweepMarkColour     = color.RGBA{0, 0, 0, 255}
)

// sweepPale mixes c with white, keeping the fraction f of c.
func sweepPale(c color.RGBA, f float64) color.RGBA {
	m := func(v uint8) uint8 { return uint8(math.Round(255 - f*(255-float64(v)))) }
	return color.RGBA{m(c.R), m(c.G), m(c.B), 255}
}

// Geometry of the sweep figures: panels side by side, at most
// sweepCols to a row, one legend on the right.
const (
	sweepCols      = 3
	sweepRowHeight = 4.4 * vg.Inch
)

// sweepHysteresisChart draws each run's ramp: goodput against load on the way up
// and on the way down, the thresholds marked.
func sweepHysteresisChart(r plan.Result) (png, svg []byte, err error) {
	var plots []*plot.Plot
	var leg sweepLegend
	for _, run := range r.Runs {
		if run.Ramp == nil {
			continue
		}
		p, err := sweepHysteresisPanel(run, &leg)
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

func sweepHysteresisPanel(run plan.RunResult, leg *sweepLegend) (*plot.Plot, error) {
	rp := run.Ramp
	p := newSweepPlot(sweepPanelTitle(run, "ramp"))
	p.X.Label.Text = run.Client + ": offered load (new requests/s)"
	p.Y.Label.Text = run.Client + ": goodput (requests/s)"
	p.X.Min, p.X.Max = 0, rp.To*1.03
	top := rp.To
	for _, st := range rp.Steps {
		top = math.Max(top, st.Goodput)
	}
	p.Y.Min, p.Y.Max = 0, top*1.08

	if rp.Collapse != nil && rp.Recovery != nil && *rp.Recovery < *rp.Collapse {
		band := sweepRect(sweepPale(sweepCollapseColour, 0.14), *rp.Recovery, 0, *rp.Collapse, p.Y.Max)
		p.Add(band)
		leg.Add("bistable: history decides", band)
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: p.X.Max, Y: p.X.Max}})
	if err != nil {
		return p, err
	}
	diag.LineStyle = draw.LineStyle{Color: palette["demand"], Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(3)}}
	p.Add(diag)
	leg.Add("goodput = demand (all served)", diag)
	if run.Capacity > 0 && run.Capacity <= p.X.Max {
		c := sweepVLine(run.Capacity, p.Y.Max, sweepMarkColour, 0.8, []vg.Length{vg.Points(1), vg.Points(2)})
		p.Add(c)
		leg.Add("capacity (estimated)", c)
	}

	var up, down plotter.XYs
	for _, st := range rp.Steps {
		xy := plotter.XY{X: finite(st.Load), Y: finite(st.Goodput)}
		if st.Branch == "up" {
			up = append(up, xy)
		} else {
			down = append(down, xy)
		}
	}
	if len(up) > 0 && len(down) > 0 {
		// The way down starts from the peak.
		down = append(plotter.XYs{up[len(up)-1]}, down...)
	}
	for _, b := range []struct {
		xys   plotter.XYs
		label string
		dash  []vg.Length
		glyph draw.GlyphDrawer
	}{
		{up, "goodput, load going up", nil, draw.PyramidGlyph{}},
		{down, "goodput, load going down", []vg.Length{vg.Points(6), vg.Points(3)}, sweepDownGlyph{}},
	} {
		if len(b.xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(b.xys)
		if err != nil {
			return p, err
		}
		l.LineStyle = draw.LineStyle{Color: palette["goodput"], Width: vg.Points(1.5), Dashes: b.dash}
		s.GlyphStyle = draw.GlyphStyle{Color: palette["goodput"], Radius: vg.Points(3), Shape: b.glyph}
		p.Add(l, s)
		leg.Add(b.label, l, s)
	}

	var labels []sweepThreshold
	if rp.Collapse != nil {
		l := sweepVLine(*rp.Collapse, p.Y.Max, sweepCollapseColour, 1.6, nil)
		p.Add(l)
		leg.Add("collapse threshold (way up)", l)
		labels = append(labels, sweepThreshold{*rp.Collapse, "collapse " + sweepRate(*rp.Collapse), sweepCollapseColour, false})
	}
	if rp.Recovery != nil {
		l := sweepVLine(*rp.Recovery, p.Y.Max, sweepRecoveryColour, 1.6, nil)
		p.Add(l)
		leg.Add("recovery threshold (way down)", l)
		labels = append(labels, sweepThreshold{*rp.Recovery, "recovery " + sweepRate(*rp.Recovery), sweepRecoveryColour, true})
	}
	if err := sweepLabels(p, labels, p.Y.Max*0.97); err != nil {
		return p, err
	}
	return p, nil
}

// sweepPhaseChart draws each run's phase diagram: load × trigger size, the
// regions stable, recovered and metastable, every run of the search, and
// the ramp's thresholds.
func sweepPhaseChart(r plan.Result) (png, svg []byte, err error) {
	var plots []*plot.Plot
	var leg sweepLegend
	for _, run := range r.Runs {
		if run.Phase == nil || len(run.Phase.Columns) == 0 {
			continue
		}
		p, err := sweepPhasePanel(run, &leg)
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

// sweepPhaseFloor is where size Min sits on the log axis: Min itself, or half
// the resolution when Min is 0.
func sweepPhaseFloor(ph *plan.Phase) float64 {
	if ph.Min > 0 {
		return ph.Min
	}
	return ph.Resolution / 2
}

func sweepPhasePanel(run plan.RunResult, leg *sweepLegend) (*plot.Plot, error) {
	ph := run.Phase
	cols := ph.Columns
	p := newSweepPlot(sweepPanelTitle(run, "phase"))
	p.X.Label.Text = run.Client + ": load (new requests/s)"
	p.Y.Label.Text = ph.Label() + ", log scale"
	// The y axis is log10 of the size, drawn linear with ticks labelled
	// in sizes (gonum's log scale misplaces a long axis label's box).
	floor := sweepPhaseFloor(ph)
	y := func(v float64) float64 { return math.Log10(math.Max(floor, v)) }
	p.Y.Tick.Marker = sweepLogTicks{floor: floor, zero: ph.Min == 0}
	p.Y.Min, p.Y.Max = y(floor), y(ph.Max)
	top := p.Y.Max

	// Cell edges halfway between loads.
	edges := make([]float64, len(cols)+1)
	for i := 1; i < len(cols); i++ {
		edges[i] = (cols[i-1].Load + cols[i].Load) / 2
	}
	if len(cols) == 1 {
		w := math.Max(cols[0].Load*0.05, 1)
		edges[0], edges[1] = cols[0].Load-w, cols[0].Load+w
	} else {
		edges[0] = cols[0].Load - (edges[1] - cols[0].Load)
		edges[len(cols)] = cols[len(cols)-1].Load + (cols[len(cols)-1].Load - edges[len(cols)-1])
	}
	p.X.Min, p.X.Max = math.Max(0, edges[0]), edges[len(cols)]

	fills := map[string]*plotter.Polygon{}
	for i, c := range cols {
		d, t := top, top
		if c.Disturbs != nil {
			d = y(*c.Disturbs)
		}
		if c.Tips != nil {
			t = y(*c.Tips)
		}
		d = math.Min(d, t)
		for _, region := range []struct {
			verdict string
			lo, hi  float64
		}{{"stable", p.Y.Min, d}, {"recovered", d, t}, {"metastable", t, top}} {
			if region.hi <= region.lo {
				continue
			}
			poly := sweepRect(sweepPale(sweepVerdictColours[region.verdict], 0.3), edges[i], region.lo, edges[i+1], region.hi)
			p.Add(poly)
			fills[region.verdict] = poly
		}
	}
	for _, v := range []string{"stable", "recovered", "metastable"} {
		if f, ok := fills[v]; ok {
			leg.Add(v+" after the trigger", f)
		}
	}

	if size, ok := sweepFileTriggerSize(ph); ok && size >= floor && size <= ph.Max {
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: y(size)}, {X: p.X.Max, Y: y(size)}})
		if err != nil {
			return p, err
		}
		l.LineStyle = draw.LineStyle{Color: sweepMarkColour, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(1), vg.Points(2)}}
		p.Add(l)
		leg.Add("the file's own trigger: "+ph.SizeText(size), l)
	}

	var xys plotter.XYs
	var verdicts []string
	for _, c := range cols {
		for _, pr := range c.Probes {
			xys = append(xys, plotter.XY{X: c.Load, Y: y(pr.Size)})
			verdicts = append(verdicts, pr.Verdict)
		}
	}
	if len(xys) > 0 {
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return p, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: palette["demand"], Radius: vg.Points(2.6), Shape: sweepProbeGlyph{}}
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

	if r := run.Ramp; r != nil {
		if r.Collapse != nil && *r.Collapse >= p.X.Min && *r.Collapse <= p.X.Max {
			l := sweepVLineY(*r.Collapse, p.Y.Min, top, sweepCollapseColour, 1.4, []vg.Length{vg.Points(5), vg.Points(3)})
			p.Add(l)
			leg.Add("collapse threshold (ramp)", l)
		}
		if r.Recovery != nil && *r.Recovery >= p.X.Min && *r.Recovery <= p.X.Max {
			l := sweepVLineY(*r.Recovery, p.Y.Min, top, sweepRecoveryColour, 1.4, []vg.Length{vg.Points(5), vg.Points(3)})
			p.Add(l)
			leg.Add("recovery threshold (ramp)", l)
		}
	}
	return p, nil
}

// sweepFileTriggerSize is the size of the trigger as the scenario file has it.
func sweepFileTriggerSize(ph *plan.Phase) (float64, bool) {
	switch ph.Vary {
	case plan.VaryFactor:
		return ph.Trigger.Factor, ph.Trigger.Factor > 0
	case plan.VaryAdd:
		return ph.Trigger.Add.Seconds(), ph.Trigger.Add > 0
	case plan.VaryKeys:
		// 0 flushes every key: the cache's size is not in the plan.
		return float64(ph.Trigger.Keys), ph.Trigger.Keys > 0
	}
	return ph.Trigger.Duration.Seconds(), ph.Trigger.Duration > 0
}

// sweepPanelTitle says what a panel shows in a few words.
func sweepPanelTitle(run plan.RunResult, what string) string {
	s := SummarizeSweep(run)
	if what == "ramp" {
		switch r := run.Ramp; {
		case r.Collapse == nil:
			return fmt.Sprintf("%s: no collapse up to %s", run.Name, sweepRate(r.To))
		case r.Recovery == nil:
			return fmt.Sprintf("%s: collapses at %s, never recovers", run.Name, sweepRate(*r.Collapse))
		}
		return fmt.Sprintf("%s: collapses at %s, recovers at %s", run.Name, sweepRate(*run.Ramp.Collapse), sweepRate(*run.Ramp.Recovery))
	}
	if s.MetastableFrom == nil {
		return fmt.Sprintf("%s: never metastable", run.Name)
	}
	return fmt.Sprintf("%s: metastable from %s", run.Name, sweepRate(*s.MetastableFrom))
}

func newSweepPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Tick.Marker = ticks{}
	p.Y.Tick.Marker = ticks{}
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	return p
}

// sweepLegend gathers the entries of every panel of a figure, each label
// once, in the order first added.
type sweepLegend struct {
	labels []string
	thumbs [][]plot.Thumbnailer
}

// Add adds an entry unless one with the same label is there.
func (l *sweepLegend) Add(label string, thumbs ...plot.Thumbnailer) {
	for _, have := range l.labels {
		if have == label {
			return
		}
	}
	l.labels = append(l.labels, label)
	l.thumbs = append(l.thumbs, thumbs)
}

// plot returns the entries as a gonum legend.
func (l *sweepLegend) plot() plot.Legend {
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(10)
	leg.Padding = vg.Points(4)
	leg.ThumbnailWidth = vg.Points(24)
	for i, label := range l.labels {
		leg.Add(label, l.thumbs[i]...)
	}
	return leg
}

// sweepFigure lays the panels out side by side (sweepCols to a row), with the
// legend on the right, and encodes it as PNG and SVG.
func sweepFigure(plots []*plot.Plot, entries sweepLegend) (png, svg []byte, err error) {
	leg := entries.plot()
	cols := min(len(plots), sweepCols)
	rows := (len(plots) + cols - 1) / cols
	w := figWidth + legendWidth
	if cols == 1 {
		w = 7*vg.Inch + legendWidth
	}
	h := vg.Length(rows) * sweepRowHeight
	return gridFigure(plots, rows, cols, leg, w, h, legendWidth+vg.Points(12), 2)
}

// gridFigure draws plots in a grid of rows × cols (row by row, empty cells
// where plots run out) on a w × h page with leg in the rightmost legendRoom,
// and encodes it as PNG and SVG. padX is the space between columns, in
// units of the 10 pt padding. The sweep's and the analysis's charts share it.
func gridFigure(plots []*plot.Plot, rows, cols int, leg plot.Legend, w, h, legendRoom vg.Length, padX float64) (png, svg []byte, err error) {
	render := func(dc draw.Canvas) {
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		area := draw.Crop(dc, 0, -legendRoom, 0, 0)
		pad := vg.Points(10)
		tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadX: vg.Length(padX) * pad, PadY: 2 * pad}
		grid := make([][]*plot.Plot, rows)
		for i := range grid {
			grid[i] = make([]*plot.Plot, cols)
			for j := range cols {
				if k := i*cols + j; k < len(plots) {
					grid[i][j] = plots[k]
				}
			}
		}
		canvases := plot.Align(grid, tiles, area)
		for i := range grid {
			for j, p := range grid[i] {
				if p != nil {
					p.Draw(canvases[i][j])
				}
			}
		}
		top := canvases[0][0]
		lc := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: area.Max.X + pad, Y: top.Min.Y},
			Max: vg.Point{X: dc.Max.X - pad, Y: top.Max.Y - 3*pad},
		}}
		leg.Draw(lc)
	}
	img := vgimg.New(w, h)
	render(draw.New(img))
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&pb); err != nil {
		return nil, nil, err
	}
	sc := vgsvg.New(w, h)
	render(draw.New(sc))
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, nil, err
	}
	return pb.Bytes(), SVGFonts(sb.Bytes()), nil
}

// sweepRect is a filled rectangle without an outline.
func sweepRect(c color.Color, x0, y0, x1, y1 float64) *plotter.Polygon {
	return &plotter.Polygon{
		XYs:   []plotter.XYs{{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}},
		Color: c,
	}
}

// sweepVLine is a vertical line at x from 0 to top.
func sweepVLine(x, top float64, c color.Color, width float64, dashes []vg.Length) *plotter.Line {
	return sweepVLineY(x, 0, top, c, width, dashes)
}

func sweepVLineY(x, lo, hi float64, c color.Color, width float64, dashes []vg.Length) *plotter.Line {
	return &plotter.Line{
		XYs:       plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}},
		LineStyle: draw.LineStyle{Color: c, Width: vg.Points(width), Dashes: dashes},
	}
}

// sweepThreshold is a labelled vertical line; left puts the label on its left.
type sweepThreshold struct {
	x    float64
	text string
	c    color.Color
	left bool
}

// sweepLabels writes each threshold's text next to its line, at
// height y.
func sweepLabels(p *plot.Plot, ts []sweepThreshold, y float64) error {
	for _, t := range ts {
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: t.x, Y: y}}, Labels: []string{t.text}})
		if err != nil {
			return err
		}
		st := &l.TextStyle[0]
		st.Color = t.c
		st.Font.Size = vg.Points(10)
		st.YAlign = draw.YTop
		if t.left {
			st.XAlign = draw.XRight
			l.Offset = vg.Point{X: -vg.Points(3)}
		} else {
			l.Offset = vg.Point{X: vg.Points(3)}
		}
		p.Add(l)
	}
	return nil
}

// sweepDownGlyph is a filled triangle pointing down (the way down).
type sweepDownGlyph struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (sweepDownGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius * 1.15
	var path vg.Path
	path.Move(vg.Point{X: pt.X, Y: pt.Y - r})
	path.Line(vg.Point{X: pt.X - r*0.866, Y: pt.Y + r/2})
	path.Line(vg.Point{X: pt.X + r*0.866, Y: pt.Y + r/2})
	path.Close()
	c.SetColor(sty.Color)
	c.Fill(path)
}

// sweepProbeGlyph is a filled circle with a thin dark outline, so that a
// probe stands out on a region of its own colour.
type sweepProbeGlyph struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (sweepProbeGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	draw.CircleGlyph{}.DrawGlyph(c, sty, pt)
	draw.RingGlyph{}.DrawGlyph(c, draw.GlyphStyle{Color: color.RGBA{40, 40, 40, 255}, Radius: sty.Radius}, pt)
}

// sweepLogTicks marks an axis of log10 values at 1, 2 and 5 × 10ⁿ, labelled
// with the values themselves, and its floor "0" when zero is true (size 0
// is drawn at the floor).
type sweepLogTicks struct {
	floor float64
	zero  bool
}

// Ticks implements plot.Ticker; lo and hi are log10 values.
func (t sweepLogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	if t.zero {
		ts = append(ts, plot.Tick{Value: math.Log10(t.floor), Label: "0"})
	}
	for e := math.Floor(lo) - 1; e <= math.Ceil(hi); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			lv := math.Log10(v)
			if lv < lo-1e-9 || lv > hi+1e-9 || (t.zero && v < t.floor*1.6) {
				continue
			}
			ts = append(ts, plot.Tick{Value: lv, Label: strconv.FormatFloat(v, 'g', 6, 64)})
		}
	}
	if len(ts) < 2 {
		ts = append(ts, plot.Tick{Value: hi, Label: strconv.FormatFloat(math.Pow(10, hi), 'g', 4, 64)})
	}
	return ts
}
