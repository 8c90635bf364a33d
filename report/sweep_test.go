package report

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep"
)

func sweepFP(v float64) *float64 { return &v }

// syntheticSweep builds a sweep by hand: "naive" collapses at 300 and
// recovers at 150, and a 2 s outage tips it from 160/s (0 s at 300/s:
// overloaded); "stormguard" never tips.
func syntheticSweep() sweep.Result {
	ramp := func(collapse, recovery *float64) *sweep.Ramp {
		r := &sweep.Ramp{RampPlan: sweep.RampPlan{From: 100, To: 400, Step: 50, HoldS: 20}, Collapse: collapse, Recovery: recovery, Simulations: 1, VirtualS: 260}
		loads := []float64{100, 150, 200, 250, 300, 350, 400, 350, 300, 250, 200, 150, 100}
		for i, l := range loads {
			st := sweep.Step{Branch: "up", Load: l, T: float64(i) * 20, Demand: l, Goodput: l, Offered: l}
			if i > 6 {
				st.Branch = "down"
			}
			if collapse != nil && ((i <= 6 && l >= *collapse) || (i > 6 && l > *recovery)) {
				st.Goodput, st.Offered = 0, 2*l
			}
			if collapse == nil {
				st.Goodput = min(l, 290)
			}
			r.Steps = append(r.Steps, st)
		}
		return r
	}
	phase := func(tips func(load float64) *float64) *sweep.Phase {
		ph := &sweep.Phase{PhasePlan: sweep.PhasePlan{Loads: []float64{100, 160, 220, 300},
			Trigger: scenario.Trigger{Kind: "outage", Target: "db", At: 20 * time.Second, Duration: 10 * time.Second, Mode: "hold"},
			Vary:    sweep.VaryDuration, Unit: "s", Min: 0, Max: 40, Resolution: 0.1, AfterS: 120}}
		for _, l := range ph.Loads {
			c := sweep.Column{Load: l, Disturbs: sweepFP(0.5), Tips: tips(l), Simulations: 4, VirtualS: 600}
			c.Probes = []sweep.Probe{{Size: 0, Verdict: "stable", RecoveryS: sweepFP(0)}, {Size: 0.5, Verdict: "recovered", RecoveryS: sweepFP(3)}}
			if c.Tips != nil && *c.Tips == 0 {
				c.Disturbs = sweepFP(0)
				c.Probes = []sweep.Probe{{Size: 0, Verdict: "metastable"}}
			} else if c.Tips != nil {
				c.Probes = append(c.Probes, sweep.Probe{Size: *c.Tips, Verdict: "metastable"})
			}
			c.Probes = append(c.Probes, sweep.Probe{Size: 40, Verdict: map[bool]string{true: "metastable", false: "recovered"}[c.Tips != nil]})
			ph.Columns = append(ph.Columns, c)
		}
		return ph
	}
	return sweep.Result{Scenario: "toy", Description: "A made-up sweep.", Key: "0123456789abcdef", Simulations: 34, VirtualS: 5320,
		Runs: []sweep.RunResult{
			{Name: "naive", Client: "app", TimeoutS: 1, Target: "db", Capacity: 300, Seed: 1,
				Ramp: ramp(sweepFP(300), sweepFP(150)),
				Phase: phase(func(l float64) *float64 {
					switch {
					case l >= 300:
						return sweepFP(0)
					case l >= 160:
						return sweepFP(2)
					}
					return nil
				})},
			{Name: "stormguard", Changes: []string{"clients.app.policy: stormguard"}, Client: "app", TimeoutS: 1, Target: "db", Capacity: 300, Seed: 1,
				Ramp: ramp(nil, nil), Phase: phase(func(float64) *float64 { return nil })},
		}}
}

