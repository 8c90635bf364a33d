package report

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/stormguard/stormguard/analyze"
)

// WriteAnalyze writes the report of `stormguard analyze` into dir (made if
// missing):
//
//	analysis.json      the Report, as `stormguard analyze --json` prints it
//	amplification.png  worst-case and budget-limited amplification of every
//	                   dependency path, a panel per run (and .svg)
//	vulnerable.png     each service's vulnerable load against the client's
//	                   configured rate, a panel per run (and .svg)
//	fluid.png          the fluid model's goodput against load, regions and
//	                   thresholds, a panel per run that has one (and .svg)
//	index.html         one page with everything, images inlined
//
// A chart with nothing to show (no bounded service, no fluid model) is
// left out.
func WriteAnalyze(dir string, r analyze.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{"analysis.json": append(j, '\n')}
	charts := map[string][]byte{}
	for _, c := range []struct {
		name string
		draw func(analyze.Report) ([]byte, []byte, error)
	}{
		{"amplification", analyzeAmplificationChart},
		{"vulnerable", analyzeVulnerableChart},
		{"fluid", analyzeFluidChart},
	} {
		png, svg, err := c.draw(r)
		if err != nil {
			return fmt.Errorf("report: %s chart: %w", c.name, err)
		}
		if png != nil {
			files[c.name+".png"], files[c.name+".svg"] = png, svg
			charts[c.name] = png
		}
	}
	var page bytes.Buffer
	if err := writeAnalyzeHTML(&page, r, charts); err != nil {
		return err
	}
	files["index.html"] = page.Bytes()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

//go:embed analyze.html.tmpl
var analyzeHTMLText string

var analyzeTmpl = template.Must(template.New("analyze").Parse(analyzeHTMLText))

// analyzeRunRow is one run in the page's table of key numbers.
type analyzeRunRow struct {
	Run, Anchor  string
	Changes      []string
	Class, Badge string
	Counts       string
	WorstPath    string
	Worst        string
	Budgeted     string
	Services     []analyzeServiceRow
	Paths        []analyzePathRow
	Truncated    bool
}

// analyzeServiceRow is one service and client of a run.
type analyzeServiceRow struct {
	Service, Capacity, Client, Rate, Amplification, Vulnerable, Margin, Fluid, Class string
}

// analyzePathRow is one dependency path.
type analyzePathRow struct {
	Path, Attempts, Worst, Budgeted, Expected string
}

// analyzeFindingRow is one finding, with its run.
type analyzeFindingRow struct {
	Run string
	analyze.Finding
}

func writeAnalyzeHTML(w io.Writer, r analyze.Report, charts map[string][]byte) error {
	dataURL := func(name string) template.URL {
		png := charts[name]
		if png == nil {
			return ""
		}
		return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))
	}
	var rows []analyzeRunRow
	var findings []analyzeFindingRow
	expected := false
	for i, a := range r.Analyses {
		rows = append(rows, analyzeRun(a, i))
		for _, f := range a.Findings {
			findings = append(findings, analyzeFindingRow{a.Run, f})
		}
		for _, s := range a.Services {
			expected = expected || s.ErrorRate > 0
		}
	}
	verdict, class := "OK", "stable"
	if r.Errors > 0 {
		verdict, class = "FAIL", "metastable"
	}
	key := []keyEntry{
		{sweepColour(analyzeWorstColour), "worst case: every attempt fails and is retried"},
		{sweepColour(analyzeBudgetColour), "within the retry budgets"},
		{sweepColour(sweepPale(sweepVerdictColours["stable"], 0.3)), "stable"},
		{sweepColour(sweepPale(sweepVerdictColours["metastable"], analyzeVulnerablePale)), "vulnerable: a trigger can tip it"},
		{sweepColour(sweepPale(sweepVerdictColours["metastable"], 0.3)), "metastable: it collapses by itself"},
		{sweepColour(palette["goodput"]), "goodput"},
		{sweepColour(palette["demand"]), "demand: goodput = load"},
		{sweepColour(sweepCollapseColour), "collapse threshold"},
		{sweepColour(sweepRecoveryColour), "recovery threshold"},
	}
	return analyzeTmpl.Execute(w, map[string]any{
		"File":          r.File,
		"Base":          filepath.Base(r.File),
		"Scenario":      r.Scenario,
		"Description":   r.Description,
		"Verdict":       verdict,
		"VerdictClass":  class,
		"Counts":        analyzeCounts(r.Errors, r.Warnings, r.Notes) + fmt.Sprintf(" over %s", analyzePlural(len(r.Analyses), "run")),
		"Advice":        AnalyzeAdvice(r),
		"Runs":          rows,
		"Findings":      findings,
		"Expected":      expected,
		"Amplification": dataURL("amplification"),
		"Vulnerable":    dataURL("vulnerable"),
		"Fluid":         dataURL("fluid"),
		"Key":           key,
	})
}

