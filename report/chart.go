package report

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"iter"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/stormguard/stormguard/sim/result"
)

// palette gives every quantity one colour, the same in every chart and in
// the HTML page.
var palette = map[string]color.RGBA{
	"demand":          {128, 128, 128, 255}, // grey
	"goodput":         {44, 160, 44, 255},   // green
	"offered_first":   {31, 119, 180, 255},  // blue
	"offered_retries": {255, 127, 14, 255},  // orange
	"throughput":      {148, 103, 189, 255}, // purple
	"wasted":          {214, 39, 40, 255},   // red
	"queue":           {140, 86, 75, 255},   // brown
	"shed":            {139, 0, 0, 255},     // dark red
	"expired":         {139, 0, 0, 255},     // dark red, dashed
	"limit":           {0, 0, 0, 255},       // black, dashed
	"trigger":         {255, 236, 179, 255}, // pale amber shading
	"action":          {190, 0, 140, 255},   // magenta: a runbook action's line and label
	"replicas":        {23, 118, 122, 255},  // dark cyan steps: replicas serving
}

// Colour returns the report's colour for a quantity: "demand", "goodput",
// "offered_first", "offered_retries", "throughput", "wasted", "queue",
// "shed", "expired", "limit", "trigger", "action" or "replicas" (black for
// an unknown name).
// Other figures (the lab's) use it so a quantity looks the same everywhere.
func Colour(quantity string) color.RGBA {
	if c, ok := palette[quantity]; ok {
		return c
	}
	return color.RGBA{A: 255}
}

// PlainTicks is the tick marker of every chart: gonum's default ticks
// labelled as plain numbers (25000, not 25000.00).
type PlainTicks = ticks

// TriggerShade returns the plotter that shades the trigger windows (start
// and end, in seconds) over a panel's whole height, with its legend
// thumbnail; add it first, so lines are drawn over it.
func TriggerShade(spans [][2]float64) interface {
	plot.Plotter
	plot.Thumbnailer
} {
	return shade{spans: spans}
}

// dashes tell apart the clients (or services) of one panel.
var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

// Figure geometry.
const (
	figWidth    = 11 * vg.Inch
	panelHeight = 2.4 * vg.Inch
	legendWidth = 2.3 * vg.Inch
)

// layout is how the charts of one scenario's runs are drawn alike: the
// clients that get a panel of their own (a client whose peak demand, over
// every run, is under a tenth of the largest client's would be flattened
// against it), and each panel's y maximum, shared by every run so that
// runs compare by eye. A zero layout draws one run on its own scales.
type layout struct {
	own map[string]bool
	top map[string]float64
}

// smallShare: a client whose peak demand is under this share of the
// largest client's gets a panel of its own.
const smallShare = 0.1

// newLayout lays out the charts of runs.
func newLayout(runs []result.Result) (layout, error) {
	peak := map[string]float64{}
	most := 0.0
	for _, r := range runs {
		for _, c := range r.Clients {
			for b := range c.Each() {
				peak[c.Name] = math.Max(peak[c.Name], finite(b.Demand))
				most = math.Max(most, finite(b.Demand))
			}
		}
	}
	l := layout{own: map[string]bool{}, top: map[string]float64{}}
	for name, p := range peak {
		if p < smallShare*most {
			l.own[name] = true
		}
	}
	var top = map[string]float64{}
	for _, r := range runs {
		plots, _, keys, err := panels(r, layout{own: l.own})
		if err != nil {
			return l, err
		}
		for i, p := range plots {
			top[keys[i]] = math.Max(top[keys[i]], p.Y.Max)
		}
	}
	l.top = top
	return l, nil
}

// chart draws a run as stacked panels that share the time axis: (a) client
// demand and goodput (a small client in a panel of its own), (b) per
// service offered load, throughput, goodput and waste, and the replicas
// serving when their number is not always one, (c) queue lengths; trigger
// windows shaded, runbook actions as vertical lines (labelled on the top
// panel), verdict in the title. Each panel's y range is l's, shared with
// the other runs of the scenario.
func chart(r result.Result, l layout) (png, svg []byte, err error) {
	rows := 2 + len(r.Services)
	for _, c := range r.Clients {
		if l.own[c.Name] {
			rows++
		}
	}
	h := vg.Length(rows)*panelHeight + 0.4*vg.Inch

	img := vgimg.New(figWidth, h)
	if err := render(draw.New(img), r, l); err != nil {
		return nil, nil, err
	}
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&pb); err != nil {
		return nil, nil, err
	}
	sc := vgsvg.New(figWidth, h)
	if err := render(draw.New(sc), r, l); err != nil {
		return nil, nil, err
	}
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, nil, err
	}
	return pb.Bytes(), SVGFonts(sb.Bytes()), nil
}