func TestWriteSweep(t *testing.T) {
	dir := t.TempDir()
	res := syntheticSweep()
	if err := WriteSweep(dir, res); err != nil {
		t.Fatal(err)
	}
	var back sweep.Result
	readJSON(t, filepath.Join(dir, "sweep.json"), &back)
	if back.Scenario != "toy" || len(back.Runs) != 2 || *back.Runs[0].Ramp.Collapse != 300 {
		t.Errorf("sweep.json = %+v", back)
	}
	for _, name := range []string{"hysteresis", "phase"} {
		checkPNG(t, filepath.Join(dir, name+".png"))
		svg := readFile(t, filepath.Join(dir, name+".svg"))
		if !bytes.HasPrefix(svg, []byte("<?xml")) && !bytes.HasPrefix(svg, []byte("<svg")) {
			t.Errorf("%s.svg starts with %q", name, svg[:min(len(svg), 20)])
		}
		// Axis labels with units, and the legend, are in the SVG as text.
		for _, want := range sweepChartText[name] {
			if !bytes.Contains(svg, []byte(want)) {
				t.Errorf("%s.svg lacks %q", name, want)
			}
		}
	}
	for name, header := range map[string][]string{
		"ramp.csv":   {"run", "branch", "load", "t", "demand", "goodput", "offered"},
		"phase.csv":  {"run", "load", "disturbs", "tips"},
		"probes.csv": {"run", "load", "size", "verdict", "recovery_s"},
	} {
		rows, err := csv.NewReader(bytes.NewReader(readFile(t, filepath.Join(dir, name)))).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(rows[0], header) {
			t.Errorf("%s header %q, want %q", name, rows[0], header)
		}
		if len(rows) < 9 {
			t.Errorf("%s has %d rows", name, len(rows))
		}
	}
	if rows := readFile(t, filepath.Join(dir, "phase.csv")); !bytes.Contains(rows, []byte("stormguard,300,0.5,\n")) || !bytes.Contains(rows, []byte("naive,160,0.5,2\n")) {
		t.Errorf("phase.csv:\n%s", rows)
	}
	page := readFile(t, filepath.Join(dir, "index.html"))
	checkSweepPage(t, page, 2)
	for _, want := range []string{
		"What to change", "collapses at", "300/s", "150/s", "160/s", "2 s at 160/s … 2 s at 220/s",
		`class="badge metastable"`, `class="badge stable"`, "never metastable", "no trigger needed",
		"clients.app.policy: stormguard", "Ramp steps of naive", "34 simulations",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

// sweepChartText: words each chart must show.
var sweepChartText = map[string][]string{
	"hysteresis": {"offered load (new requests/s)", "goodput (requests/s)", "collapse 300/s", "recovery 150/s",
		"goodput, load going up", "goodput, load going down", "naive: collapses at 300/s, recovers at 150/s", "stormguard: no collapse up to 400/s"},
	"phase": {"load (new requests/s)", "outage of db: duration (s), log scale", "stable after the trigger",
		"recovered after the trigger", "metastable after the trigger", "collapse threshold (ramp)", "naive: metastable from 160/s"},
}

// checkSweepPage checks that page is well-formed, loads nothing from
// elsewhere, has no scripts, and inlines its n images.
func checkSweepPage(t *testing.T, page []byte, n int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	d.Entity = map[string]string{"nbsp": " "}
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("index.html is not well-formed: %v", err)
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 {
		t.Errorf("index.html leaves %d elements open", depth)
	}
	text := string(page)
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(text); m != "" {
		t.Errorf("index.html loads from the network: %q", m)
	}
	if strings.Contains(text, "<script") || strings.Contains(text, "<link") {
		t.Error("index.html has a script or a link element")
	}
	imgs := regexp.MustCompile(`<img [^>]*src="([^"]*)"`).FindAllStringSubmatch(text, -1)
	if len(imgs) != n {
		t.Errorf("index.html has %d images, want %d", len(imgs), n)
	}
	for _, m := range imgs {
		if !strings.HasPrefix(m[1], "data:image/png;base64,") {
			t.Errorf("an image is not inline: %.60q", m[1])
		}
	}
}

// TestVerdictColoursMatchSimReport: the phase diagram, the sweep page and
// the sim page give each verdict the same colour, and the sweep charts use
// the sim palette's goodput and demand colours.
func TestVerdictColoursMatchSimReport(t *testing.T) {
	for _, tmpl := range []string{"index.html.tmpl", "sweep.html.tmpl"} {
		text := string(readFile(t, tmpl))
		for v, c := range sweepVerdictColours {
			want := fmt.Sprintf(".badge.%s { background: #%02x%02x%02x; }", v, c.R, c.G, c.B)
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q", tmpl, want)
			}
		}
	}
	if sweepCollapseColour != sweepVerdictColours["metastable"] || sweepRecoveryColour != sweepVerdictColours["recovered"] {
		t.Error("the thresholds are not in the verdicts' colours")
	}
}

func TestSweepSummaryAndAdvice(t *testing.T) {
	res := syntheticSweep()
	naive, sg := SummarizeSweep(res.Runs[0]), SummarizeSweep(res.Runs[1])
	for _, c := range []struct{ got, want string }{
		{naive.CollapseText(), "300/s"},
		{naive.RecoveryText(), "150/s"},
		{naive.MetastableText(), "160/s"},
		{naive.TipsText(), "2 s at 160/s … 2 s at 220/s"},
		{sg.CollapseText(), "none up to 400/s"},
		{sg.RecoveryText(), "-"},
		{sg.MetastableText(), "none up to 300/s"},
		{sg.TipsText(), "none up to 40 s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if naive.OverloadFrom == nil || *naive.OverloadFrom != 300 {
		t.Errorf("overload from %v, want 300", naive.OverloadFrom)
	}

	advice := SweepAdvice(res)
	for _, want := range []string{"naive: once goodput collapses (at 300/s on the way up) it comes back only at 150/s (50% of the capacity) or below",
		"the smallest outage that tips it over is 2 s at 160/s and 2 s at 220/s", "at 300/s and above it tips over with no trigger",
		"stormguard did not tip over", "ship what it changes: clients.app.policy: stormguard"} {
		if !strings.Contains(advice, want) {
			t.Errorf("advice %q\nlacks %q", advice, want)
		}
	}
	safe := res
	safe.Runs = res.Runs[1:]
	if a := SweepAdvice(safe); !strings.Contains(a, "No run tipped over") || !strings.Contains(a, "--max") {
		t.Errorf("all safe: %q", a)
	}
	bad := res
	bad.Runs = res.Runs[:1]
	if a := SweepAdvice(bad); !strings.Contains(a, "No run is safe") {
		t.Errorf("none safe: %q", a)
	}
	if a := SweepAdvice(sweep.Result{}); !strings.Contains(a, "no runs") {
		t.Errorf("empty: %q", a)
	}
}

// TestWriteSweepParts: a sweep without a phase search writes no phase
// chart, and the page shows the one chart.
func TestWriteSweepParts(t *testing.T) {
	res := syntheticSweep()
	for i := range res.Runs {
		res.Runs[i].Phase = nil
	}
	dir := t.TempDir()
	if err := WriteSweep(dir, res); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "phase.png")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("phase.png written without a phase search (%v)", err)
	}
	checkSweepPage(t, readFile(t, filepath.Join(dir, "index.html")), 1)
}

