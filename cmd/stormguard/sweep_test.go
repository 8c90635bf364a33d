package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if code != exitError || errs != "stormguard: shard 2/3 missing\n" {
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
		{[]string{"sweep", file, "--vary", "factor", "--max", "4s"}, exitUsage, `--max "4s": a trigger's factor is a number`},
		{[]string{"sweep", file, file}, exitUsage, "sweep takes one FILE"},
		{[]string{"sweep", file, "--client", "web"}, exitError, `tiny.yaml: no client "web" (have app)`},
		{[]string{"sweep", filepath.Join(t.TempDir(), "none.yaml")}, exitError, "no such file"},
		{[]string{"sweep", "merge"}, exitUsage, "sweep merge needs the parts"},
		{[]string{"sweep", "merge", t.TempDir()}, exitError, "holds no shard-I-of-N.json"},
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
