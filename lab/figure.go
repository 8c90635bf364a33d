package lab

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim/result"
)

// Colours of the figure: the report's own (report.Colour), so that a
// quantity looks the same everywhere; the simulated curve is black.
var (
	colDemand     = report.Colour("demand")
	colGoodput    = report.Colour("goodput")
	colSim        = color.RGBA{0, 0, 0, 255}
	colFirst      = report.Colour("offered_first")
	colRetries    = report.Colour("offered_retries")
	colThroughput = report.Colour("throughput")
	colWasted     = report.Colour("wasted")
	colQueue      = report.Colour("queue")
	colZero       = color.RGBA{170, 170, 170, 255}
)

// Figure geometry.
const (
	figColWidth  = 6.2 * vg.Inch
	figRowHeight = 2.3 * vg.Inch
	figDPI       = 110
)

// Figure draws every run of out side by side, one column per run, in one
// picture (PNG and SVG): (1) the client's demand, the lab's goodput and
// the simulator's; (2) their difference, lab − sim, in the comparison's
// windows; (3) the backend's offered load (first tries and retries),
// throughput and wasted work; (4) the backend's queue. Trigger windows are
// shaded; each column's title gives the lab's verdict.
func Figure(out Output) (png, svg []byte, err error) {
	if len(out.Runs) == 0 {
		return nil, nil, fmt.Errorf("lab: no runs to draw")
	}
	grid, err := figurePlots(out)
	if err != nil {
		return nil, nil, err
	}
	w := vg.Length(len(out.Runs)) * figColWidth
	h := vg.Length(len(grid))*figRowHeight + 0.3*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(figDPI))
	drawGrid(draw.New(img), grid)
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&pb); err != nil {
		return nil, nil, err
	}
	sc := vgsvg.New(w, h)
	drawGrid(draw.New(sc), grid)
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, nil, err
	}
	return pb.Bytes(), report.SVGFonts(sb.Bytes()), nil
}

func drawGrid(dc draw.Canvas, grid [][]*plot.Plot) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	pad := vg.Points(8)
	t := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadX: 2 * pad, PadY: pad}
	cs := plot.Align(grid, t, dc)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(cs[i][j])
		}
	}
}

