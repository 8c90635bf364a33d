package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stormguard/stormguard/report"
	"github.com/stormguard/stormguard/sim/result"
)

// printTable prints the runs as a table a person reads in seconds, a note
// on the columns, each verdict's reason and the advice (changes: what each
// run changes in the base scenario, by run name).
func printTable(w io.Writer, out result.Output, changes map[string][]string, took time.Duration) {
	sums := make([]report.Summary, len(out.Runs))
	after := 0.0
	for i, r := range out.Runs {
		sums[i] = report.Summarize(r)
		after = max(after, sums[i].AfterS)
	}
	virtual := 0.0
	if len(out.Runs) > 0 {
		virtual = out.Runs[0].DurationS
	}
	fmt.Fprintf(w, "%s: %d runs of %.0f s of virtual time (took %.1f s)\n\n", out.Scenario, len(out.Runs), virtual, took.Seconds())

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tVERDICT\tRECOVERY\tDEMAND/S\tGOODPUT/S\tRETRIES\tWASTED\tGAVE UP (TOP REASON)")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%.0f%%\t%.0f%%\t%s\n",
			s.Name, s.Verdict, s.RecoveryText(), s.Demand, s.Goodput, s.RetriesPct, s.WastedPct, s.GaveUpText())
	}
	tw.Flush()

	when := "over the whole run"
	if after > 0 {
		when = fmt.Sprintf("after the last trigger ended (%.0f s)", after)
	}
	fmt.Fprintf(w, "\nDemand and goodput: requests/s %s.\n", when)
	fmt.Fprintln(w, "Retries: share of attempts at the hop where it is highest (clients', or arriving at a service).")
	fmt.Fprintln(w, "Wasted: share of the services' work whose caller had already given up.")
	fmt.Fprintln(w)
	parts := report.PartsTable(out.Runs)
	fmt.Fprintln(w, "Verdicts by client and service (a run's is the worst client's, or a service's that ended down unseen):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(append([]string{"run"}, parts.Columns...), "\t")))
	for _, row := range parts.Rows {
		fmt.Fprintln(tw, strings.Join(append([]string{row.Run}, row.Cells...), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, s := range sums {
		if s.Why != "" {
			fmt.Fprintln(w, wrap("  "+s.Name+": "+s.Why, "    "))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap("What to change: "+report.Advice(sums, changes), "  "))
}

// wrapWidth is the width of the text under the table.
const wrapWidth = 100

// wrap breaks s into lines of at most wrapWidth bytes at spaces (a longer
// word stays whole), starting every line but the first with indent.
func wrap(s, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Split(s, " ") {
		switch {
		case i == 0:
		case line+1+len(word) > wrapWidth:
			b.WriteString("\n" + indent)
			line = len(indent)
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}
