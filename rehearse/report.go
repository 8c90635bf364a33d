package rehearse

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim/result"
)

// WriteReport writes the report of out into dir (made if missing): the
// report of `stormguard sim` (report.Sim: index.html, summary.json, per
// run RUN.csv, RUN.png, RUN.svg) for the rehearsal's runs — and, with
// --predict, for the fitted model's runs beside them, named "RUN
// (model)" — with a section on the rehearsal added to index.html
// (every request's outcome, the runbook's steps, the services' metrics,
// the machine, the fits), plus rehearse.json (out, as --json prints it)
// and, with --predict, compare.csv (per run and 1 s window: demand, the
// measured and the predicted goodput).
func WriteReport(dir string, out Output, changes map[string][]string) error {
	runs := append([]result.Result(nil), out.Runs...)
	for _, s := range out.Sim {
		s.Name += " (model)"
		runs = append(runs, s)
	}
	rep := report.Sim{Output: result.Output{Scenario: out.Scenario, Description: out.Description, Runs: runs},
		Description: out.Description, Changes: changes}
	if err := rep.Write(dir); err != nil {
		return err
	}
	j, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "rehearse.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if len(out.Comparisons) > 0 {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.Write([]string{"run", "t", "demand", "measured_goodput", "model_goodput", "diff"})
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
		for _, c := range out.Comparisons {
			for i, t := range c.T {
				w.Write([]string{c.Run, f(t), f(c.Demand[i]), f(c.Lab[i]), f(c.Sim[i]), f(c.Diff[i])})
			}
		}
		w.Flush()
		if err := os.WriteFile(filepath.Join(dir, "compare.csv"), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return addSection(filepath.Join(dir, "index.html"), out)
}

var sectionTmpl = template.Must(template.New("rehearse").Parse(`
<h2 id="rehearsal">The rehearsal</h2>
<p class="note">Real requests from the scenario's clients, through stormguard's retry, httpx and grpcx code, to the real services;
faults applied on the path by the fault proxy and the error front; the runbook's steps sent to the real kill switch.</p>
{{range .Runs}}<h3>{{.Name}}</h3>
<ul>
{{range .Lines}}<li>{{.}}</li>
{{end}}</ul>
{{end}}{{if .Compare}}<h3>Prediction against the rehearsal</h3>
<p class="note">The same scenario in the simulator, each service replaced by the model fitted in the calm phase; goodput compared in 1 s windows
(the runs named "(model)" above are the simulator's).</p>
<ul>
{{range .Compare}}<li>{{.}}</li>
{{end}}</ul>{{end}}
`))

// addSection puts the rehearsal's section into the report's page.
func addSection(path string, out Output) error {
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	type run struct {
		Name  string
		Lines []string
	}
	var data struct {
		Runs    []run
		Compare []string
	}
	for i, n := range out.Rehearsals {
		data.Runs = append(data.Runs, run{Name: n.Name, Lines: Lines(out, i)})
	}
	for _, c := range out.Comparisons {
		data.Compare = append(data.Compare, CompareLine(c))
	}
	var sec bytes.Buffer
	if err := sectionTmpl.Execute(&sec, data); err != nil {
		return err
	}
	return os.WriteFile(path, lab.InsertSection(page, sec.Bytes()), 0o644)
}

// Lines describes what only a rehearsal knows of run i, one fact a line:
// the terminal and the report's page say the same.
func Lines(out Output, i int) []string {
	n := out.Rehearsals[i]
	var ls []string
	if n.Interrupted {
		ls = append(ls, fmt.Sprintf("interrupted: measured until %.1f s", n.StoppedS))
	}
	for _, pf := range n.Preflight {
		ls = append(ls, "before the run: "+pf)
	}
	for _, c := range n.Clients {
		check := "adds up"
		if err := c.Outcomes.Check(); err != nil {
			check = "DOES NOT ADD UP"
		}
		l := fmt.Sprintf("client %s: %s (%s)", c.Name, c.Outcomes, check)
		if c.HumanRetries > 0 {
			l += fmt.Sprintf("; %d taps after the first", c.HumanRetries)
		}
		if c.MaxLagS > 0.05 {
			l += fmt.Sprintf("; up to %.0f ms behind its schedule", 1000*c.MaxLagS)
		}
		ls = append(ls, l)
	}
	ls = append(ls, fmt.Sprintf("attempts: %d sent of a worst case of %d", n.Sent, n.WorstCase))
	if n.Refused > 0 {
		ls = append(ls, fmt.Sprintf("attempts refused by the hard counter: %d (the plan's worst case was wrong: please report it)", n.Refused))
	}
	for _, s := range n.Services {
		switch {
		case s.Measured:
			l := fmt.Sprintf("service %s: measured from its metrics (%d readings", s.Name, s.Readings)
			if s.Failed > 0 {
				l += fmt.Sprintf(", %d failed: %s", s.Failed, s.LastError)
			}
			ls = append(ls, l+")")
		case s.LastError != "":
			ls = append(ls, fmt.Sprintf("service %s: not measured (%s)", s.Name, s.LastError))
		default:
			ls = append(ls, fmt.Sprintf("service %s: measured from the clients' side only", s.Name))
		}
	}
	for _, p := range n.Paths {
		if p.Proxy != nil {
			ls = append(ls, fmt.Sprintf("fault proxy before %s: %d connections, %d refused, %d reset, %d writes held (delivered in %.2f s)",
				p.Endpoint, p.Proxy.Accepted, p.Proxy.Refused, p.Proxy.Reset, p.Proxy.Held, p.Proxy.DrainS))
		}
		if p.Injected+p.Forwarded > 0 {
			ls = append(ls, fmt.Sprintf("error front before %s: %d failed, %d passed on", p.Endpoint, p.Injected, p.Forwarded))
		}
	}
	for _, s := range n.Steps {
		if s.Err != "" {
			ls = append(ls, fmt.Sprintf("step at %.1f s, %s: FAILED through %s: %s", s.At, s.Label, s.Via, s.Err))
			continue
		}
		ls = append(ls, fmt.Sprintf("step at %.1f s, %s: done at %.2f s (%.0f ms) through %s", s.At, s.Label, s.DoneS, 1000*s.TookS, s.Via))
	}
	if n.Restored != "" {
		ls = append(ls, "the dials the steps turned: "+n.Restored)
	}
	if r := recoveryAfterSteps(out.Runs[i], n.Steps); r != "" {
		ls = append(ls, r)
	}
	ls = append(ls, "the machine: "+n.Host.Reason)
	if i < len(out.Fits) {
		for _, f := range out.Fits[i] {
			ls = append(ls, "fitted model of "+f.String())
		}
		for _, m := range out.ModelNotes[i] {
			ls = append(ls, "model: "+m)
		}
	}
	return ls
}

// recoveryAfterSteps says how long after the last step the run's
// clients were back, when it recovered after the runbook acted.
func recoveryAfterSteps(r result.Result, steps []StepResult) string {
	if len(steps) == 0 || r.RecoveredS == nil {
		return ""
	}
	last, label := -1.0, ""
	for _, s := range steps {
		// A bin's start: a step done within the bin it recovered in counts.
		if s.Err == "" && s.DoneS <= *r.RecoveredS+r.BinS && s.DoneS > last {
			last, label = s.DoneS, s.Label
		}
	}
	if last < 0 {
		return ""
	}
	return fmt.Sprintf("recovered at %.1f s, %.1f s after the last step before it (%s, done at %.2f s)", *r.RecoveredS, max(0, *r.RecoveredS-last), label, last)
}

// CompareLine is a comparison of a rehearsal with its model in one line:
// lab.Comparison's, in a rehearsal's words.
func CompareLine(c lab.Comparison) string {
	r := strings.NewReplacer("lab inconclusive", "measured inconclusive", ": lab ", ": measured ", ", sim ", ", model ", "|lab − sim|", "|measured − model|")
	return r.Replace(c.String())
}
