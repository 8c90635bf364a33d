package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep"
)

// sweepYAML is a small system that tips over (capacity 200/s).
const sweepYAML = `
name: tiny
clients:
  - name: app
    target: db
    arrivals: {rate: 100}
    policy: {preset: naive, max_attempts: 2}
    timeout: 200ms
services:
  - name: db
    workers: 4
    service_time: {mean: 20ms}
    queue: {capacity: 100}
triggers:
  - {kind: outage, target: db, at: 3s, duration: 2s}
runs:
  - name: naive
  - name: stormguard
    set: {clients.app.policy: stormguard, services.db.defenses: stormguard}
`

// sweepGrid keeps the sweeps of these tests to a fraction of a second.
var sweepGrid = []string{"--ramp", "100:260:40", "--hold", "2s", "--loads", "80:160:40", "--max", "4s", "--resolution", "500ms", "--after", "10s"}

func sweepFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(path, []byte(sweepYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func decodeSweepJSON(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Errorf("stdout holds more than one JSON value (next: %v)", err)
	}
}

func TestSweepJSON(t *testing.T) {
	file := sweepFile(t)
	code, out, errs := runCmd(t, t.Context(), append([]string{"sweep", file, "--json"}, sweepGrid...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res sweep.Result
	decodeSweepJSON(t, out, &res)
	if res.Scenario != "tiny" || len(res.Runs) != 2 {
		t.Fatalf("scenario %q with %d runs", res.Scenario, len(res.Runs))
	}
	naive := res.Runs[0]
	if naive.Ramp == nil || naive.Ramp.Collapse == nil || len(naive.Phase.Columns) != 3 || naive.Phase.Columns[2].Tips == nil {
		t.Errorf("naive: %+v", naive)
	}
	for _, key := range []string{`"collapse":`, `"recovery":`, `"steps":`, `"columns":`, `"disturbs":`, `"tips":`} {
		if !strings.Contains(out, key) {
			t.Errorf("the JSON lacks %s", key)
		}
	}
	if errs != "" {
		t.Errorf("stderr is not empty: %q", errs)
	}
}

// TestSweepShardsMerge: the parts of three shards, merged, print the same
// bytes as the sweep run whole, with any number of workers.
func TestSweepShardsMerge(t *testing.T) {
	file := sweepFile(t)
	ctx := t.Context()
	whole := func(extra ...string) string {
		code, out, errs := runCmd(t, ctx, append(append([]string{"sweep", file, "--json"}, sweepGrid...), extra...)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		return out
	}
	want := whole("--workers", "1")
	if got := whole("--workers", "4"); got != want {
		t.Errorf("--workers 4 differs from --workers 1")
	}
	parts := t.TempDir()
	for _, sh := range []string{"1/3", "2/3", "3/3"} {
		code, out, errs := runCmd(t, ctx, append([]string{"sweep", file, "--shard", sh, "--out", parts, "--workers", "2"}, sweepGrid...)...)
		if code != exitOK {
			t.Fatalf("shard %s: exit %d: %s", sh, code, errs)
		}
		if !strings.Contains(out, "shard "+sh+":") || !strings.Contains(out, "stormguard sweep merge") {
			t.Errorf("shard %s said %q", sh, out)
		}
	}
	code, got, errs := runCmd(t, ctx, "sweep", "merge", parts, "--json")
	if code != exitOK {
		t.Fatalf("merge: exit %d: %s", code, errs)
	}
	if got != want {
		t.Errorf("merged shards differ from the whole sweep:\n%s\n%s", got, want)
	}

	// A merge that lacks a shard fails with one clear line.
	os.Remove(filepath.Join(parts, "shard-2-of-3.json"))
	code, _, errs = runCmd(t, ctx, "sweep", "merge", parts)
	if code != exitUsage || errs != "stormguard: shard 2/3 missing\n" {
		t.Errorf("merge without shard 2: exit %d, %q", code, errs)
	}
}

func TestSweepTableAndReport(t *testing.T) {
	file := sweepFile(t)
	dir := filepath.Join(t.TempDir(), "report")
	code, out, errs := runCmd(t, t.Context(), append([]string{"sweep", file, "--out", dir}, sweepGrid...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"tiny: 2 runs swept", "COLLAPSES AT", "RECOVERS AT", "naive", "stormguard",
		"Smallest outage of db (its duration)", "LOAD/S", "What to change:", "Report: " + filepath.Join(dir, "index.html")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"index.html", "sweep.json", "hysteresis.png", "hysteresis.svg", "phase.png", "phase.svg", "ramp.csv", "phase.csv", "probes.csv"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the report lacks %s: %v", name, err)
		}
	}
}

func TestSweepHelp(t *testing.T) {
	for _, args := range [][]string{{"sweep", "--help"}, {"sweep", "-h"}, {"help", "sweep"}} {
		code, out, errs := runCmd(t, t.Context(), args...)
		if code != exitOK || errs != "" {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		for _, want := range []string{"Usage: stormguard sweep [FILE]", "stormguard sweep merge PART...", "--shard I/N", "--workers N", "--json", "--out DIR"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: help lacks %q", args, want)
			}
		}
	}
	if _, out, _ := runCmd(t, t.Context(), "help"); !strings.Contains(out, "stormguard sweep [FILE]") {
		t.Errorf("the main help does not mention sweep:\n%s", out)
	}
}

// TestSweepHelpFlags: every flag the help lists exists, and every flag
// that exists is in the help.
func TestSweepHelpFlags(t *testing.T) {
	var f sweepFlags
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	f.set(fs)
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		n++
		if !strings.Contains(sweepHelp, "--"+fl.Name) {
			t.Errorf("the help does not mention --%s", fl.Name)
		}
	})
	if n < 15 {
		t.Errorf("only %d flags", n)
	}
}

// TestSweepErrors: each mistake is one clear line and the right status.
func TestSweepErrors(t *testing.T) {
	file := sweepFile(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sweep", "--bogus"}, exitUsage, "sweep: flag provided but not defined: -bogus"},
		{[]string{"sweep", file, "--shard", "0/3", "--out", "x"}, exitUsage, "sweep: --shard 0/3: want 1 ≤ I ≤ N"},
		{[]string{"sweep", file, "--shard", "1/3"}, exitUsage, "--shard writes its part with --out DIR"},
		{[]string{"sweep", file, "--ramp", "fast"}, exitUsage, `--ramp "fast": want FROM:TO or FROM:TO:STEP`},
		{[]string{"sweep", file, "--loads", "1:2"}, exitUsage, `--loads "1:2": want FROM:TO:STEP`},
		{[]string{"sweep", file, "--max", "40"}, exitUsage, `--max "40": a trigger's duration or added latency is a duration such as 40s`},
		{[]string{"sweep", file, "--vary", "factor", "--max", "4s"}, exitUsage, `--max "4s": a trigger's factor, probability or number of keys is a number`},
		{[]string{"sweep", file, file}, exitUsage, "sweep takes one FILE"},
		{[]string{"sweep", file, "--client", "web"}, exitUsage, `tiny.yaml: no client "web" (have app)`},
		{[]string{"sweep", filepath.Join(t.TempDir(), "none.yaml")}, exitUsage, "no such file"},
		{[]string{"sweep", "merge"}, exitUsage, "sweep merge needs the parts"},
		{[]string{"sweep", file, "--capacity-at", "-1s"}, exitUsage, "--capacity-at -1s: want a time after the start of the run"},
		{[]string{"sweep", file, "--capacity-at", "2m"}, exitUsage, "--capacity-at 2m: want a time after 0 and before the end of the run (1m)"},
		{[]string{"sweep", file, "--capacity-at", "4s", "--capacity-max", "1"}, exitUsage, "--capacity-max 1: want a factor above 1"},
		{[]string{"sweep", file, "--capacity-at", "4s", "--capacity-max", "double"}, exitUsage, `--capacity-max "double": a capacity factor is a number above 0`},
		{[]string{"sweep", file, "--capacity-max", "3"}, exitUsage, "bound the search of --capacity-at: give --capacity-at T"},
		{[]string{"sweep", file, "--latest-resolution", "5s"}, exitUsage, "give --capacity-latest F"},
		{[]string{"sweep", file, "--capacity-latest", "0.5"}, exitUsage, "--capacity-latest 0.5: want a capacity factor above 1"},
		{[]string{"sweep", file, "--capacity-latest", "NaN"}, exitUsage, `--capacity-latest "NaN": a capacity factor is a number`},
		{[]string{"sweep", file, "--compare-seeds", "5000"}, exitUsage, "--compare-seeds 5000: want 1 to 1000 seeds"},
		{[]string{"sweep", "merge", t.TempDir()}, exitUsage, "holds no shard-I-of-N.json"},
	} {
		code, _, errs := runCmd(t, t.Context(), c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
		if lines := strings.Count(errs, "\n"); lines != 1 {
			t.Errorf("%q: %d lines on stderr, want one: %q", c.args, lines, errs)
		}
	}
}

// TestSweepRunbook: the runbook questions on the small file, as tables
// and in the JSON, without the ramp and the phase search (not asked).
func TestSweepRunbook(t *testing.T) {
	file := sweepFile(t)
	args := []string{"sweep", file, "--capacity-at", "4s", "--capacity-resolution", "0.5", "--capacity-latest", "2",
		"--latest-resolution", "5s", "--compare-seeds", "2"}
	code, out, errs := runCmd(t, t.Context(), args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Capacity to add at 4 s", "RECOVERS WITH", "LARGEST STUCK", "Latest time to add capacity", "STUCK FROM",
		"Runbooks compared: every run with 2 seeds", "TO RECOVER (MEDIAN)", "RELAPSED", "What to change:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "COLLAPSES AT") {
		t.Errorf("the ramp and phase table, not asked for:\n%s", out)
	}
	code, out, errs = runCmd(t, t.Context(), append(args, "--json")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res sweep.Result
	decodeSweepJSON(t, out, &res)
	if len(res.Runs) != 2 || res.Compare == nil || len(res.Compare.Rows) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, r := range res.Runs {
		if r.Ramp != nil || r.Phase != nil || r.AddCapacity == nil || r.Latest == nil || len(r.AddCapacity.Probes) == 0 {
			t.Errorf("run %s: ramp %v, phase %v, capacity %+v, latest %+v", r.Name, r.Ramp != nil, r.Phase != nil, r.AddCapacity, r.Latest)
		}
	}
	// With --ramp, the ramp runs too.
	code, out, errs = runCmd(t, t.Context(), "sweep", file, "--compare-seeds", "1", "--ramp", "100:260:80", "--hold", "2s", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res = sweep.Result{}
	decodeSweepJSON(t, out, &res)
	if res.Runs[0].Ramp == nil || res.Runs[0].Phase != nil || res.Compare == nil {
		t.Errorf("--compare-seeds with --ramp: ramp %v, phase %v, compare %v", res.Runs[0].Ramp != nil, res.Runs[0].Phase != nil, res.Compare != nil)
	}
}

func TestSweepInterrupted(t *testing.T) {
	file := sweepFile(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	code, _, errs := runCmd(t, ctx, append([]string{"sweep", file}, sweepGrid...)...)
	if code != exitInterrupted || !strings.Contains(errs, "interrupted") {
		t.Errorf("exit %d, %q; want %d, interrupted", code, errs, exitInterrupted)
	}
}

// TestSweepDefault: without FILE, the built-in example (here its ramp
// only, near the capacity).
func TestSweepDefault(t *testing.T) {
	code, out, errs := runCmd(t, t.Context(), "sweep", "--no-phase", "--ramp", "250:350:50", "--hold", "4s", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res sweep.Result
	decodeSweepJSON(t, out, &res)
	if res.Scenario != "hotos-sweep" || len(res.Runs) != 2 || res.Runs[0].Capacity != 300 || res.Runs[0].Phase != nil {
		t.Errorf("the default sweep: %+v", res)
	}
}

// TestSweepMergeBadParts: a part that is not one, in any way, is one line
// naming the file, exit status 1, never a panic.
func TestSweepMergeBadParts(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	file := sweepFile(t)
	if code, _, errs := runCmd(t, t.Context(), append([]string{"sweep", file, "--shard", "1/2", "--out", good}, sweepGrid...)...); code != exitOK {
		t.Fatalf("shard: %s", errs)
	}
	part, err := os.ReadFile(filepath.Join(good, "shard-1-of-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte { return []byte(strings.Replace(string(part), old, new, 1)) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty: not a shard's part"},
		{"zeros", make([]byte, 100), `not a shard's part: invalid character '\x00'`},
		{"truncated", part[:len(part)/2], "not a shard's part: unexpected EOF"},
		{"two objects", append(append([]byte(nil), part...), part...), "more follows the JSON object"},
		{"unknown field", edit(`"format"`, `"formatt"`), `unknown field "formatt"`},
		{"huge shard count", edit(`"count": 2`, `"count": 1000000000000000000`), "want 1 ≤ I ≤ N ≤ 100000"},
		{"negative count", edit(`"count": 2`, `"count": -2`), "want 1 ≤ I ≤ N"},
		{"ramp of no run", edit(`"run": 0,`, `"run": 7,`), "ramps[0]: run 7 has no ramp in the plan"},
		{"no key", edit(`"key": "`, `"key": "", "x": "`), "unknown field"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCmd(t, t.Context(), "sweep", "merge", path)
		if code != exitUsage || !strings.HasPrefix(errs, "stormguard: "+path+": ") || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line naming the file and %q", c.name, code, errs, c.want)
		}
	}
}

func FuzzParseRamp(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"100:260:40", "100:200", "10:5", "0:100", "1:1e9:1", "1:2:0", "a:b", "1:2:3:4", "NaN:1", "1:Inf", "100:1e9", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		from, to, step, err := parseRamp(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--ramp ") {
				t.Fatalf("parseRamp(%q): the error %q does not name the flag", s, err)
			}
			return
		}
		if !(from > 0) || !(to > from) || math.IsInf(to, 0) || !(step >= 0) || step > 0 && (to-from)/step > sweep.MaxSteps {
			t.Fatalf("parseRamp(%q) = %v, %v, %v", s, from, to, step)
		}
	})
}

func FuzzParseSweepLoads(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"80:160:40", "100,200,300", "1:2", "1:1e9:1", "5:1:1", "0,1", "-1", "1e9", "NaN", "1:2:0", "1,,2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loads, err := parseSweepLoads(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--loads") {
				t.Fatalf("parseSweepLoads(%q): the error %q does not name the flag", s, err)
			}
			return
		}
		if len(loads) == 0 || len(loads) > sweep.MaxSteps {
			t.Fatalf("parseSweepLoads(%q): %d loads", s, len(loads))
		}
		for _, l := range loads {
			if !(l > 0) || math.IsInf(l, 0) {
				t.Fatalf("parseSweepLoads(%q): load %v", s, l)
			}
		}
	})
}

