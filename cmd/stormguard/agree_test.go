package main

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// verdictRuns are small runs, one of each verdict, simulated.
func verdictRuns(t *testing.T) []result.Result {
	t.Helper()
	y := `
name: verdicts
duration: 120s
clients:
  - {name: app, target: db, arrivals: {rate: 5}, policy: {preset: naive, max_attempts: 3}, timeout: 2s}
services:
  - {name: db, workers: 1, service_time: {kind: constant, mean: 100ms}, queue: {capacity: 40}}
runs:
  - name: calm
    set: {clients.app.arrivals.rate: 2}
  - name: blip
    set: {clients.app.arrivals.rate: 2, triggers: [{kind: outage, target: db, at: 30s, duration: 10s, mode: drop}]}
  - name: storm
    set: {triggers: [{kind: capacity, target: db, at: 30s, duration: 20s, factor: 0.3}]}
  - name: errors
    set: {clients.app.arrivals.rate: 2, clients.app.policy: {preset: naive, max_attempts: 1}, services.db.error_rate: 0.5}
  - name: endless
    set: {clients.app.timeout: 3h, services.db.workers: 1000, services.db.service_time: {kind: constant, mean: 2h}}
`
	f, err := scenario.Parse("verdicts.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var runs []result.Result
	want := []string{result.Stable, result.Recovered, result.Metastable, result.Degraded, result.NotJudged}
	for i, r := range f.Runs {
		res, err := sim.Run(t.Context(), r.Scenario, r.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != want[i] {
			t.Fatalf("run %s: %s (%s), want %s: the test needs one run of each verdict", r.Name, res.Verdict, res.Why, want[i])
		}
		runs = append(runs, res)
	}
	return runs
}

// pageText is an HTML page's text: tags dropped, entities decoded, spaces
// folded.
func pageText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?s)<style>.*?</style>|<[^>]*>`).ReplaceAllString(string(b), " ")
	return strings.Join(strings.Fields(html.UnescapeString(s)), " ")
}

// folded is s with its spaces and line breaks folded (the terminal wraps).
func folded(s string) string { return strings.Join(strings.Fields(s), " ") }

// advice is the sentence after "What to change:" up to the end or the
// next section.
func advice(text string) string {
	_, a, _ := strings.Cut(text, "What to change: ")
	for _, end := range []string{" Report: ", " Requests (every one", " Verdicts by client", " Demand and goodput", " In the charts", " run verdict recovery"} {
		if i := strings.Index(a, end); i >= 0 {
			a = a[:i]
		}
	}
	return strings.TrimSpace(a)
}

// checkAgree checks that page and chart say what the terminal says about
// each run: its verdict, recovery, why, its parts' verdicts, the advice.
func checkAgree(t *testing.T, what, terminal, page string, runs []result.Result, charts func(r result.Result) string) {
	t.Helper()
	if a, b := advice(terminal), advice(page); a == "" || a != b {
		t.Errorf("%s: the advice differs:\nterminal: %s\npage:     %s", what, a, b)
	}
	parts := report.PartsTable(runs)
	for i, r := range runs {
		s := report.Summarize(r)
		for _, w := range append([]string{r.Verdict, s.RecoveryText(), r.Why}, parts.Rows[i].Cells...) {
			if !strings.Contains(terminal, w) {
				t.Errorf("%s: the terminal lacks %q", what, w)
			}
			if !strings.Contains(page, w) {
				t.Errorf("%s: the page lacks %q", what, w)
			}
		}
		// The same run's line: its name, verdict and recovery together.
		row := r.Name + " " + r.Verdict + " " + s.RecoveryText()
		if !strings.Contains(terminal, row) || !strings.Contains(page, row) {
			t.Errorf("%s: the terminal or the page lacks the row %q", what, row)
		}
		title := report.RunTitle(r)
		if !strings.Contains(title, r.Verdict) || (r.Verdict == result.Recovered && !strings.Contains(title, s.RecoveryText())) {
			t.Errorf("%s: chart title %q does not say %s %s", what, title, r.Verdict, s.RecoveryText())
		}
		if svg := charts(r); !strings.Contains(svg, html.EscapeString(title)) {
			t.Errorf("%s: the chart of %s lacks its title %q", what, r.Name, title)
		}
	}
	// A sentence of the advice for one kind of runs never shows for
	// another on any page.
	for _, p := range []string{"Every run stayed metastable", "Every run came through", "Every run was degraded"} {
		if strings.Contains(page, p) != strings.Contains(terminal, p) {
			t.Errorf("%s: %q is on one of the page and the terminal only", what, p)
		}
	}
}

// TestPagesSayWhatTheTerminalSays renders the simulator's page and the
// lab's for runs of every verdict (stable, recovered, metastable,
// degraded, not judged; the lab's inconclusive), and checks that the page,
// the charts and the terminal say the same of each run.
func TestPagesSayWhatTheTerminalSays(t *testing.T) {
	runs := verdictRuns(t)
	out := result.Output{Scenario: "verdicts", Runs: runs}
	changes := map[string][]string{"storm": {"triggers: [capacity]"}, "errors": {"services.db.error_rate: 0.5"}}

	t.Run("sim", func(t *testing.T) {
		var term strings.Builder
		printTable(&term, out, changes, time.Second)
		dir := t.TempDir()
		if err := (report.Sim{Output: out, Changes: changes}).Write(dir); err != nil {
			t.Fatal(err)
		}
		names := report.FileNames(runs)
		checkAgree(t, "sim", folded(term.String()), pageText(t, filepath.Join(dir, "index.html")), runs, func(r result.Result) string {
			for i := range runs {
				if runs[i].Name == r.Name {
					b, _ := os.ReadFile(filepath.Join(dir, names[i]+".svg"))
					return string(b)
				}
			}
			return ""
		})
	})

	t.Run("lab", func(t *testing.T) {
		var lo lab.Output
		lo.Scenario = "verdicts"
		for i, r := range runs {
			rr := lab.RunResult{Result: r, Outcomes: lab.Outcomes{Sent: 1, Succeeded: 1}, Host: lab.Host{Reason: "host ok: timers 0.5 ms late at p99, service time 1.00× nominal"}}
			rr.Result.Clients = append([]result.ClientSeries(nil), r.Clients...)
			rr.Result.Services = append([]result.ServiceSeries(nil), r.Services...)
			if i == 1 { // the recovered run's host was starved
				rr.Host = lab.Host{Starved: true, Reason: "host starved: timers 38 ms late at p99, service time 2.10× nominal"}
				rr.MarkInconclusive()
			}
			lo.Add(rr, r)
		}
		if lo.Runs[1].Verdict != lab.VerdictInconclusive {
			t.Fatalf("the starved run is %s", lo.Runs[1].Verdict)
		}
		var term strings.Builder
		printLabTable(&term, lo, changes, time.Second)
		printLab(&term, lo)
		dir := t.TempDir()
		if err := lab.WriteReport(dir, lo, changes); err != nil {
			t.Fatal(err)
		}
		page := pageText(t, filepath.Join(dir, "index.html"))
		figure, _ := os.ReadFile(filepath.Join(dir, "lab.svg"))
		names := report.FileNames(lo.Runs)
		checkAgree(t, "lab", folded(term.String()), page, lo.Runs, func(r result.Result) string {
			for i := range lo.Runs {
				if lo.Runs[i].Name == r.Name {
					b, _ := os.ReadFile(filepath.Join(dir, names[i]+".svg"))
					return string(b)
				}
			}
			return ""
		})
		// The lab's figure titles each column with the lab's verdict.
		for _, r := range lo.Runs {
			lr := r
			lr.Name += " (lab)"
			if w := html.EscapeString(report.RunTitle(lr)); !strings.Contains(string(figure), w) {
				t.Errorf("lab.svg lacks the title %q", w)
			}
		}
		if strings.Contains(page, "1.2 s") && !strings.Contains(folded(term.String()), "1.2 s") {
			t.Error("the page shows a recovery time the terminal does not")
		}
	})
}
