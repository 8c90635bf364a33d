package report

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stormguard/stormguard/sweep/plan"
)

// WriteSweep writes the report of a sweep into dir (made if missing):
//
//	sweep.json       the Result, as `stormguard sweep --json` prints it
//	ramp.csv         one row per run and ramp step: run, branch, load, t,
//	                 demand, goodput, offered (requests/s, seconds)
//	phase.csv        one row per run and load: run, load, disturbs, tips
//	                 (trigger sizes; empty when none up to the largest tried)
//	probes.csv       one row per simulated run of the phase search: run,
//	                 load, size, verdict, recovery_s
//	hysteresis.png   goodput against load, up and down (and .svg)
//	phase.png        the phase diagram (and .svg)
//	runbook.csv      one row per simulated run of the runbook questions:
//	                 question (add_capacity, latest, compare), run, value
//	                 (the factor, the time in seconds, the seed), verdict,
//	                 recovery_s, to_recover_s, relapsed
//	capacity.png     recovery against the capacity factor added (and .svg)
//	latest.png       recovery against the time it is added (and .svg)
//	index.html       one page with everything, images inlined
//
// A chart or file whose part was skipped (no ramp, no phase search, no
// runbook question) is left out.
func WriteSweep(dir string, r plan.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{"sweep.json": append(j, '\n')}
	var ramp, phase, probes bytes.Buffer
	if err := writeSweepCSVs(&ramp, &phase, &probes, r); err != nil {
		return err
	}
	files["ramp.csv"], files["phase.csv"], files["probes.csv"] = ramp.Bytes(), phase.Bytes(), probes.Bytes()
	hpng, hsvg, err := sweepHysteresisChart(r)
	if err != nil {
		return fmt.Errorf("report: hysteresis chart: %w", err)
	}
	ppng, psvg, err := sweepPhaseChart(r)
	if err != nil {
		return fmt.Errorf("report: phase diagram: %w", err)
	}
	cpng, csvg, err := sweepRunbookChart(r, false)
	if err != nil {
		return fmt.Errorf("report: capacity chart: %w", err)
	}
	lpng, lsvg, err := sweepRunbookChart(r, true)
	if err != nil {
		return fmt.Errorf("report: latest-time chart: %w", err)
	}
	for name, data := range map[string][]byte{"hysteresis.png": hpng, "hysteresis.svg": hsvg, "phase.png": ppng, "phase.svg": psvg,
		"capacity.png": cpng, "capacity.svg": csvg, "latest.png": lpng, "latest.svg": lsvg} {
		if data != nil {
			files[name] = data
		}
	}
	if rb, err := sweepRunbookCSV(r); err != nil {
		return err
	} else if rb != nil {
		files["runbook.csv"] = rb
	}
	var page bytes.Buffer
	if err := writeSweepHTML(&page, r, hpng, ppng, cpng, lpng); err != nil {
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

func writeSweepCSVs(ramp, phase, probes io.Writer, r plan.Result) error {
	rw, pw, bw := csv.NewWriter(ramp), csv.NewWriter(phase), csv.NewWriter(probes)
	rw.Write([]string{"run", "branch", "load", "t", "demand", "goodput", "offered"})
	pw.Write([]string{"run", "load", "disturbs", "tips"})
	bw.Write([]string{"run", "load", "size", "verdict", "recovery_s"})
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return num(*v)
	}
	for _, run := range r.Runs {
		if run.Ramp != nil {
			for _, s := range run.Ramp.Steps {
				rw.Write([]string{run.Name, s.Branch, num(s.Load), num(s.T), num(s.Demand), num(s.Goodput), num(s.Offered)})
			}
		}
		if run.Phase != nil {
			for _, c := range run.Phase.Columns {
				pw.Write([]string{run.Name, num(c.Load), opt(c.Disturbs), opt(c.Tips)})
				for _, p := range c.Probes {
					bw.Write([]string{run.Name, num(c.Load), num(p.Size), p.Verdict, opt(p.RecoveryS)})
				}
			}
		}
	}
	for _, w := range []*csv.Writer{rw, pw, bw} {
		w.Flush()
		if err := w.Error(); err != nil {
			return err
		}
	}
	return nil
}

// sweepRunbookCSV writes runbook.csv, or nil when no runbook question
// was asked.
func sweepRunbookCSV(r plan.Result) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"question", "run", "value", "verdict", "recovery_s", "to_recover_s", "relapsed"})
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return num(*v)
	}
	rows := 0
	for _, run := range r.Runs {
		if c := run.AddCapacity; c != nil {
			for _, p := range c.Probes {
				w.Write([]string{"add_capacity", run.Name, num(p.Size), p.Verdict, opt(p.RecoveryS), "", ""})
				rows++
			}
		}
		if l := run.Latest; l != nil {
			for _, p := range l.Probes {
				w.Write([]string{"latest", run.Name, num(p.Size), p.Verdict, opt(p.RecoveryS), "", ""})
				rows++
			}
		}
	}
	if r.Compare != nil {
		for _, row := range r.Compare.Rows {
			for _, o := range row.Outcomes {
				w.Write([]string{"compare", row.Run, fmt.Sprint(o.Seed), o.Verdict, opt(o.RecoveryS), opt(o.ToRecoverS), fmt.Sprint(o.Relapsed)})
				rows++
			}
		}
	}
	w.Flush()
	if rows == 0 {
		return nil, w.Error()
	}
	return b.Bytes(), w.Error()
}