// SVGFonts gives every font of a chart's SVG the fonts that have its
// metrics as fallbacks. The charts are laid out with the Liberation fonts'
// metrics (gonum measures the text with them); a browser without them
// would fall back to its default serif, wider, and legends and labels
// would run into each other. Times New Roman (Windows, macOS) and Tinos
// (ChromeOS, Google Fonts) have Liberation Serif's widths, glyph for glyph;
// so have Arial and Arimo for Liberation Sans, Courier New and Cousine
// for Liberation Mono. A browser with none of them (a minimal Linux with
// only DejaVu, as Debian's chromium without its recommended fonts) would
// still set the text wider, legend labels past the chart's right edge:
// so every text also gets the width gonum measured as its textLength,
// which the browser fits the text to, whatever its font.
func SVGFonts(svg []byte) []byte {
	svg = svgText.ReplaceAllFunc(svg, func(t []byte) []byte {
		m := svgText.FindSubmatch(t)
		v, ok := svgVariants[string(m[3])]
		size, err := strconv.ParseFloat(string(m[6]), 64)
		if !ok || string(m[4]) != "normal" || string(m[5]) != "normal" || err != nil {
			return t
		}
		face := font.DefaultCache.Lookup(font.Font{Typeface: "Liberation", Variant: v}, vg.Points(size))
		w := face.Width(html.UnescapeString(string(m[7]))).Points()
		return fmt.Appendf(nil, `<text %s textLength="%.5g" lengthAdjust="spacingAndGlyphs"%s`, m[1], w, m[2])
	})
	for _, f := range svgFontStacks {
		svg = bytes.ReplaceAll(svg, []byte("font-family:"+f[0]+";"), []byte("font-family:"+f[1]+";"))
	}
	return svg
}

// svgText is a text element as vgsvg writes it: its position and
// transform (1), the rest from its style on (2), and in it its font's
// family (3), weight (4), style (5) and size in points (6) and its
// escaped text (7).
var svgText = regexp.MustCompile(`<text ([^>]*?)(\s*style="font-family:([^;"]*);font-variant:[^;"]*;font-weight:([^;"]*);font-style:([^;"]*);font-size:([0-9.e+-]+)px[^"]*">([^<]*)</text>)`)

// svgVariants: the gonum variant of each Liberation family.
var svgVariants = map[string]font.Variant{"Liberation Serif": "Serif", "Liberation Sans": "Sans", "Liberation Mono": "Mono"}

// svgFontStacks: a Liberation font, and the stack that replaces it.
var svgFontStacks = [...][2]string{
	{"Liberation Serif", "'Liberation Serif','Times New Roman',Tinos,Times,serif"},
	{"Liberation Sans", "'Liberation Sans',Arial,Arimo,Helvetica,sans-serif"},
	{"Liberation Mono", "'Liberation Mono','Courier New',Cousine,monospace"},
}

// render draws the panels into dc, with each panel's legend to its right.
func render(dc draw.Canvas, r result.Result, l layout) error {
	plots, legends, _, err := panels(r, l)
	if err != nil {
		return err
	}
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	area := draw.Crop(dc, 0, -legendWidth, 0, 0)
	pad := vg.Points(8)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadY: pad}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	for i, c := range plot.Align(grid, tiles, area) {
		plots[i].Draw(c[0])
		lc := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: area.Max.X + pad, Y: c[0].Min.Y},
			Max: vg.Point{X: dc.Max.X - pad, Y: c[0].Max.Y - 2*pad},
		}}
		legends[i].Draw(lc)
	}
	return nil
}

