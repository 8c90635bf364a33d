package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden/")

// TestGolden runs every example scenario and compares a digest of its
// output — verdicts, totals, and per bin each client's demand and goodput and
// each service's offered load and goodput — with testdata/golden/<example>.txt.
// A change in the dynamics shows as a diff; when the change is intended,
// rerun with -update and review the diff of the golden files. Every run's
// books are checked too (checkBooks).
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(name, func(t *testing.T) {
			f, err := scenario.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			for _, run := range f.Runs {
				r := mustRun(t, run.Scenario, run.Name)
				checkBooks(t, p+"/"+run.Name, r)
				digest(&buf, r)
			}
			got := buf.Bytes()
			golden := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./sim -run TestGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output of %s differs from %s (%d bytes, want %d); if the change is intended, rerun with -update and review the diff",
					p, golden, len(got), len(want))
			}
		})
	}
}

// digest writes a run's verdict, totals and main series, one line per bin.
func digest(w *bytes.Buffer, r result.Result) {
	rec := "null"
	if r.RecoveryS != nil {
		rec = fmt.Sprint(*r.RecoveryS)
	}
	fmt.Fprintf(w, "run %s: %s, recovery_s %s, %d events\n", r.Name, r.Verdict, rec, r.Events)
	for _, c := range r.Clients {
		tot, _ := json.Marshal(c.Total)
		fmt.Fprintf(w, "client %s %s\n", c.Name, tot)
	}
	for _, s := range r.Services {
		tot, _ := json.Marshal(s.Total)
		fmt.Fprintf(w, "service %s %s\n", s.Name, tot)
	}
	for b := range int(r.DurationS/r.BinS + 0.5) {
		fmt.Fprintf(w, "%g", float64(b)*r.BinS)
		for _, c := range r.Clients {
			if b < len(c.Bins) {
				fmt.Fprintf(w, " %g/%g", c.Bins[b].Demand, c.Bins[b].Goodput)
			}
		}
		for _, s := range r.Services {
			if b < len(s.Bins) {
				x := s.Bins[b]
				fmt.Fprintf(w, " %g+%g:%g", x.OfferedFirst, x.OfferedRetries, x.Goodput)
			}
		}
		w.WriteByte('\n')
	}
}