//go:embed sweep.html.tmpl
var sweepText string

var sweepTmpl = template.Must(template.New("sweep").Parse(sweepText))

// sweepRow is one run in the table of key numbers.
type sweepRow struct {
	SweepSummary
	Class, Badge string
	Changes      []string
	Steps        []plan.Step
}

// sweepPhaseRow is one load of the phase table: a cell per run.
type sweepPhaseRow struct {
	Load  string
	Cells []sweepPhaseCell
}

type sweepPhaseCell struct {
	Tips, Disturbs, Class string
}

func writeSweepHTML(w io.Writer, r plan.Result, hpng, ppng, cpng, lpng []byte) error {
	dataURL := func(png []byte) template.URL {
		if png == nil {
			return ""
		}
		return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))
	}
	var rows []sweepRow
	var phased []plan.RunResult
	swept := false
	for _, run := range r.Runs {
		swept = swept || run.Ramp != nil || run.Phase != nil
		s := SummarizeSweep(run)
		row := sweepRow{SweepSummary: s, Class: "stable", Badge: "never metastable", Changes: run.Changes}
		if s.vulnerable() {
			row.Class, row.Badge = "metastable", "can stay metastable"
		}
		if run.Ramp != nil {
			row.Steps = run.Ramp.Steps
		}
		rows = append(rows, row)
		if run.Phase != nil && len(run.Phase.Columns) > 0 {
			phased = append(phased, run)
		}
	}
	key := []keyEntry{
		{sweepColour(palette["goodput"]), "goodput (▲ load going up, ▼ going down)"},
		{sweepColour(palette["demand"]), "demand: goodput = load"},
		{sweepColour(sweepCollapseColour), "collapse threshold"},
		{sweepColour(sweepRecoveryColour), "recovery threshold"},
		{sweepColour(sweepPale(sweepVerdictColours["stable"], 0.3)), "stable"},
		{sweepColour(sweepPale(sweepVerdictColours["recovered"], 0.3)), "recovered"},
		{sweepColour(sweepPale(sweepVerdictColours["metastable"], 0.3)), "metastable"},
	}
	return sweepTmpl.Execute(w, map[string]any{
		"Scenario":    r.Scenario,
		"Description": r.Description,
		"Advice":      SweepAdvice(r),
		"WhatRan":     sweepWhatRan(r),
		"Rows":        rows,
		"Hysteresis":  dataURL(hpng),
		"Phase":       dataURL(ppng),
		"PhaseRuns":   phased,
		"PhaseRows":   sweepPhaseRows(phased),
		"PhaseLabel":  sweepPhaseLabel(phased),
		"Key":         key,
		"Key16":       r.Key,
		"Swept":       swept,

		"CapacityQuestion": CapacityQuestion(r),
		"CapacityRows":     CapacityRows(r),
		"Capacity":         dataURL(cpng),
		"LatestQuestion":   LatestQuestion(r),
		"LatestRows":       LatestRows(r),
		"Latest":           dataURL(lpng),
		"CompareQuestion":  CompareQuestion(r),
		"CompareRows":      CompareRows(r),
	})
}

