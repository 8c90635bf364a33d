package lab

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim/result"
)

// WriteReport writes the report of out into dir (made if missing):
//
//	index.html, summary.json, RUN.csv, RUN.png, RUN.svg
//	               the report of `stormguard sim` for the lab's runs
//	               (report.Sim), with a section on the simulation against
//	               the lab added to index.html
//	lab.png, lab.svg
//	               every run side by side (see Figure)
//	compare.csv    per run and window: demand, the lab's and the
//	               simulator's goodput and their difference
//	lab.json       out, as `stormguard lab --json` prints it
//
// changes lists, by run name, what each run changes in the base scenario.
func WriteReport(dir string, out Output, changes map[string][]string) error {
	rep := report.Sim{Output: result.Output{Scenario: out.Scenario, Description: out.Description, Runs: out.Runs},
		Description: out.Description, Changes: changes}
	if err := rep.Write(dir); err != nil {
		return err
	}
	png, svg, err := Figure(out)
	if err != nil {
		return fmt.Errorf("lab: figure: %w", err)
	}
	j, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	var cb bytes.Buffer
	if err := writeCompareCSV(&cb, out.Comparisons); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"lab.png": png, "lab.svg": svg, "lab.json": append(j, '\n'), "compare.csv": cb.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return addSection(filepath.Join(dir, "index.html"), out, png)
}

// writeCompareCSV writes one row per run and window.
func writeCompareCSV(b *bytes.Buffer, cs []Comparison) error {
	w := csv.NewWriter(b)
	w.Write([]string{"run", "t", "demand", "lab_goodput", "sim_goodput", "diff"})
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, c := range cs {
		for i, t := range c.T {
			w.Write([]string{c.Run, num(t), num(c.Demand[i]), num(c.Lab[i]), num(c.Sim[i]), num(c.Diff[i])})
		}
	}
	w.Flush()
	return w.Error()
}

var sectionTmpl = template.Must(template.New("lab").Parse(`
<h2 id="sim-vs-lab">Simulation against the lab</h2>
<p class="note">The same scenario ran with real processes on 127.0.0.1 (load generator, app, fault proxy, backend) and in the simulator.
Goodput is compared in {{.Window}} s windows; the difference is the sum of |lab − sim| over the run as a share of the demand,
and the two agree when it is at most {{.Tolerance}} % and the verdicts are the same.</p>
<table>
<thead><tr><th class="name">run</th><th>lab</th><th>simulator</th><th>goodput after the trigger, lab</th><th>simulator</th><th>mean |lab − sim|</th><th>share of demand</th><th>agree</th></tr></thead>
<tbody>
{{range .Rows}}<tr><td class="name">{{.Run}}</td><td>{{.LabVerdict}}</td><td>{{.SimVerdict}}</td><td>{{.LabAfter}} %</td><td>{{.SimAfter}} %</td><td>{{.Mean}} req/s</td><td>{{.Error}} %</td><td>{{.Agree}}</td></tr>
{{end}}</tbody>
</table>
<h3>The machine</h3>
<p class="note">Each role measured its own scheduling: how late its timers fired (a probe every 10 ms) and how long the services' work took against the service time drawn.
A run is inconclusive, and not compared, when timers were more than {{.TimerLimit}} late at the 99th percentile, the service time exceeded {{.RatioLimit}}× its nominal value or a role stalled for more than {{.StallLimit}}: its figures describe the machine, not the system.</p>
<ul>
{{range .Hosts}}<li><strong>{{.Run}}</strong>: {{.Text}}</li>
{{end}}</ul>
<h3>Requests</h3>
<p class="note">Every request the load generator sent ended in exactly one outcome.</p>
<ul>
{{range .Outcomes}}<li><strong>{{.Run}}</strong>: {{.Text}}</li>
{{end}}</ul>
<figure><img src="{{.Figure}}" alt="The lab's runs side by side: demand, the lab's and the simulator's goodput, their difference, the backend's load and queue" />
<figcaption class="files note">Figure: <a href="lab.png">lab.png</a> <a href="lab.svg">lab.svg</a>. Data: <a href="compare.csv">compare.csv</a> <a href="lab.json">lab.json</a></figcaption></figure>
`))

// addSection puts the comparison with the simulator into the report's
// page, before the closing note.
func addSection(path string, out Output, png []byte) error {
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	type row struct {
		Run, LabVerdict, SimVerdict, LabAfter, SimAfter, Mean, Error, Agree string
	}
	type outcomeRow struct{ Run, Text string }
	data := struct {
		Window, Tolerance      string
		TimerLimit, RatioLimit string
		StallLimit             string
		Rows                   []row
		Outcomes, Hosts        []outcomeRow
		Figure                 template.URL
	}{Window: strconv.FormatFloat(DefaultWindow, 'f', -1, 64), Tolerance: strconv.FormatFloat(100*DefaultTolerance, 'f', -1, 64),
		TimerLimit: StarvedTimerLate.String(), RatioLimit: strconv.FormatFloat(StarvedServiceRatio, 'f', -1, 64),
		StallLimit: StarvedStall.String(),
		Figure:     template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))}
	for _, c := range out.Comparisons {
		agree := "yes"
		switch {
		case c.Inconclusive:
			agree = "not compared: the lab's run was inconclusive"
		case !c.Within:
			agree = "no"
		}
		data.Rows = append(data.Rows, row{c.Run, c.LabVerdict, c.SimVerdict, fmt.Sprintf("%.0f", 100*c.LabAfter),
			fmt.Sprintf("%.0f", 100*c.SimAfter), fmt.Sprintf("%.1f", c.MeanAbsDiff), fmt.Sprintf("%.1f", 100*c.Error), agree})
	}
	for _, o := range out.Outcomes {
		text := o.Outcomes.String()
		if err := o.Outcomes.Check(); err != nil {
			text += " — " + err.Error()
		}
		data.Outcomes = append(data.Outcomes, outcomeRow{o.Run, text})
		data.Hosts = append(data.Hosts, outcomeRow{o.Run, o.Host.Reason})
	}
	var sec bytes.Buffer
	if err := sectionTmpl.Execute(&sec, data); err != nil {
		return err
	}
	return os.WriteFile(path, InsertSection(page, sec.Bytes()), 0o644)
}

// InsertSection returns the report page with section put in before its
// closing note ("Made by …"), or before </body>.
func InsertSection(page, section []byte) []byte {
	s := string(page)
	at := strings.LastIndex(s, `<p class="note">Made by`)
	if at < 0 {
		at = strings.LastIndex(s, "</body>")
	}
	if at < 0 {
		at = len(s)
	}
	return []byte(s[:at] + string(section) + s[at:])
}
