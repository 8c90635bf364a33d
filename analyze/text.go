package analyze

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes the report for a person: per run, the dependency
// paths, the services, the fluid model where it applies and the findings
// with what to change; then the totals.
func (r Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	name := r.Scenario
	if name == "" {
		name = r.File
	}
	fmt.Fprintf(ew, "%s (%s)\n", name, r.File)
	if r.Description != "" {
		fmt.Fprintf(ew, "%s\n", wrap(r.Description, 78, ""))
	}
	for _, a := range r.Analyses {
		a.writeText(ew)
	}
	fmt.Fprintf(ew, "\n%s: %s over %s.\n", verdict(r.Errors), counts(r.Errors, r.Warnings, r.Notes), plural(len(r.Analyses), "run"))
	return ew.err
}

func verdict(errors int) string {
	if errors > 0 {
		return "FAIL"
	}
	return "OK"
}

func counts(e, w, n int) string {
	return fmt.Sprintf("%s, %s, %s", plural(e, "error"), plural(w, "warning"), plural(n, "note"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (a Analysis) writeText(w io.Writer) {
	fmt.Fprintf(w, "\n== run %s ==\n", a.Run)
	if len(a.Changes) > 0 {
		fmt.Fprintln(w, wrap("Changes: "+strings.Join(a.Changes, "; "), 78, ""))
	}

	expected := false
	for _, s := range a.Services {
		expected = expected || s.ErrorRate > 0
	}
	fmt.Fprintln(w, "\nDependency paths: attempts at the last service per request, when every attempt fails.")
	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	head := "  PATH\tATTEMPTS\tWORST CASE\tWITH BUDGETS"
	if expected {
		head += "\tAT ERROR RATES"
	}
	fmt.Fprintln(tw, head)
	for _, p := range a.Paths {
		att := make([]string, len(p.Hops))
		for i, h := range p.Hops {
			att[i] = h.attemptsText()
		}
		row := fmt.Sprintf("  %s\t%s\t%s\t%s", p, strings.Join(att, " × "), times(p.Worst), times(p.Budgeted))
		if expected {
			row += "\t" + times(p.Expected)
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	writeTrimmed(w, &tb)
	if a.PathsTruncated {
		fmt.Fprintf(w, "  (only the first %d paths are listed)\n", MaxPaths)
	}

	fmt.Fprintln(w, "\nServices: capacity = workers ÷ the time a request holds a worker; vulnerable above = the rate at which a storm's load reaches it.")
	tw = tabwriter.NewWriter(&tb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICE\tCAPACITY/S\tCLIENT\tRATE/S\tAMPLIFICATION\tVULNERABLE ABOVE/S\t")
	for _, s := range a.Services {
		capacity := "unbounded"
		if s.Bounded {
			capacity = num(s.Capacity)
		}
		if len(s.Clients) == 0 {
			fmt.Fprintf(tw, "  %s\t%s\t-\t\t\t\t\n", s.Name, capacity)
		}
		for i, x := range s.Clients {
			svc, cp := s.Name, capacity
			if i > 0 {
				svc, cp = "", ""
			}
			rate := "?"
			if x.RateKnown {
				rate = num(x.Rate)
			}
			amp := times(x.Worst)
			switch {
			case x.Effective != x.Budgeted:
				amp = fmt.Sprintf("%s (%s: first tries first)", amp, times(x.Effective))
			case x.Budgeted != x.Worst:
				amp = fmt.Sprintf("%s (%s with budgets)", amp, times(x.Budgeted))
			}
			vuln, mark := "-", ""
			if s.Bounded {
				vuln = num(x.VulnerableAbove)
				if x.RateKnown && x.Rate > x.VulnerableAbove*(1+1e-9) {
					mark = "← you run above it"
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", svc, cp, x.Client, rate, amp, vuln, mark)
		}
	}
	tw.Flush()
	writeTrimmed(w, &tb)
	for _, s := range a.Services {
		if f := s.Fluid; f != nil {
			fmt.Fprintf(w, "  Fluid model of %s under %s: it collapses above %s/s and, once collapsed, recovers only below %s/s",
				s.Name, f.Client, num(f.Thresholds.Collapse), num(f.Thresholds.Recovery))
			for _, x := range s.Clients {
				if x.Client == f.Client && f.Region != nil {
					fmt.Fprintf(w, "; at %s/s it is %s", num(x.Rate), *f.Region)
				}
			}
			fmt.Fprintln(w, ".")
		}
	}

	fmt.Fprintf(w, "\nFindings: %s.\n", counts(a.Count(Error), a.Count(Warning), a.Count(Info)))
	for _, f := range a.Findings {
		label := strings.ToUpper(f.Severity.String())
		if f.Severity == Info {
			label = "NOTE"
		}
		fmt.Fprintf(w, "  %-7s %s  [%s]\n", label, f.Rule, f.Where)
		fmt.Fprintf(w, "%s\n", wrap(f.Message, 78, "          "))
		fmt.Fprintf(w, "%s\n", wrap("→ "+f.Fix, 78, "          "))
	}
}

// writeTrimmed writes the table in b without the spaces that pad empty
// last columns, and empties b.
func writeTrimmed(w io.Writer, b *strings.Builder) {
	for line := range strings.Lines(b.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	b.Reset()
}

// wrap breaks text into lines of at most width runes, each starting with
// indent.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len([]rune(line)) > len([]rune(indent)) && len([]rune(line))+1+len([]rune(word)) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len([]rune(line)) > len([]rune(indent)) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}

// errWriter keeps the first write error and drops later writes.
type errWriter struct {
	w   io.Writer
	err error
}

// Write writes p unless an earlier write failed; it never reports an
// error, which WriteText returns once at the end.
func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}