// panels builds the plots of a run and their legends, top to bottom, and
// each panel's key in the layout ("clients", "client NAME", "service
// NAME", "queue"); a panel whose key l holds a maximum for takes it.
func panels(r result.Result, l layout) ([]*plot.Plot, []plot.Legend, []string, error) {
	var plots []*plot.Plot
	var legends []plot.Legend
	var keys []string
	add := func(key, ylabel string, lines []line, withTrigger bool) error {
		p, lg, err := panel(r, ylabel, lines, withTrigger)
		if top := l.top[key]; top > p.Y.Max {
			p.Y.Max = top
		}
		plots, legends, keys = append(plots, p), append(legends, lg), append(keys, key)
		return err
	}
	clientLines := func(cs []result.ClientSeries, n int) []line {
		var ls []line
		for i, c := range cs {
			prefix := prefixFor(c.Name, n)
			ls = append(ls,
				line{"demand", prefix + "demand", i, clientSeries(c, func(b result.ClientBin) float64 { return b.Demand })},
				line{"goodput", prefix + "goodput", i, clientSeries(c, func(b result.ClientBin) float64 { return b.Goodput })})
		}
		return ls
	}
	var big, small []result.ClientSeries
	for _, c := range r.Clients {
		if l.own[c.Name] {
			small = append(small, c)
		} else {
			big = append(big, c)
		}
	}
	ylabel := "requests/s"
	if len(big) == 1 {
		ylabel = big[0].Name + ": requests/s"
	}
	if err := add("clients", ylabel, clientLines(big, len(big)), true); err != nil {
		return nil, nil, nil, err
	}
	plots[0].Title.Text = title(r)
	for _, c := range small {
		if err := add("client "+c.Name, c.Name+": requests/s (own scale)", clientLines([]result.ClientSeries{c}, 1), len(big) == 0); err != nil {
			return nil, nil, nil, err
		}
	}

	var queues []line
	for i, v := range r.Services {
		f := func(get func(result.ServiceBin) float64) plotter.XYs { return serviceSeries(v, get) }
		ls := []line{
			{"offered_first", "offered: first tries", 0, f(func(b result.ServiceBin) float64 { return b.OfferedFirst })},
			{"offered_retries", "offered: retries", 0, f(func(b result.ServiceBin) float64 { return b.OfferedRetries })},
			{"throughput", "throughput", 0, f(func(b result.ServiceBin) float64 { return b.Throughput })},
			{"goodput", "goodput", 0, f(func(b result.ServiceBin) float64 { return b.Goodput })},
			{"wasted", "wasted", 0, f(func(b result.ServiceBin) float64 { return b.Wasted })},
		}
		if shed := f(func(b result.ServiceBin) float64 { return b.Shed }); nonZero(shed) {
			ls = append(ls, line{"shed", "shed", 0, shed})
		}
		if exp := f(func(b result.ServiceBin) float64 { return b.Expired }); nonZero(exp) {
			ls = append(ls, line{"expired", "expired, dropped", 1, exp})
		}
		if err := add("service "+v.Name, v.Name+": attempts/s", ls, false); err != nil {
			return nil, nil, nil, err
		}
		if up := f(func(b result.ServiceBin) float64 { return b.ReplicasUp }); showReplicas(up) {
			rs := replicaSteps{xys: up, bin: r.BinS}
			plots[len(plots)-1].Add(rs)
			legends[len(legends)-1].Add("replicas serving (right scale)", rs)
		}
		prefix := prefixFor(v.Name, len(r.Services))
		q := f(func(b result.ServiceBin) float64 { return b.Queue })
		// The peak in the legend: a short queue drawn on the scale of
		// another run's long one still shows its size.
		queues = append(queues, line{"queue", fmt.Sprintf("%squeue (peak %s)", prefix, strconv.FormatFloat(peakOf(q), 'f', -1, 64)), i, q})
		if lim := f(func(b result.ServiceBin) float64 { return b.Limit }); nonZero(lim) {
			queues = append(queues, line{"limit", prefix + "concurrency limit", 1 + i, lim})
		}
	}
	if err := add("queue", "queue (requests)", queues, false); err != nil {
		return nil, nil, nil, err
	}
	last := plots[len(plots)-1]
	last.X.Label.Text = "time (s)"
	return plots, legends, keys, nil
}

// peakOf is the largest y of xys, rounded to a whole number.
func peakOf(xys plotter.XYs) float64 {
	m := 0.0
	for _, xy := range xys {
		m = math.Max(m, xy.Y)
	}
	return math.Round(m)
}

// line is one series of a panel: its palette key, legend label and dash.
type line struct {
	key, label string
	dash       int
	xys        plotter.XYs
}

