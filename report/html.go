package report

import (
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strconv"

	"github.com/stormguard/stormguard/sim/result"
)

//go:embed index.html.tmpl
var indexText string

var indexTmpl = template.Must(template.New("index").Parse(indexText))

// htmlRow is one run on the page.
type htmlRow struct {
	Summary
	Anchor, File, Class string
	Changes             []string
	Actions             []string     // "60 s: pause membership requests"
	Parts               []htmlPart   // its clients' and services' verdicts
	Chart               template.URL // the PNG as a data: URL
}

// htmlPart is one client's or service's verdict.
type htmlPart struct {
	Name, Verdict, Class, Why string
	Decided                   bool
}

// keyEntry explains one colour of the charts.
type keyEntry struct {
	Colour template.CSS
	Label  string
}

// chartKey lists the quantities of the charts in the order they appear.
var chartKey = []struct{ key, label string }{
	{"demand", "demand (new requests)"},
	{"goodput", "goodput"},
	{"offered_first", "offered: first tries"},
	{"offered_retries", "offered: retries"},
	{"throughput", "throughput"},
	{"wasted", "wasted work"},
	{"shed", "shed or expired"},
	{"queue", "queue length"},
	{"trigger", "trigger window"},
	{"action", "runbook action"},
	{"replicas", "replicas serving"},
}

// writeHTML writes the page: a self-contained file (CSS inline, charts as
// data: URLs, no scripts and nothing loaded from elsewhere).
func writeHTML(w io.Writer, s Sim, files []string, charts [][]byte) error {
	var sums []Summary
	rows := make([]htmlRow, len(s.Output.Runs))
	for i, r := range s.Output.Runs {
		sum := Summarize(r)
		sums = append(sums, sum)
		rows[i] = htmlRow{
			Summary: sum,
			Anchor:  "run-" + files[i],
			File:    files[i],
			Class:   badgeClass(r.Verdict),
			Changes: s.Changes[r.Name],
			Actions: actionTexts(r.Actions),
			Parts:   htmlParts(r),
			Chart:   template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(charts[i])),
		}
	}
	key := make([]keyEntry, len(chartKey))
	for i, k := range chartKey {
		c := palette[k.key]
		key[i] = keyEntry{template.CSS(fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)), k.label}
	}
	after := 0.0
	for _, s := range sums {
		after = max(after, s.AfterS)
	}
	when := "over the whole run"
	if after > 0 {
		when = fmt.Sprintf("after the last trigger ended (%s s)", strconv.FormatFloat(after, 'f', -1, 64))
	}
	return indexTmpl.Execute(w, map[string]any{
		"Scenario":    s.Output.Scenario,
		"Description": s.Description,
		"Advice":      Advice(sums, s.Changes),
		"Rows":        rows,
		"Parts":       PartsTable(s.Output.Runs),
		"When":        when,
		"Key":         key,
	})
}

// htmlParts lists a run's clients' and services' verdicts.
func htmlParts(r result.Result) []htmlPart {
	var out []htmlPart
	for _, c := range r.Clients {
		out = append(out, htmlPart{"client " + c.Name, c.Verdict, badgeClass(c.Verdict), c.Why, r.DecidedBy == "clients."+c.Name})
	}
	for _, v := range r.Services {
		out = append(out, htmlPart{"service " + v.Name, v.Verdict, badgeClass(v.Verdict), v.Why, r.DecidedBy == "services."+v.Name})
	}
	return out
}

func badgeClass(verdict string) string {
	switch verdict {
	case result.Stable, result.Recovered, result.Metastable, result.Degraded:
		return verdict
	}
	return "other"
}

// actionTexts writes a run's runbook steps as "60 s: pause membership
// requests".
func actionTexts(marks []result.ActionMark) []string {
	out := make([]string, len(marks))
	for i, m := range marks {
		out[i] = fmt.Sprintf("%s s: %s", strconv.FormatFloat(m.T, 'f', -1, 64), m.Label)
	}
	return out
}
