package report

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/analyze"
	"github.com/stormguard/stormguard/sim/scenario"
)

// analyzeExample analyses examples/NAME.yaml.
func analyzeExample(t *testing.T, name string) analyze.Report {
	t.Helper()
	f, err := scenario.Load(filepath.Join("..", "examples", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := analyze.File(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// analyzeChartText: words each chart must show (axis labels with units,
// legends, titles), for examples/three-tier.yaml and, for the fluid
// model, examples/hotos-toy.yaml.
var analyzeChartText = map[string][]string{
	"amplification": {"attempts at the path's last service per request (×), log scale", "users → web → api → db",
		"worst case: every attempt fails and is retried", "within the retry budgets", "naive: up to 27× at db, 27× within budgets",
		"stormguard: up to 3× at db, 1.10× within budgets", "1.10×"},
	"vulnerable": {"users: rate (new requests/s), log scale", "vulnerable above 9.26/s", "you run here: 150/s, 16.2× above",
		"naive: db is vulnerable above 9.26/s; users runs at 150/s, 16.2× above it", "db: 250/s ÷ 27×",
		"safe: a storm's load stays within capacity", "vulnerable: a storm's load exceeds capacity"},
	"fluid": {"app: offered load (new requests/s)", "app: goodput (requests/s)", "collapse 300/s", "recovery 150/s",
		"you run here: 280/s", "naive: db is vulnerable at 280/s (recovers below 150/s, collapses above 300/s)",
		"stable: only the healthy state", "vulnerable: a trigger can tip it", "metastable: it collapses by itself",
		"goodput, healthy state (empty queue)", "goodput, collapsed state (full queue)"},
}

// checkAnalyzeCharts checks the named charts in dir: the PNG decodes, the
// SVG starts as one, and with words, each shows its analyzeChartText.
func checkAnalyzeCharts(t *testing.T, dir string, words bool, names ...string) {
	t.Helper()
	for _, name := range names {
		checkPNG(t, filepath.Join(dir, name+".png"))
		svg := readFile(t, filepath.Join(dir, name+".svg"))
		if !bytes.HasPrefix(svg, []byte("<?xml")) && !bytes.HasPrefix(svg, []byte("<svg")) {
			t.Errorf("%s.svg starts with %q", name, svg[:min(len(svg), 20)])
		}
		if !words {
			continue
		}
		text := html.UnescapeString(string(svg))
		for _, want := range analyzeChartText[name] {
			if !strings.Contains(text, want) {
				t.Errorf("%s.svg lacks %q", name, want)
			}
		}
	}
}

// TestWriteAnalyze writes the report of the real analysis of
// examples/three-tier.yaml: every file, PNGs that decode, SVGs, and a
// self-contained page with the verdict, the advice, the key numbers and
// the findings.
func TestWriteAnalyze(t *testing.T) {
	rep := analyzeExample(t, "three-tier")
	dir := filepath.Join(t.TempDir(), "made")
	if err := WriteAnalyze(dir, rep); err != nil {
		t.Fatal(err)
	}
	var back analyze.Report
	readJSON(t, filepath.Join(dir, "analysis.json"), &back)
	if back.Scenario != "three-tier" || len(back.Analyses) != 2 || back.Errors != 4 || back.Analyses[0].Paths[2].Worst != 27 {
		t.Errorf("analysis.json = %+v", back)
	}
	want, _ := json.MarshalIndent(rep, "", "  ")
	if got := readFile(t, filepath.Join(dir, "analysis.json")); !bytes.Equal(bytes.TrimSpace(got), want) {
		t.Error("analysis.json is not the Report")
	}
	checkAnalyzeCharts(t, dir, true, "amplification", "vulnerable")
	// No service of three-tier is one the fluid model describes (the
	// client's target, web, makes calls): no fluid chart.
	if _, err := os.Stat(filepath.Join(dir, "fluid.png")); !os.IsNotExist(err) {
		t.Errorf("fluid.png written without a fluid model (%v)", err)
	}
	page := readFile(t, filepath.Join(dir, "index.html"))
	checkSweepPage(t, page, 2)
	for _, want := range []string{
		"Analyze: three-tier", `class="badge metastable">FAIL`, "4 errors, 10 warnings, 0 notes over 2 runs",
		"What to change:", "Let api→db own the retries", "Run stormguard breaks no rule at severity error",
		"examples/three-tier.yaml", "services.db.defenses: stormguard",
		"users → web → api → db", "27×", "1.10×", "9.26/s", "runs 16.2× above it", "runs at 60% of it",
		`class="badge error">error`, `class="badge warning">warning`, "layered-retries", "missing-jitter", "timeout-exceeds-caller",
		"amplification.svg", "vulnerable.svg", "analysis.json",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(string(page), "fluid.svg") {
		t.Error("index.html links a fluid chart it does not have")
	}
}

// TestWriteAnalyzeFluid: a file whose client calls a service the fluid
// model describes gets the fluid chart, its thresholds on the page.
func TestWriteAnalyzeFluid(t *testing.T) {
	dir := t.TempDir()
	if err := WriteAnalyze(dir, analyzeExample(t, "hotos-toy")); err != nil {
		t.Fatal(err)
	}
	checkAnalyzeCharts(t, dir, false, "amplification", "vulnerable")
	checkAnalyzeCharts(t, dir, true, "fluid")
	page := readFile(t, filepath.Join(dir, "index.html"))
	checkSweepPage(t, page, 3)
	for _, want := range []string{"collapses above 300/s, recovers below 150/s; vulnerable at 280/s", "fluid.svg"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

// TestWriteAnalyzeEveryExample: every example's report is written, with
// a well-formed, self-contained page (paper08-sim-a: twelve runs; sim-c:
// a closed loop without a steady rate).
func TestWriteAnalyzeEveryExample(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rep := analyzeExample(t, name)
			if err := WriteAnalyze(dir, rep); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range []string{"amplification", "vulnerable", "fluid"} {
				if _, err := os.Stat(filepath.Join(dir, c+".png")); err == nil {
					checkAnalyzeCharts(t, dir, false, c)
					n++
				}
			}
			if n < 2 {
				t.Errorf("only %d charts", n)
			}
			checkSweepPage(t, readFile(t, filepath.Join(dir, "index.html")), n)
		})
	}
}

func TestAnalyzeAdvice(t *testing.T) {
	rep := analyzeExample(t, "three-tier")
	a := AnalyzeAdvice(rep)
	if !strings.HasPrefix(a, "Error (vulnerable, run naive, at db): Cut the amplification at db") {
		t.Errorf("advice %q", a)
	}
	// The stormguard run's one finding is the warning that it rehearses
	// no off switch.
	fixed := rep
	fixed.Analyses = rep.Analyses[1:]
	fixed.Errors, fixed.Warnings, fixed.Notes = 0, 1, 0
	if a := AnalyzeAdvice(fixed); !strings.HasPrefix(a, "Warning (no-off-switch, run stormguard, at runbook): Wire a kill switch") {
		t.Errorf("stormguard: %q", a)
	}
	clean := fixed
	clean.Analyses = []analyze.Analysis{rep.Analyses[1]}
	clean.Analyses[0].Findings = nil
	clean.Warnings = 0
	if a := AnalyzeAdvice(clean); !strings.HasPrefix(a, "Nothing: no run breaks a rule") {
		t.Errorf("clean: %q", a)
	}
	if a := AnalyzeAdvice(analyze.Report{}); !strings.Contains(a, "no runs") {
		t.Errorf("empty: %q", a)
	}
}

// TestAnalyzeColours: the analyze page gives the verdicts the sim and
// sweep pages' colours, and its charts reuse the palette.
func TestAnalyzeColours(t *testing.T) {
	text := string(readFile(t, "analyze.html.tmpl"))
	for v, c := range sweepVerdictColours {
		want := ".badge." + v + " { background: " + string(sweepColour(c)) + "; }"
		if !strings.Contains(text, want) {
			t.Errorf("analyze.html.tmpl lacks %q", want)
		}
	}
	if analyzeWorstColour != palette["offered_retries"] || analyzeBudgetColour != palette["offered_first"] {
		t.Error("the amplification bars are not in the palette's colours")
	}
}

// TestWriteAnalyzeDump writes the reports of every example into
// $STORMGUARD_ANALYZE_DUMP, to look at; skipped without it.
func TestWriteAnalyzeDump(t *testing.T) {
	dir := os.Getenv("STORMGUARD_ANALYZE_DUMP")
	if dir == "" {
		t.Skip("STORMGUARD_ANALYZE_DUMP is not set")
	}
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if err := WriteAnalyze(filepath.Join(dir, name), analyzeExample(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