func sweepColour(c interface{ RGBA() (r, g, b, a uint32) }) template.CSS {
	r, g, b, _ := c.RGBA()
	return template.CSS(fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8))
}

// sweepWhatRan describes the sweep in a few sentences.
func sweepWhatRan(r plan.Result) []string {
	var out []string
	if len(r.Runs) == 0 {
		return nil
	}
	first := r.Runs[0]
	names := make([]string, len(r.Runs))
	for i, run := range r.Runs {
		names[i] = run.Name
	}
	s := fmt.Sprintf("Runs: %s.", strings.Join(names, ", "))
	if first.Ramp != nil || first.Phase != nil {
		s = fmt.Sprintf("Runs: %s. The load is the arrival rate of client %s, which calls %s", strings.Join(names, ", "), first.Client, first.Target)
		if first.Capacity > 0 {
			s += fmt.Sprintf(" (capacity about %s: workers ÷ service time)", sweepRate(first.Capacity))
		}
		s += "."
	}
	out = append(out, s)
	if rp := first.Ramp; rp != nil {
		out = append(out, fmt.Sprintf("Ramp: one run per scenario run, the load stepping %s → %s → %s in steps of %s, each held %s s and measured over its second half, with no trigger. Collapse: the first step up whose goodput fell below %.0f%% of demand; recovery: the first step down back at %.0f%% or more.",
			sweepNum(rp.From), sweepNum(rp.To), sweepNum(rp.From), sweepRate(rp.Step), sweepNum(rp.HoldS), 100*plan.CollapseBelow, 100*plan.RecoveredAbove))
	}
	if ph := first.Phase; ph != nil && len(ph.Loads) > 0 {
		t := ph.Trigger
		what := t.Kind
		if t.Target != "" {
			what += " of " + t.Target
		}
		if t.Mode != "" {
			what += " (" + t.Mode + ")"
		}
		out = append(out, fmt.Sprintf("Phase diagram: at each load from %s to %s, runs with %s starting at %s s, bisecting its %s from %s to %s to within %s for the smallest that leaves the system metastable and the smallest that disturbs it; each run goes on %s s after the trigger ends and is judged as by stormguard sim.",
			sweepRate(ph.Loads[0]), sweepRate(ph.Loads[len(ph.Loads)-1]), sweepArticle(what), sweepNum(t.At.Seconds()), ph.Vary,
			ph.SizeText(ph.Min), ph.SizeText(ph.Max), ph.SizeText(ph.Resolution), sweepNum(ph.AfterS)))
	}
	out = append(out, fmt.Sprintf("%d simulations, %.1f hours of virtual time; seed %d.", r.Simulations, r.VirtualS/3600, first.Seed))
	return out
}

func sweepPhaseLabel(runs []plan.RunResult) string {
	if len(runs) == 0 {
		return ""
	}
	return runs[0].Phase.Label()
}

// sweepPhaseRows lays the phase columns of the runs out by load.
func sweepPhaseRows(runs []plan.RunResult) []sweepPhaseRow {
	var loads []float64
	for _, run := range runs {
		for _, c := range run.Phase.Columns {
			loads = append(loads, c.Load)
		}
	}
	slices.Sort(loads)
	loads = slices.Compact(loads)
	rows := make([]sweepPhaseRow, len(loads))
	for i, l := range loads {
		rows[i].Load = sweepNum(l)
		for _, run := range runs {
			cell := sweepPhaseCell{Tips: "·", Class: "none"}
			for _, c := range run.Phase.Columns {
				if c.Load != l {
					continue
				}
				cell = sweepPhaseCell{Tips: sweepSizeOrNone(run.Phase, c.Tips), Disturbs: sweepSizeOrNone(run.Phase, c.Disturbs), Class: "stable"}
				switch {
				case c.Overloaded():
					cell.Class, cell.Tips = "metastable", "no trigger needed"
				case c.Tips != nil:
					cell.Class = "metastable"
				case c.Disturbs != nil:
					cell.Class = "recovered"
				}
			}
			rows[i].Cells = append(rows[i].Cells, cell)
		}
	}
	return rows
}

// sweepArticle puts "a" or "an" before a noun.
func sweepArticle(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

func sweepNum(v float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.6g", v), ".")
}