// panel makes one plot with its lines over the run's time span, y from 0.
func panel(r result.Result, ylabel string, lines []line, withTrigger bool) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Y.Label.Text = ylabel
	p.X.Tick.Marker = ticks{}
	p.Y.Tick.Marker = ticks{}
	p.X.Min, p.X.Max = 0, math.Max(r.DurationS, r.BinS)
	p.Y.Min, p.Y.Max = 0, 1
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(10)
	leg.Padding = vg.Points(3)
	leg.ThumbnailWidth = vg.Points(24)
	sh := shade{spans: r.TriggerS}
	p.Add(sh)
	if withTrigger && len(r.TriggerS) > 0 {
		leg.Add("trigger", sh)
	}
	if len(r.Actions) > 0 {
		am := actionMarks{marks: r.Actions, labels: withTrigger}
		p.Add(am)
		if withTrigger {
			leg.Add("runbook action", am)
		}
	}
	for _, l := range lines {
		pl, err := plotter.NewLine(l.xys)
		if err != nil {
			return p, leg, fmt.Errorf("%s: %w", l.label, err)
		}
		pl.LineStyle.Color = palette[l.key]
		pl.LineStyle.Width = vg.Points(1.5)
		pl.LineStyle.Dashes = dashes[l.dash%len(dashes)]
		p.Add(pl)
		leg.Add(l.label, pl)
		for _, xy := range l.xys {
			p.Y.Max = math.Max(p.Y.Max, xy.Y*1.05)
		}
	}
	return p, leg, nil
}

// title names the run and its verdict.
func title(r result.Result) string { return RunTitle(r) }

// RunTitle is a run's chart title: its name, verdict and recovery as the
// table says them, and the client or service that decided the verdict:
// "naive: metastable, never recovered (client app)", "stormguard:
// recovered 0.0 s after the trigger (client app)".
func RunTitle(r result.Result) string {
	s := Summarize(r)
	t := r.Name
	switch {
	case s.Verdict == "":
		return t
	case s.Verdict == result.Recovered:
		t += ": recovered " + s.RecoveryText()
	case s.Verdict == result.Metastable:
		t += ": metastable, never recovered"
	default:
		t += ": " + s.Verdict
	}
	if by := strings.Replace(strings.Replace(r.DecidedBy, "clients.", "client ", 1), "services.", "service ", 1); by != "" {
		t += " (" + by + ")"
	}
	return t
}

func prefixFor(name string, n int) string {
	if n > 1 {
		return name + ": "
	}
	return ""
}

// maxChartPoints is the most points a chart's line has. A line of a
// longer series (a run of more than 2,000 bins) is drawn through the means
// of runs of consecutive bins, ⌈bins / 2,000⌉ of them each (the last run
// may be shorter), each at its first bin's time: a long run's chart is its
// series averaged to the chart's resolution, which holds a few hundred
// kilobytes of points however long the run (the series themselves, in the
// CSV and summary.json, are whole).
const maxChartPoints = 2000

func clientSeries(c result.ClientSeries, get func(result.ClientBin) float64) plotter.XYs {
	return points(c.Each(), func(b result.ClientBin) float64 { return b.T }, get)
}

func serviceSeries(v result.ServiceSeries, get func(result.ServiceBin) float64) plotter.XYs {
	return points(v.Each(), func(b result.ServiceBin) float64 { return b.T }, get)
}

// points returns a line's points, x and y of each bin of seq, or of each
// run of bins when there are more than maxChartPoints (see there).
func points[T any](seq iter.Seq[T], x, y func(T) float64) plotter.XYs {
	n := 0
	for range seq {
		n++
	}
	k := (n + maxChartPoints - 1) / maxChartPoints
	xys := make(plotter.XYs, 0, (n+max(k, 1)-1)/max(k, 1))
	var sum float64
	var in int
	for b := range seq {
		if in == 0 {
			xys = append(xys, plotter.XY{X: finite(x(b))})
		}
		sum += finite(y(b))
		if in++; in == k {
			xys[len(xys)-1].Y, sum, in = sum/float64(k), 0, 0
		}
	}
	if in > 0 {
		xys[len(xys)-1].Y = sum / float64(in)
	}
	return xys
}

func nonZero(xys plotter.XYs) bool {
	for _, xy := range xys {
		if xy.Y != 0 {
			return true
		}
	}
	return false
}

// ticks are gonum's default ticks with plain number labels (25000, not
// 25000.00).
type ticks struct{}