// syntheticRunbook is a sweep that answered only the runbook questions:
// "waiting" comes back from 2× capacity at 40 s (1.75× stays stuck) and if
// doubled by 50 s; "autoscaled" needs only 1.5×; the comparison ranks
// "right" (back in 130 s) before "early" (as soon, but it relapsed) before
// "nothing".
func syntheticRunbook() sweep.Result {
	capacity := func(factor float64) *sweep.CapacitySearch {
		c := &sweep.CapacitySearch{CapacityPlan: sweep.CapacityPlan{AtS: 40, Min: 1, Max: 4, Resolution: 0.25}, Factor: sweepFP(factor), Simulations: 4, VirtualS: 1200}
		c.Probes = []sweep.Probe{{Size: 1, Verdict: "metastable"}, {Size: factor - 0.25, Verdict: "metastable"},
			{Size: factor, Verdict: "recovered", RecoveryS: sweepFP(167)}, {Size: 4, Verdict: "recovered", RecoveryS: sweepFP(19)}}
		return c
	}
	latest := &sweep.LatestSearch{LatestPlan: sweep.LatestPlan{Factor: 2, FromS: 30, ToS: 300, ResolutionS: 10}, LatestS: sweepFP(50), Simulations: 4, VirtualS: 1200,
		Probes: []sweep.Probe{{Size: 30, Verdict: "recovered", RecoveryS: sweepFP(103)}, {Size: 50, Verdict: "recovered", RecoveryS: sweepFP(243)},
			{Size: 60, Verdict: "metastable"}, {Size: 300, Verdict: "metastable"}}}
	seed := func(verdict string, ttr *float64, relapsed bool) sweep.SeedRun {
		return sweep.SeedRun{Seed: 1, Verdict: verdict, ToRecoverS: ttr, RecoveryS: ttr, Relapsed: relapsed, VirtualS: 300}
	}
	cmp := &sweep.Comparison{Seeds: 1, Rows: []sweep.CompareRow{
		{Run: "right", Recovered: 1, MedianS: sweepFP(130), WorstS: sweepFP(130), MedianRecoveryS: sweepFP(127), WorstRecoveryS: sweepFP(127), Outcomes: []sweep.SeedRun{seed("recovered", sweepFP(130), false)}},
		{Run: "early", Recovered: 1, Relapses: 1, MedianS: sweepFP(130), WorstS: sweepFP(130), MedianRecoveryS: sweepFP(57), WorstRecoveryS: sweepFP(57), Outcomes: []sweep.SeedRun{seed("recovered", sweepFP(130), true)}},
		{Run: "nothing", Metastable: 1, Outcomes: []sweep.SeedRun{seed("metastable", nil, false)}},
	}}
	return sweep.Result{Scenario: "toy", Key: "0123456789abcdef", Simulations: 19, VirtualS: 5700, Compare: cmp,
		Runs: []sweep.RunResult{
			{Name: "waiting", Client: "app", Target: "db", Seed: 1, AddCapacity: capacity(2), Latest: latest},
			{Name: "autoscaled", Client: "app", Target: "db", Seed: 1, AddCapacity: capacity(1.5)},
		}}
}

