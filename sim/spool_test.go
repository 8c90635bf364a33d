package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// TestRunSpooledSameOutput holds RunSpooled to RunWithin: a run whose bins
// went to a spool, written by result.WriteJSON, gives the bytes
// encoding/json gives for the same run kept in memory, verdict included
// (it judges the spooled bins), compact and indented. It runs every
// example (their first run with -short), random scenarios of the fast
// path's shape, and the M/M/1 for horizons that end within a bin, on a
// spool on file and one in memory.
func TestRunSpooledSameOutput(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	type named struct {
		name string
		s    scenario.Scenario
	}
	var cases []named
	for _, p := range paths {
		f, err := scenario.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, run := range f.Runs {
			if i > 0 && testing.Short() {
				break
			}
			cases = append(cases, named{strings.TrimSuffix(filepath.Base(p), ".yaml") + "/" + run.Name, run.Scenario})
		}
	}
	r := rand.New(rand.NewPCG(16, 1))
	for range 30 {
		cases = append(cases, named{"random", randomFastScenario(r)})
	}
	for _, d := range []time.Duration{10 * time.Second, 10500 * time.Millisecond, 9999 * time.Millisecond} {
		cases = append(cases, named{"mm1/" + d.String(), mm1Storm(d)}, named{"mm1/general/" + d.String(), withTrigger(mm1Bench(d))})
	}
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem, err := RunWithin(ctx, c.s, "run", nil, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(result.Output{Scenario: c.name, Runs: []result.Result{mem}}); err != nil {
				t.Fatal(err)
			}
			sp := result.NewSpool()
			if i%2 == 1 {
				sp = &result.Spool{} // in memory
			}
			defer sp.Close()
			spooled, err := RunSpooled(ctx, c.s, "run", nil, Limits{}, sp)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := result.WriteJSON(&got, result.Output{Scenario: c.name, Runs: []result.Result{spooled}}, false); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("spooled output differs:\n%s\nwant\n%s", firstDiffJSON(got.Bytes(), want.Bytes()), firstDiffJSON(want.Bytes(), got.Bytes()))
			}
		})
	}
}

// withTrigger adds a trigger that changes nothing (a load factor of 1),
// which keeps s off the fast path.
func withTrigger(s scenario.Scenario) scenario.Scenario {
	s.Triggers = []scenario.Trigger{{Kind: "load", At: time.Second, Duration: time.Second, Factor: 1}}
	return s
}