// analyzeRun gathers the key numbers of one run.
func analyzeRun(a analyze.Analysis, i int) analyzeRunRow {
	row := analyzeRunRow{Run: a.Run, Anchor: fmt.Sprintf("run-%d", i+1), Changes: a.Changes, Truncated: a.PathsTruncated,
		Counts: analyzeCounts(a.Count(analyze.Error), a.Count(analyze.Warning), a.Count(analyze.Info))}
	switch {
	case a.Count(analyze.Error) > 0:
		row.Class, row.Badge = "error", "fails"
	case a.Count(analyze.Warning) > 0:
		row.Class, row.Badge = "warning", "passes, with warnings"
	default:
		row.Class, row.Badge = "ok", "passes"
	}
	if len(a.Paths) > 0 {
		worst := a.Paths[0]
		for _, p := range a.Paths[1:] {
			if p.Worst > worst.Worst || p.Worst == worst.Worst && p.Budgeted > worst.Budgeted {
				worst = p
			}
		}
		row.WorstPath, row.Worst, row.Budgeted = worst.String(), analyzeTimes(worst.Worst), analyzeTimes(worst.Budgeted)
	}
	for _, p := range a.Paths {
		att := make([]string, len(p.Hops))
		for j, h := range p.Hops {
			att[j] = fmt.Sprint(h.Attempts)
		}
		row.Paths = append(row.Paths, analyzePathRow{Path: p.String(), Attempts: strings.Join(att, " × "),
			Worst: analyzeTimes(p.Worst), Budgeted: analyzeTimes(p.Budgeted), Expected: analyzeTimes(p.Expected)})
	}
	for _, s := range a.Services {
		capacity := "unbounded"
		if s.Bounded {
			capacity = analyzeRate(s.Capacity)
		}
		if len(s.Clients) == 0 {
			row.Services = append(row.Services, analyzeServiceRow{Service: s.Name, Capacity: capacity, Client: "-", Class: "none"})
		}
		for _, x := range s.Clients {
			sr := analyzeServiceRow{Service: s.Name, Capacity: capacity, Client: x.Client, Rate: "?", Vulnerable: "-", Margin: "-", Fluid: "-", Class: "none"}
			if x.RateKnown {
				sr.Rate = analyzeRate(x.Rate)
			}
			sr.Amplification = analyzeTimes(x.Worst)
			switch {
			case x.Effective != x.Budgeted:
				sr.Amplification += fmt.Sprintf(" (%s: first tries first)", analyzeTimes(x.Effective))
			case x.Budgeted != x.Worst:
				sr.Amplification += fmt.Sprintf(" (%s with budgets)", analyzeTimes(x.Budgeted))
			}
			if s.Bounded && x.VulnerableAbove > 0 {
				sr.Vulnerable = analyzeRate(x.VulnerableAbove)
				if x.RateKnown && x.Rate > 0 {
					m := x.Rate / x.VulnerableAbove
					if m > 1+1e-9 {
						sr.Margin, sr.Class = fmt.Sprintf("runs %s above it", analyzeTimes(analyzeRound(m))), "metastable"
					} else {
						sr.Margin, sr.Class = "runs at "+analyzeNum(analyzeRound(100*m))+"% of it", "stable"
					}
				}
			}
			if f := s.Fluid; f != nil && f.Client == x.Client {
				sr.Fluid = fmt.Sprintf("collapses above %s, recovers below %s", analyzeRate(f.Thresholds.Collapse), analyzeRate(f.Thresholds.Recovery))
				if f.Region != nil {
					sr.Fluid += fmt.Sprintf("; %s at %s", *f.Region, analyzeRate(x.Rate))
				}
			}
			row.Services = append(row.Services, sr)
		}
	}
	return row
}

// AnalyzeAdvice says in a sentence or two what to change: the fix of the
// first error finding (else of the first warning), and which run, if any,
// breaks no rule at severity error while another does.
func AnalyzeAdvice(r analyze.Report) string {
	if len(r.Analyses) == 0 {
		return "The file has no runs to analyse."
	}
	var first *analyze.Finding
	var run string
	for _, sev := range []analyze.Severity{analyze.Error, analyze.Warning} {
		for _, a := range r.Analyses {
			for i := range a.Findings {
				if a.Findings[i].Severity == sev {
					first, run = &a.Findings[i], a.Run
					break
				}
			}
			if first != nil {
				break
			}
		}
		if first != nil {
			break
		}
	}
	if first == nil {
		return "Nothing: no run breaks a rule of the checklist. Keep the file in CI (stormguard analyze exits 1 when one breaks)."
	}
	s := fmt.Sprintf("%s (%s, run %s, at %s): %s", analyzeFirstUpper(first.Severity.String()), first.Rule, run, first.Where, first.Fix)
	if r.Errors > 0 {
		var clean []string
		for _, a := range r.Analyses {
			if a.Count(analyze.Error) == 0 {
				clean = append(clean, a.Run)
			}
		}
		if len(clean) > 0 && len(clean) < len(r.Analyses) {
			s += fmt.Sprintf(" Run %s breaks no rule at severity error: ship what it changes.", strings.Join(clean, ", "))
		}
	}
	return s
}

func analyzeFirstUpper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func analyzeCounts(e, w, n int) string {
	return fmt.Sprintf("%s, %s, %s", analyzePlural(e, "error"), analyzePlural(w, "warning"), analyzePlural(n, "note"))
}

func analyzePlural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// analyzeTimes writes an amplification as the text output does: "27×",
// "1.10×", "12.5×".
func analyzeTimes(x float64) string {
	switch {
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// analyzeRound rounds x to 3 significant digits.
func analyzeRound(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

// analyzeRate writes a rate with at most 3 significant digits (whole
// numbers in full): "9.26/s", "44444/s".
func analyzeRate(x float64) string {
	return analyzeNum(x) + "/s"
}

func analyzeNum(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "∞"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	case math.Abs(x) >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3g", x)
}
