package report

import (
	"regexp"
	"testing"

	"github.com/stormguard/stormguard/analyze"
)

// Every amplification panel of one chart has the same scale: a run whose
// figures stay under 4× is drawn on the log scale of a run that reaches
// 20×, over the same range, so that the runs compare at a glance (it was
// linear in one panel and log in the other).
func TestAmplificationPanelsShareScale(t *testing.T) {
	path := func(worst, budgeted float64) analyze.Path {
		return analyze.Path{Client: "app", Services: []string{"db"}, Worst: worst, Budgeted: budgeted}
	}
	runs := []analyze.Analysis{
		{Run: "small", Paths: []analyze.Path{path(2, 1.1)}},
		{Run: "large", Paths: []analyze.Path{path(20, 1.2)}},
	}
	tests := []struct {
		name    string
		runs    []analyze.Analysis
		wantLog bool
	}{
		{"one run under 4×: linear", runs[:1], false},
		{"both runs: log for both", runs, true},
	}
	for _, tt := range tests {
		top := 1.0
		for _, a := range tt.runs {
			top = max(top, analyzeAmplificationTop(a))
		}
		var maxes []float64
		for _, a := range tt.runs {
			var leg sweepLegend
			p, _, err := analyzeAmplificationPanel(a, top, &leg)
			if err != nil {
				t.Fatal(err)
			}
			_, isLog := p.X.Tick.Marker.(analyzeLogTicks)
			if isLog != tt.wantLog {
				t.Errorf("%s: run %s: log scale %v, want %v", tt.name, a.Run, isLog, tt.wantLog)
			}
			maxes = append(maxes, p.X.Max)
		}
		for _, m := range maxes[1:] {
			if m != maxes[0] {
				t.Errorf("%s: the panels' ranges differ: %v", tt.name, maxes)
			}
		}
	}
	// The whole chart draws.
	if png, svg, err := analyzeAmplificationChart(analyze.Report{Analyses: runs}); err != nil || len(png) == 0 || len(svg) == 0 {
		t.Errorf("the chart: %d B PNG, %d B SVG, %v", len(png), len(svg), err)
	}
}

// Every font of the charts' SVG falls back on fonts with the same metrics,
// so that a browser without the Liberation fonts lays the text out as
// gonum measured it (legends overlapped in one that fell back on its
// default serif).
func TestSVGFontsHaveMetricFallbacks(t *testing.T) {
	_, svg, err := analyzeAmplificationChart(analyze.Report{Analyses: []analyze.Analysis{
		{Run: "r", Paths: []analyze.Path{{Client: "app", Services: []string{"db"}, Worst: 3, Budgeted: 1.1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	families := regexp.MustCompile(`font-family:([^;"]*)`).FindAllSubmatch(svg, -1)
	if len(families) == 0 {
		t.Fatal("the SVG names no font")
	}
	for _, f := range families {
		if got := string(f[1]); got != "'Liberation Serif','Times New Roman',Tinos,Times,serif" {
			t.Errorf("font-family %q; want Liberation Serif with its metric-compatible fallbacks", got)
			break
		}
	}
	if got := SVGFonts([]byte("font-family:Liberation Sans;x")); string(got) != "font-family:'Liberation Sans',Arial,Arimo,Helvetica,sans-serif;x" {
		t.Errorf("SVGFonts: %s", got)
	}
}
