// Package report writes what a simulation showed: a JSON summary, a CSV of
// every run's time series, a chart per run (PNG and SVG) and one
// self-contained HTML page that a person understands in a minute.
//
// The charts use gonum.org/v1/plot; the rest is the standard library.
package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/sim/result"
)

// Sim is a simulation to report on: the Output of `stormguard sim` and what
// the Output does not carry, both optional.
type Sim struct {
	Output result.Output
	// Description of the scenario, shown under its name.
	Description string
	// Changes lists, by run name, what each run changes in the base
	// scenario ("clients.app.policy: stormguard"); the advice names them.
	Changes map[string][]string
}

// WriteSim writes the report of out into dir (made if missing):
//
//	summary.json   the Output, as `stormguard sim --json` prints it
//	RUN.csv        one row per time bin: t, then client and service columns
//	RUN.png        the run's chart (RUN.svg: the same as SVG)
//	index.html     one page with everything, images inlined
//
// RUN is the run's name made safe for a file name (see FileNames).
func WriteSim(dir string, out result.Output) error {
	return Sim{Output: out, Description: out.Description}.Write(dir)
}

// Write writes the report into dir; see WriteSim.
func (s Sim) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The series go to summary.json and the CSVs a bin at a time (they
	// may stream from a spool: see result.ClientSeries).
	if err := writeFile(filepath.Join(dir, "summary.json"), func(w io.Writer) error {
		return result.WriteJSON(w, s.Output, true)
	}); err != nil {
		return err
	}
	names := FileNames(s.Output.Runs)
	charts := make([][]byte, len(s.Output.Runs))
	lay, err := newLayout(s.Output.Runs)
	if err != nil {
		return fmt.Errorf("report: charts: %w", err)
	}
	for i, r := range s.Output.Runs {
		if err := writeFile(filepath.Join(dir, names[i]+".csv"), func(w io.Writer) error { return writeCSV(w, r) }); err != nil {
			return fmt.Errorf("report: %s: %w", r.Name, err)
		}
		png, svg, err := chart(r, lay)
		if err != nil {
			return fmt.Errorf("report: chart of %s: %w", r.Name, err)
		}
		charts[i] = png
		for ext, data := range map[string][]byte{".png": png, ".svg": svg} {
			if err := os.WriteFile(filepath.Join(dir, names[i]+ext), data, 0o644); err != nil {
				return err
			}
		}
	}
	var page bytes.Buffer
	if err := writeHTML(&page, s, names, charts); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index.html"), page.Bytes(), 0o644)
}

// writeFile writes the file at path with write, through a buffer.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	return errors.Join(err, f.Close())
}

// FileNames returns, for each run, a file name stem made of its name: the
// characters outside [A-Za-z0-9._=-] become "_", a leading dot is dropped,
// and a name used twice (or "summary" and "index", which the report uses)
// gets a number.
func FileNames(runs []result.Result) []string {
	used := map[string]bool{"summary": true, "index": true}
	out := make([]string, len(runs))
	for i, r := range runs {
		base := strings.TrimLeft(strings.Map(safeRune, r.Name), ".")
		if len(base) > 80 {
			base = base[:80]
		}
		if base == "" {
			base = "run"
		}
		name := base
		for n := 2; used[strings.ToLower(name)]; n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		used[strings.ToLower(name)] = true
		out[i] = name
	}
	return out
}

func safeRune(r rune) rune {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune("._=-", r):
		return r
	}
	return '_'
}
