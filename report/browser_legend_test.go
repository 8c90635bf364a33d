package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/analyze"
	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep"
)

// browserReports writes the three reports the browser tests open: the sim
// report of the built-in scenario, shortened (its first run with two
// replicas and a runbook action, so that the chart marks both), the sweep
// report of a small sweep of it (its four charts) and its analyze report
// (three charts). It returns the report directories and the runs.
func browserReports(t *testing.T, dir string) (simDir, sweepDir, analyzeDir string, runs []result.Result) {
	t.Helper()
	f, err := scenario.Parse(examples.DefaultName, examples.Default())
	if err != nil {
		t.Fatal(err)
	}
	out := result.Output{Scenario: f.Base.Name, Description: f.Base.Description}
	for i, r := range f.Runs {
		s := r.Scenario
		s.Duration = 40 * time.Second
		if i == 0 {
			// Runbook marks and replicas on the chart: two replicas of
			// half the workers each, and an operator who turns retries off.
			s.Services = slices.Clone(s.Services)
			s.Services[0].Replicas, s.Services[0].Workers = 2, max(1, s.Services[0].Workers/2)
			s.Actions = []scenario.Action{{At: 25 * time.Second, Kind: "retries-off", Target: s.Clients[0].Name}}
		}
		res, err := sim.Run(t.Context(), s, r.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		out.Runs = append(out.Runs, res)
	}
	simDir = filepath.Join(dir, "sim")
	if err := WriteSim(simDir, out); err != nil {
		t.Fatal(err)
	}

	plan, err := sweep.NewPlan(f, sweep.Options{From: 200, To: 360, Step: 40, Hold: 3 * time.Second,
		Loads: []float64{150, 250}, Max: 4, Resolution: 1, After: 20 * time.Second,
		CapacityAt: 40 * time.Second, CapacityResolution: 1, LatestFactor: 2, LatestResolution: 30 * time.Second, CompareSeeds: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sweep.Run(t.Context(), plan, sweep.Exec{})
	if err != nil {
		t.Fatal(err)
	}
	sweepDir = filepath.Join(dir, "sweep")
	if err := WriteSweep(sweepDir, res); err != nil {
		t.Fatal(err)
	}

	rep, err := analyze.File(f)
	if err != nil {
		t.Fatal(err)
	}
	analyzeDir = filepath.Join(dir, "analyze")
	if err := WriteAnalyze(analyzeDir, rep); err != nil {
		t.Fatal(err)
	}
	return simDir, sweepDir, analyzeDir, out.Runs
}

// legendProbe measures, after load, every chart of the page (each an
// inline svg in a div with data-case): the svg's box; each legend label
// (a text the test marked data-legend) with its box; and each swatch of
// the legend: every drawn element other than text whose extent lies in
// the 30 units left of the legend's text column (data-legend-x, in the
// svg's user units: the thumbnails, 24 pt wide, end a space before the
// text). Boxes are getBoundingClientRect's, in CSS px. The result goes,
// as JSON, into an attribute of body that --dump-dom shows.
const legendProbe = `<script>
window.addEventListener("load", function () {
  function box(r) { return [r.left, r.top, r.right, r.bottom]; }
  var out = [];
  var cases = document.querySelectorAll("div[data-case]");
  for (var i = 0; i < cases.length; i++) {
    var d = cases[i], svg = d.querySelector("svg"), lx = parseFloat(d.getAttribute("data-legend-x"));
    var c = {name: d.getAttribute("data-case"), svg: box(svg.getBoundingClientRect()), labels: [], swatches: []};
    var ts = svg.querySelectorAll("text[data-legend]");
    for (var j = 0; j < ts.length; j++) {
      c.labels.push({text: ts[j].textContent, box: box(ts[j].getBoundingClientRect())});
    }
    var els = svg.querySelectorAll("path, rect, line, polyline, polygon, circle, ellipse");
    for (var k = 0; k < els.length; k++) {
      var b = els[k].getBBox();
      if (b.x >= lx - 30 && b.x + b.width <= lx && (b.width > 0 || b.height > 0)) {
        c.swatches.push(box(els[k].getBoundingClientRect()));
      }
    }
    out.push(c);
  }
  document.body.setAttribute("data-legends", JSON.stringify(out));
});
</script>`

// legendBox is a box in CSS px: left, top, right, bottom.
type legendBox [4]float64

// gap is the distance between two boxes: negative when they overlap (then
// minus the depth of the overlap along the axis it is shallowest on).
func (a legendBox) gap(b legendBox) float64 {
	dx := max(b[0]-a[2], a[0]-b[2])
	dy := max(b[1]-a[3], a[1]-b[3])
	return max(dx, dy)
}

type legendLabel struct {
	Text string    `json:"text"`
	Box  legendBox `json:"box"`
}

// legendMeasure is what the probe measured of one chart.
type legendMeasure struct {
	Name     string        `json:"name"`
	SVG      legendBox     `json:"svg"`
	Labels   []legendLabel `json:"labels"`
	Swatches []legendBox   `json:"swatches"`
}

// legendChart is one SVG of the probe page: its case name, its markup with the
// legend's labels marked, and the legend's text column, in SVG units.
type legendChart struct {
	name string
	svg  []byte
	x    float64
}

// legendTolerance: boxes that touch within it do not overlap (rounding of
// the layout to fractions of a pixel).
const legendTolerance = 0.5

// legendFindings checks one chart's legend in the browser's layout: no two
// labels overlap, no label overlaps a swatch, and every label lies inside
// the svg's viewport. It returns what it found wrong (sorted, each kind
// once; none for a sound legend), and the smallest gaps between two
// labels and between a label and a swatch, in px.
func legendFindings(m legendMeasure) (findings []string, labelGap, swatchGap float64) {
	found := map[string]bool{}
	labelGap, swatchGap = math.Inf(1), math.Inf(1)
	for i, a := range m.Labels {
		for _, b := range m.Labels[i+1:] {
			g := a.Box.gap(b.Box)
			labelGap = min(labelGap, g)
			if g < -legendTolerance {
				found["labels overlap"] = true
			}
		}
		for _, s := range m.Swatches {
			g := a.Box.gap(s)
			swatchGap = min(swatchGap, g)
			if g < -legendTolerance {
				found["label overlaps a swatch"] = true
			}
		}
		if a.Box[0] < m.SVG[0]-legendTolerance || a.Box[1] < m.SVG[1]-legendTolerance ||
			a.Box[2] > m.SVG[2]+legendTolerance || a.Box[3] > m.SVG[3]+legendTolerance {
			found["label outside the viewport"] = true
		}
	}
	for f := range found {
		findings = append(findings, f)
	}
	sort.Strings(findings)
	return findings, labelGap, swatchGap
}

var (
	svgTextX = regexp.MustCompile(`<text x="([-0-9.e+]+)" y="([-0-9.e+]+)"`)
)

// legendMark prepares a chart's SVG for the probe page: it drops the XML
// prologue, marks the legend's labels (gonum draws them all left-aligned
// at one x, right of every other text of the chart, so: the texts at the
// largest x) with data-legend, and returns the legend's x and the labels.
func legendMark(t *testing.T, svg []byte) (marked []byte, x float64, labels int) {
	t.Helper()
	i := bytes.Index(svg, []byte("<svg"))
	if i < 0 {
		t.Fatal("no <svg> element")
	}
	svg = svg[i:]
	x = math.Inf(-1)
	for _, m := range svgTextX.FindAllSubmatch(svg, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		x = max(x, v)
	}
	marked = svgTextX.ReplaceAllFunc(svg, func(s []byte) []byte {
		m := svgTextX.FindSubmatch(s)
		if v, _ := strconv.ParseFloat(string(m[1]), 64); v == x {
			labels++
			return append([]byte(`<text data-legend="1"`), s[len("<text"):]...)
		}
		return s
	})
	return marked, x, labels
}

// legendBreak rewrites the marked legend labels of an SVG (the test's
// deliberately broken inputs): f maps a label's x and y attributes to new
// ones and returns an extra style for it.
func legendBreak(svg []byte, f func(x, y float64) (float64, float64, string)) []byte {
	re := regexp.MustCompile(`<text data-legend="1" x="([-0-9.e+]+)" y="([-0-9.e+]+)"`)
	return re.ReplaceAllFunc(svg, func(s []byte) []byte {
		m := re.FindSubmatch(s)
		x, _ := strconv.ParseFloat(string(m[1]), 64)
		y, _ := strconv.ParseFloat(string(m[2]), 64)
		nx, ny, style := f(x, y)
		extra := ""
		if style != "" {
			extra = ` style="` + style + `"`
		}
		return fmt.Appendf(nil, `<text data-legend="1"%s x="%g" y="%g"`, extra, nx, ny)
	})
}

// TestLegendsDoNotOverlapInChromium opens every SVG chart of the three
// reports (sim: one per run; sweep: hysteresis, phase, capacity, latest;
// analyze: amplification, vulnerable load, fluid model) inline in one
// page in headless Chromium, which lays the text out with the fonts it
// finds for the charts' font stack, and measures the legends: no two
// labels overlap, no label runs into a swatch, every label lies inside
// the chart. Deliberately broken copies of one chart (the labels stacked
// on one spot, moved onto the swatches, pushed past the right edge, set
// in a font twice as large) must be flagged, so that the check can fail.
func TestLegendsDoNotOverlapInChromium(t *testing.T) {
	bin := browserChromium(t)
	dir := t.TempDir()
	simDir, sweepDir, analyzeDir, runs := browserReports(t, dir)

	var charts []legendChart
	want := map[string][]string{} // case -> findings
	wantLabels := map[string]int{}
	add := func(name, file string, labels int) {
		svg, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		marked, x, n := legendMark(t, svg)
		if n < labels {
			t.Errorf("%s: %d legend labels found in the SVG, want at least %d", name, n, labels)
		}
		wantLabels[name] = n
		charts = append(charts, legendChart{name, marked, x})
		want[name] = nil
	}
	for i, name := range FileNames(runs) {
		add("sim/"+name, filepath.Join(simDir, name+".svg"), 4)
		if i == 0 {
			// The first run marks its runbook action and replicas.
			if c := charts[len(charts)-1]; !bytes.Contains(c.svg, []byte(`data-legend="1" x=`)) {
				t.Errorf("%s: no legend", c.name)
			}
		}
	}
	for _, base := range []string{"hysteresis", "phase", "capacity", "latest"} {
		add("sweep/"+base, filepath.Join(sweepDir, base+".svg"), 2)
	}
	svgs, err := filepath.Glob(filepath.Join(analyzeDir, "*.svg"))
	if err != nil || len(svgs) != 3 {
		t.Fatalf("the analyze report wrote %d SVG charts (%v), want 3", len(svgs), err)
	}
	for _, f := range svgs {
		add("analyze/"+strings.TrimSuffix(filepath.Base(f), ".svg"), f, 2)
	}

	// The broken copies of the first sweep chart: its labels moved, or its
	// text as gonum wrote it (without the textLength SVGFonts adds, and
	// with or without the font stack), which a browser with none of the
	// stack's fonts sets too wide.
	base := charts[len(runs)]
	noLength := regexp.MustCompile(` textLength="[^"]*" lengthAdjust="spacingAndGlyphs"`).ReplaceAll(base.svg, nil)
	gonumText := noLength
	for _, f := range svgFontStacks {
		gonumText = bytes.ReplaceAll(gonumText, []byte("font-family:"+f[1]+";"), []byte("font-family:"+f[0]+";"))
	}
	move := func(f func(x, y float64) (float64, float64, string)) []byte { return legendBreak(base.svg, f) }
	broken := []struct {
		name string
		svg  []byte
		want []string
	}{
		{"stacked", move(func(x, y float64) (float64, float64, string) { return x, -100, "" }), []string{"labels overlap"}},
		{"on the swatches", move(func(x, y float64) (float64, float64, string) { return x - 20, y, "" }), []string{"label overlaps a swatch"}},
		{"past the edge", move(func(x, y float64) (float64, float64, string) { return x + 120, y, "" }), []string{"label outside the viewport"}},
		{"twice the size", move(func(x, y float64) (float64, float64, string) { return x, y, "font-size:20px" }), []string{"labels overlap"}},
		{"as gonum wrote it", gonumText, []string{"label outside the viewport"}},
		{"font stack without textLength", noLength, []string{"label outside the viewport"}},
	}

	// Two browsers: Chromium with the machine's fonts (Debian's chromium
	// recommends the Liberation fonts; CI installs it without them), and
	// Chromium with DejaVu only (a fontconfig of our own), none of the
	// stack's fonts: there the broken copies must be flagged.
	dejavu := "/usr/share/fonts/truetype/dejavu"
	for _, env := range []struct {
		name   string
		fonts  string // a fontconfig directory; "" for the machine's
		broken bool
	}{
		{"machine fonts", "", false},
		{"DejaVu only", dejavu, true},
	} {
		t.Run(env.name, func(t *testing.T) {
			cases := slices.Clone(charts)
			if env.broken {
				for _, b := range broken {
					name := "broken/" + b.name
					cases = append(cases, legendChart{name, b.svg, base.x})
					want[name], wantLabels[name] = b.want, wantLabels[base.name]
				}
			}
			if env.fonts != "" {
				if _, err := os.Stat(filepath.Join(env.fonts, "DejaVuSerif.ttf")); err != nil {
					msg := "no DejaVu fonts (Debian: fonts-dejavu-core): " + err.Error()
					if os.Getenv("CI") == "true" {
						t.Fatal(msg)
					}
					t.Skip(msg)
				}
				t.Setenv("FONTCONFIG_FILE", legendFontconfig(t, env.fonts))
			}
			got := map[string]legendMeasure{}
			for _, m := range legendProbeRun(t, bin, legendPage(t, cases)) {
				got[m.Name] = m
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					m, ok := got[c.name]
					if !ok {
						t.Fatal("the probe did not measure the chart")
					}
					if len(m.Labels) != wantLabels[c.name] {
						t.Errorf("the probe measured %d legend labels, want %d", len(m.Labels), wantLabels[c.name])
					}
					if len(m.Swatches) < len(m.Labels) {
						t.Errorf("the probe found %d swatches for %d labels", len(m.Swatches), len(m.Labels))
					}
					findings, labelGap, swatchGap := legendFindings(m)
					if !slices.Equal(findings, want[c.name]) {
						t.Errorf("findings %q, want %q\n%+v", findings, want[c.name], m)
					}
					t.Logf("%d labels, %d swatches; smallest gap between labels %.1f px, between a label and a swatch %.1f px; labels end %.1f px inside the right edge",
						len(m.Labels), len(m.Swatches), labelGap, swatchGap, legendRightRoom(m))
				})
			}
		})
	}
}

// legendPage writes the probe page: every chart inline, in a div named
// by its case, then the probe.
func legendPage(t *testing.T, charts []legendChart) string {
	t.Helper()
	var page bytes.Buffer
	page.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>body{margin:0} div{margin:0 0 16px}</style></head><body>\n")
	for _, c := range charts {
		fmt.Fprintf(&page, "<div data-case=\"%s\" data-legend-x=\"%g\">\n%s</div>\n", html.EscapeString(c.name), c.x, c.svg)
	}
	page.WriteString(legendProbe + "\n</body></html>\n")
	file := filepath.Join(t.TempDir(), "legends.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// legendFontconfig writes a fontconfig that offers the browser the fonts
// of dir only, DejaVu's families as its generic ones, and returns its path.
func legendFontconfig(t *testing.T, dir string) string {
	t.Helper()
	tmp := t.TempDir()
	conf := `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>` + dir + `</dir>
  <cachedir>` + filepath.Join(tmp, "cache") + `</cachedir>
  <alias><family>serif</family><prefer><family>DejaVu Serif</family></prefer></alias>
  <alias><family>sans-serif</family><prefer><family>DejaVu Sans</family></prefer></alias>
  <alias><family>monospace</family><prefer><family>DejaVu Sans Mono</family></prefer></alias>
</fontconfig>
`
	file := filepath.Join(tmp, "fonts.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// legendRightRoom is the room between the widest label's right end and
// the chart's right edge, in px.
func legendRightRoom(m legendMeasure) float64 {
	room := math.Inf(1)
	for _, l := range m.Labels {
		room = min(room, m.SVG[2]-l.Box[2])
	}
	return room
}

var legendAttr = regexp.MustCompile(`data-legends="([^"]*)"`)

// legendProbeRun opens the page in headless Chromium (with retries, as
// browserCharts) and returns what the probe measured.
func legendProbeRun(t *testing.T, bin, file string) []legendMeasure {
	t.Helper()
	var stderr string
	for range 4 {
		dom, errText, ok := browserDumpDOM(t, bin, file)
		stderr = errText
		if !ok {
			continue
		}
		if m := legendAttr.FindSubmatch(dom); m != nil {
			var out []legendMeasure
			if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("the probe left no result: the page did not load or scripts did not run\n%s", browserTail(stderr, 2000))
	return nil
}