func FuzzParseTriggerSize(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"40s", "500ms", "0s", "-1s", "3", "0", "1e300", "NaN", "2562047h47m16.854775807s", "2562048h", "1h2m3.5s", ""} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, duration bool) {
		v, err := parseTriggerSize("max", s, duration)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--max ") {
				t.Fatalf("parseTriggerSize(%q): the error %q does not name the flag", s, err)
			}
			return
		}
		if !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("parseTriggerSize(%q, %v) = %v", s, duration, v)
		}
	})
}

func FuzzParseCapacityFactor(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"2", "1.5", "0", "-1", "1e6", "1e400", "NaN", "Inf", " 2 ", "2x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseCapacityFactor("capacity-max", s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--capacity-max ") {
				t.Fatalf("parseCapacityFactor(%q): the error %q does not name the flag", s, err)
			}
			return
		}
		if !(v > 0) || math.IsInf(v, 0) {
			t.Fatalf("parseCapacityFactor(%q) = %v", s, v)
		}
	})
}

// FuzzSweepPart: whatever a part file holds, merging it is a clear error
// or a result that prints; never a panic.
func FuzzSweepPart(f *testing.F) {
	quickMinimize()
	plan, err := sweep.NewPlan(mustParse(f, sweepYAML), sweep.Options{From: 100, To: 180, Step: 40, Hold: 2 * time.Second,
		Loads: []float64{120}, Max: 2, Resolution: 1, After: 4 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	runbook, err := sweep.NewPlan(mustParse(f, sweepYAML), sweep.Options{NoRamp: true, NoPhase: true, CapacityAt: 4 * time.Second,
		CapacityResolution: 1, LatestFactor: 2, LatestResolution: 20 * time.Second, CompareSeeds: 2})
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range []struct {
		plan sweep.Plan
		sh   sweep.Shard
	}{{plan, sweep.Shard{Index: 1, Count: 1}}, {plan, sweep.Shard{Index: 2, Count: 3}}, {runbook, sweep.Shard{Index: 1, Count: 1}}, {runbook, sweep.Shard{Index: 1, Count: 2}}} {
		part, err := sweep.Execute(context.Background(), c.plan, sweep.Exec{Shard: c.sh})
		if err != nil {
			f.Fatal(err)
		}
		data, _ := json.Marshal(part)
		f.Add(data)
	}
	f.Add([]byte(`{"format": "stormguard-sweep-partial/1", "shard": {"index": 1, "count": 1}, "plan": {"key": "k", "runs": [{"name": "a", "phase": {"loads": [1], "vary": "duration", "max": 1, "resolution": 1e-300}}]}, "ramps": [], "columns": []}`))
	f.Add([]byte(`{"format": "stormguard-sweep-partial/1", "shard": {"index": 1, "count": 1}, "plan": {"key": "k", "runs": [{"name": "a", "ramp": {"from": 1, "to": 2, "step": 1, "hold_s": 1}}]}, "ramps": [{"run": 0, "ramp": {"steps": [{"branch": "up"}]}}]}`))
	f.Add([]byte("{}"))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		part, err := sweep.ReadPartial(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		res, err := sweep.Merge(part)
		if err != nil {
			return
		}
		printSweep(io.Discard, res, -1)
		if err := sweepOutput(res, "", true, -1, io.Discard); err != nil {
			t.Fatalf("the JSON of a merged result: %v", err)
		}
	})
}

func mustParse(f *testing.F, y string) scenario.File {
	f.Helper()
	file, err := scenario.Parse("tiny.yaml", []byte(y))
	if err != nil {
		f.Fatal(err)
	}
	return file
}