// Ticks implements plot.Ticker.
func (ticks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// shade fills the trigger windows over the whole height of a panel. It is
// added first, so the lines are drawn over it.
type shade struct{ spans [][2]float64 }

// Plot implements plot.Plotter.
func (s shade) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	for _, sp := range s.spans {
		x0, x1 := x(sp[0]), x(sp[1])
		pts := []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}
		c.FillPolygon(palette["trigger"], c.ClipPolygonX(pts))
	}
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (shade) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(palette["trigger"], []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// actionMarks draws a runbook's actions as vertical lines over a panel's
// whole height, in the action colour (apart from the trigger's shading and
// every series), each labelled with its label along the line when labels
// is set (the top panel).
type actionMarks struct {
	marks  []result.ActionMark
	labels bool
}

// Plot implements plot.Plotter.
func (a actionMarks) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	sty := draw.LineStyle{Color: palette["action"], Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(2)}}
	txt := draw.TextStyle{Color: palette["action"], Font: plot.DefaultFont, Handler: plot.DefaultTextHandler,
		Rotation: math.Pi / 2, XAlign: draw.XRight, YAlign: draw.YTop}
	txt.Font.Size = vg.Points(9)
	back := color.NRGBA{R: 255, G: 255, B: 255, A: 200}
	for _, m := range a.marks {
		if m.T < p.X.Min || m.T > p.X.Max {
			continue
		}
		xt := x(finite(m.T))
		c.StrokeLine2(sty, xt, c.Min.Y, xt, c.Max.Y)
		if a.labels && m.Label != "" {
			// Rotated a quarter turn: the text runs up along the line's
			// right, its end near the top of the panel, on a pale ground.
			w, h := txt.Width(m.Label), txt.Height(m.Label)
			top := c.Max.Y - vg.Points(4)
			x0 := xt + vg.Points(1.5)
			c.FillPolygon(back, []vg.Point{{X: x0, Y: top - w}, {X: x0 + h, Y: top - w}, {X: x0 + h, Y: top}, {X: x0, Y: top}})
			c.FillText(txt, vg.Point{X: x0, Y: top}, m.Label)
		}
	}
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (actionMarks) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	mid := (r.Min.X + r.Max.X) / 2
	c.StrokeLine2(draw.LineStyle{Color: palette["action"], Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(3), vg.Points(1.5)}}, mid, r.Min.Y, mid, r.Max.Y)
}

// showReplicas reports whether a service's replicas serving are worth a
// line: more than one at some time, or a number that changes (crashes,
// an autoscaler, a replicas action).
func showReplicas(up plotter.XYs) bool {
	for i, xy := range up {
		if xy.Y > 1 || i > 0 && xy.Y != up[0].Y {
			return true
		}
	}
	return false
}

// replicaSteps draws the replicas serving at the end of each bin as steps
// over the panel, on a scale of its own (0 at the bottom, the most
// replicas at 80 % of the height), with that scale as ticks and labels on
// the panel's right edge.
type replicaSteps struct {
	xys plotter.XYs
	bin float64
}

func (r replicaSteps) top() float64 {
	m := 1.0
	for _, xy := range r.xys {
		m = math.Max(m, xy.Y)
	}
	return m
}

// Plot implements plot.Plotter.
func (r replicaSteps) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	top := r.top()
	h := c.Max.Y - c.Min.Y
	y := func(n float64) vg.Length { return c.Min.Y + vg.Length(0.8*n/top)*h }
	sty := draw.LineStyle{Color: palette["replicas"], Width: vg.Points(1.6)}
	var pts []vg.Point
	for _, xy := range r.xys {
		// The count at the end of bin [t, t + bin) holds across it.
		x0, x1 := x(xy.X), x(xy.X+r.bin)
		pts = append(pts, vg.Point{X: x0, Y: y(xy.Y)}, vg.Point{X: x1, Y: y(xy.Y)})
	}
	c.StrokeLines(sty, c.ClipLinesX(pts)...)
	// The scale: a tick and a label at 0, at the top and halfway.
	txt := draw.TextStyle{Color: palette["replicas"], Font: plot.DefaultFont, Handler: plot.DefaultTextHandler, XAlign: draw.XRight, YAlign: -0.5}
	txt.Font.Size = vg.Points(9)
	marks := []float64{top}
	if half := math.Round(top / 2); half > 0 && half < top {
		marks = append(marks, half)
	}
	for _, n := range marks {
		yy := y(n)
		c.StrokeLine2(sty, c.Max.X-vg.Points(4), yy, c.Max.X, yy)
		c.FillText(txt, vg.Point{X: c.Max.X - vg.Points(6), Y: yy}, strconv.FormatFloat(n, 'f', -1, 64))
	}
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (replicaSteps) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	midY := (r.Min.Y + r.Max.Y) / 2
	midX := (r.Min.X + r.Max.X) / 2
	sty := draw.LineStyle{Color: palette["replicas"], Width: vg.Points(1.6)}
	c.StrokeLines(sty, []vg.Point{{X: r.Min.X, Y: r.Min.Y}, {X: midX, Y: r.Min.Y}, {X: midX, Y: midY}, {X: r.Max.X, Y: midY}})
}