// figurePlots builds the grid: rows of panels, a column per run, rows
// sharing their y range.
func figurePlots(out Output) ([][]*plot.Plot, error) {
	const rows = 4
	grid := make([][]*plot.Plot, rows)
	tops := make([]float64, rows)
	lows := make([]float64, rows)
	for j, r := range out.Runs {
		var cmp *Comparison
		if j < len(out.Comparisons) {
			cmp = &out.Comparisons[j]
		}
		var simRun *result.Result
		if j < len(out.Sim) {
			simRun = &out.Sim[j]
		}
		ps, err := runColumn(r, simRun, cmp, j == 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		for i, p := range ps {
			grid[i] = append(grid[i], p)
			tops[i] = math.Max(tops[i], p.Y.Max)
			lows[i] = math.Min(lows[i], p.Y.Min)
		}
	}
	for i := range grid {
		for _, p := range grid[i] {
			p.Y.Min, p.Y.Max = lows[i], tops[i]
		}
	}
	return grid, nil
}

// series is one line of a panel.
type series struct {
	label string
	col   color.RGBA
	dash  bool
	xys   plotter.XYs
}

// runColumn builds the panels of one run.
func runColumn(r result.Result, simRun *result.Result, cmp *Comparison, legends bool) ([]*plot.Plot, error) {
	var out []*plot.Plot
	add := func(ylabel string, ss []series, headroom float64) error {
		// The difference's legend states the run's own figure: shown in
		// every column.
		show := legends || strings.HasPrefix(ylabel, "lab − sim")
		p, err := figPanel(r, ylabel, ss, headroom, show)
		out = append(out, p)
		return err
	}
	client := "requests/s"
	if len(r.Clients) == 1 {
		client = r.Clients[0].Name + ": requests/s"
	}
	g, d := clientSums(r)
	top := []series{
		{"demand", colDemand, false, binXY(r.BinS, d)},
		{"goodput, lab", colGoodput, false, binXY(r.BinS, g)},
	}
	if simRun != nil {
		sg, _ := clientSums(*simRun)
		top = append(top, series{"goodput, simulated", colSim, true, binXY(simRun.BinS, sg)})
	}
	if err := add(client, top, 1.45); err != nil {
		return nil, err
	}
	out[0].Title.Text = figTitle(r)
	var diff []series
	if cmp != nil {
		xy := make(plotter.XYs, 0, len(cmp.T)*2)
		for i, t := range cmp.T {
			// Steps: each window's value over the whole window.
			xy = append(xy, plotter.XY{X: t, Y: cmp.Diff[i]}, plotter.XY{X: t + cmp.WindowS, Y: cmp.Diff[i]})
		}
		label := fmt.Sprintf("goodput lab − sim (%.0f s windows); |diff| = %.0f%% of demand", cmp.WindowS, 100*cmp.Error)
		diff = append(diff, series{label, colGoodput, false, xy})
	}
	if err := add("lab − sim: requests/s", diff, 1.6); err != nil {
		return nil, err
	}
	if p := out[len(out)-1]; p.Y.Min > -10 {
		p.Y.Min = math.Min(p.Y.Min, -p.Y.Max/1.6)
	}
	// A difference reads against zero: a tick and a line at 0 always.
	out[len(out)-1].Y.Tick.Marker = zeroTicks{}
	out[len(out)-1].Add(zeroLine{})
	var back result.ServiceSeries
	if len(r.Services) > 0 {
		back = r.Services[len(r.Services)-1]
	}
	get := func(f func(result.ServiceBin) float64) plotter.XYs {
		v := make([]float64, len(back.Bins))
		for i, b := range back.Bins {
			v[i] = f(b)
		}
		return binXY(r.BinS, v)
	}
	load := []series{
		{"offered: first tries", colFirst, false, get(func(b result.ServiceBin) float64 { return b.OfferedFirst })},
		{"offered: retries", colRetries, false, get(func(b result.ServiceBin) float64 { return b.OfferedRetries })},
		{"throughput", colThroughput, false, get(func(b result.ServiceBin) float64 { return b.Throughput })},
		{"wasted", colWasted, false, get(func(b result.ServiceBin) float64 { return b.Wasted })},
	}
	if err := add(back.Name+": attempts/s", load, 1.45); err != nil {
		return nil, err
	}
	queue := []series{{"queue", colQueue, false, get(func(b result.ServiceBin) float64 { return b.Queue })}}
	if err := add(back.Name+": queue", queue, 1.3); err != nil {
		return nil, err
	}
	out[len(out)-1].X.Label.Text = "time (s)"
	return out, nil
}

// zeroTicks are ticks whose steps are counted from zero, so that 0 is
// always one when the range holds it (gonum's default ticks count from the
// range's low end and may skip it: -80, 40, 160 on [-120, 190]).
type zeroTicks struct{}

// Ticks implements plot.Ticker.
func (zeroTicks) Ticks(lo, hi float64) []plot.Tick {
	def := report.PlainTicks{}.Ticks(lo, hi)
	if !(lo < 0 && hi > 0) {
		return def
	}
	var major []float64
	for _, t := range def {
		if t.Label != "" {
			major = append(major, t.Value)
		}
	}
	if len(major) < 2 {
		return def
	}
	step := major[1] - major[0]
	var ts []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi; k++ {
		v := k * step
		if k == 0 {
			v = 0 // not -0, nor a rounding residue
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ts
}

// zeroLine draws y = 0 across a panel.
type zeroLine struct{}

// Plot implements plot.Plotter.
func (zeroLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, y := p.Transforms(&c)
	if p.Y.Min > 0 || p.Y.Max < 0 {
		return
	}
	c.StrokeLine2(draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(0.8)}, c.Min.X, y(0), c.Max.X, y(0))
}

// figTitle names the run and the lab's verdict, as the report's charts
// and the table say it.
func figTitle(r result.Result) string {
	r.Name += " (lab)"
	return report.RunTitle(r)
}

// figPanel makes one panel over the run's time span with its trigger
// windows shaded; headroom leaves room above the lines for the legend.
func figPanel(r result.Result, ylabel string, ss []series, headroom float64, legend bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = report.PlainTicks{}
	p.Y.Tick.Marker = report.PlainTicks{}
	p.X.Min, p.X.Max = 0, math.Max(r.DurationS, r.BinS)
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(20)
	sh := report.TriggerShade(r.TriggerS)
	p.Add(sh)
	if legend && len(r.TriggerS) > 0 && ylabel != "" && len(ss) > 0 && ss[0].label == "demand" {
		p.Legend.Add("trigger", sh)
	}
	zero, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: 0}, {X: p.X.Max, Y: 0}})
	if err != nil {
		return p, err
	}
	zero.LineStyle.Color, zero.LineStyle.Width = colZero, vg.Points(0.5)
	p.Add(zero)
	maxY, minY := 0.0, 0.0
	for _, s := range ss {
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return p, fmt.Errorf("%s: %w", s.label, err)
		}
		l.LineStyle.Color = s.col
		l.LineStyle.Width = vg.Points(1.3)
		if s.dash {
			l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			l.LineStyle.Width = vg.Points(1.6)
		}
		p.Add(l)
		if legend {
			p.Legend.Add(s.label, l)
		}
		for _, xy := range s.xys {
			maxY, minY = math.Max(maxY, xy.Y), math.Min(minY, xy.Y)
		}
	}
	p.Y.Max = math.Max(1, maxY*headroom)
	p.Y.Min = minY * 1.1
	return p, nil
}

// binXY places one value per bin at the bin's middle.
func binXY(binS float64, v []float64) plotter.XYs {
	xy := make(plotter.XYs, len(v))
	for i, y := range v {
		if math.IsNaN(y) || math.IsInf(y, 0) {
			y = 0
		}
		xy[i] = plotter.XY{X: (float64(i) + 0.5) * binS, Y: y}
	}
	return xy
}