// TestWriteSweepRunbook: the runbook answers as tables, two charts and
// runbook.csv, without the ramp's and phase search's parts.
func TestWriteSweepRunbook(t *testing.T) {
	dir := t.TempDir()
	res := syntheticRunbook()
	if err := WriteSweep(dir, res); err != nil {
		t.Fatal(err)
	}
	for name, words := range map[string][]string{
		"capacity": {"waiting: capacity set at 40 s", "db: capacity factor added (×)", "recovers from 2×", "recovers from 1.5×", "never recovers (metastable)"},
		"latest":   {"waiting: when 2× capacity comes", "db: time the capacity is set (s)", "latest 50 s"},
	} {
		checkPNG(t, filepath.Join(dir, name+".png"))
		svg := readFile(t, filepath.Join(dir, name+".svg"))
		for _, w := range words {
			if !bytes.Contains(svg, []byte(w)) {
				t.Errorf("%s.svg lacks %q", name, w)
			}
		}
	}
	for _, name := range []string{"hysteresis.png", "phase.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s written without its part (%v)", name, err)
		}
	}
	rows, err := csv.NewReader(bytes.NewReader(readFile(t, filepath.Join(dir, "runbook.csv")))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows[0], []string{"question", "run", "value", "verdict", "recovery_s", "to_recover_s", "relapsed"}) || len(rows) != 1+8+4+3 {
		t.Errorf("runbook.csv: %q", rows)
	}
	page := readFile(t, filepath.Join(dir, "index.html"))
	checkSweepPage(t, page, 2)
	for _, want := range []string{"Runbooks compared", "Capacity to add", "Latest time to add it", "1 of 1", "130 s", "never",
		"add at least 2× capacity at 40 s (1.75× stays stuck)", "2× capacity must come by 50 s (at 60 s it stays stuck)",
		"right comes back first", "early is back as soon but relapsed in 1 of 1 seeds"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(string(page), "<h2>Thresholds</h2>") {
		t.Error("index.html shows the thresholds of a sweep that had none")
	}
}
