package report

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"math"
	"regexp"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/stormguard/stormguard/sim"
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

// chart draws a run as stacked panels that share the time axis: (a) client
// demand and goodput, (b) per service offered load, throughput, goodput and
// waste, and the replicas serving when their number is not always one,
// (c) queue lengths; trigger windows shaded, runbook actions as vertical
// lines (labelled on the top panel), verdict in the title.
func chart(r sim.Result) (png, svg []byte, err error) {
	rows := 2 + len(r.Services)
	h := vg.Length(rows)*panelHeight + 0.4*vg.Inch

	img := vgimg.New(figWidth, h)
	if err := render(draw.New(img), r); err != nil {
		return nil, nil, err
	}
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&pb); err != nil {
		return nil, nil, err
	}
	sc := vgsvg.New(figWidth, h)
	if err := render(draw.New(sc), r); err != nil {
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
func render(dc draw.Canvas, r sim.Result) error {
	plots, legends, err := panels(r)
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

// panels builds the plots of a run and their legends, top to bottom.
func panels(r sim.Result) ([]*plot.Plot, []plot.Legend, error) {
	var plots []*plot.Plot
	var legends []plot.Legend
	add := func(ylabel string, lines []line, withTrigger bool) error {
		p, l, err := panel(r, ylabel, lines, withTrigger)
		plots, legends = append(plots, p), append(legends, l)
		return err
	}
	var clients []line
	for i, c := range r.Clients {
		prefix := prefixFor(c.Name, len(r.Clients))
		clients = append(clients,
			line{"demand", prefix + "demand", i, clientSeries(c, func(b sim.ClientBin) float64 { return b.Demand })},
			line{"goodput", prefix + "goodput", i, clientSeries(c, func(b sim.ClientBin) float64 { return b.Goodput })})
	}
	ylabel := "requests/s"
	if len(r.Clients) == 1 {
		ylabel = r.Clients[0].Name + ": requests/s"
	}
	if err := add(ylabel, clients, true); err != nil {
		return nil, nil, err
	}
	plots[0].Title.Text = title(r)

	var queues []line
	for i, v := range r.Services {
		f := func(get func(sim.ServiceBin) float64) plotter.XYs { return serviceSeries(v, get) }
		ls := []line{
			{"offered_first", "offered: first tries", 0, f(func(b sim.ServiceBin) float64 { return b.OfferedFirst })},
			{"offered_retries", "offered: retries", 0, f(func(b sim.ServiceBin) float64 { return b.OfferedRetries })},
			{"throughput", "throughput", 0, f(func(b sim.ServiceBin) float64 { return b.Throughput })},
			{"goodput", "goodput", 0, f(func(b sim.ServiceBin) float64 { return b.Goodput })},
			{"wasted", "wasted", 0, f(func(b sim.ServiceBin) float64 { return b.Wasted })},
		}
		if shed := f(func(b sim.ServiceBin) float64 { return b.Shed }); nonZero(shed) {
			ls = append(ls, line{"shed", "shed", 0, shed})
		}
		if exp := f(func(b sim.ServiceBin) float64 { return b.Expired }); nonZero(exp) {
			ls = append(ls, line{"expired", "expired, dropped", 1, exp})
		}
		if err := add(v.Name+": attempts/s", ls, false); err != nil {
			return nil, nil, err
		}
		if up := f(func(b sim.ServiceBin) float64 { return b.ReplicasUp }); showReplicas(up) {
			rs := replicaSteps{xys: up, bin: r.BinS}
			plots[len(plots)-1].Add(rs)
			legends[len(legends)-1].Add("replicas serving (right scale)", rs)
		}
		prefix := prefixFor(v.Name, len(r.Services))
		queues = append(queues, line{"queue", prefix + "queue", i, f(func(b sim.ServiceBin) float64 { return b.Queue })})
		if lim := f(func(b sim.ServiceBin) float64 { return b.Limit }); nonZero(lim) {
			queues = append(queues, line{"limit", prefix + "concurrency limit", 1 + i, lim})
		}
	}
	if err := add("queue (requests)", queues, false); err != nil {
		return nil, nil, err
	}
	last := plots[len(plots)-1]
	last.X.Label.Text = "time (s)"
	return plots, legends, nil
}

// line is one series of a panel: its palette key, legend label and dash.
type line struct {
	key, label string
	dash       int
	xys        plotter.XYs
}

// panel makes one plot with its lines over the run's time span, y from 0.
func panel(r sim.Result, ylabel string, lines []line, withTrigger bool) (*plot.Plot, plot.Legend, error) {
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
func title(r sim.Result) string {
	s := Summarize(r)
	switch {
	case s.Verdict == "metastable":
		return fmt.Sprintf("%s: metastable, goodput never recovered after the trigger", r.Name)
	case s.Verdict == "recovered" && s.RecoveryS != nil && fromCollapse(r):
		return fmt.Sprintf("%s: recovered %.1f s after the collapse began", r.Name, *s.RecoveryS)
	case s.Verdict == "recovered" && s.RecoveryS != nil:
		return fmt.Sprintf("%s: recovered %.1f s after the trigger", r.Name, *s.RecoveryS)
	case s.Verdict == "":
		return r.Name
	}
	return r.Name + ": " + s.Verdict
}

// fromCollapse reports whether a recovered run's recovery_s surely counts
// from the start of its collapse, not from the end of its last trigger
// (see sim.Result): there is no trigger, the collapse began more than a
// bin after the trigger ended, or counting from that end would put the
// recovery after the end of the run (it came back while the trigger
// lasted: a runbook's doing).
func fromCollapse(r sim.Result) bool {
	end := math.Inf(-1)
	for _, t := range r.TriggerS {
		end = math.Max(end, t[1])
	}
	switch {
	case r.CollapseS == nil || r.RecoveryS == nil:
		return false
	case math.IsInf(end, -1):
		return true
	}
	return *r.CollapseS > end+r.BinS || end+*r.RecoveryS > r.DurationS+1e-9
}

func prefixFor(name string, n int) string {
	if n > 1 {
		return name + ": "
	}
	return ""
}

func clientSeries(c sim.ClientSeries, get func(sim.ClientBin) float64) plotter.XYs {
	xys := make(plotter.XYs, len(c.Bins))
	for i, b := range c.Bins {
		xys[i] = plotter.XY{X: finite(b.T), Y: finite(get(b))}
	}
	return xys
}

func serviceSeries(v sim.ServiceSeries, get func(sim.ServiceBin) float64) plotter.XYs {
	xys := make(plotter.XYs, len(v.Bins))
	for i, b := range v.Bins {
		xys[i] = plotter.XY{X: finite(b.T), Y: finite(get(b))}
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
	marks  []sim.ActionMark
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
