package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/analyze"
)

var threeTier = filepath.Join("..", "..", "examples", "three-tier.yaml")

func TestAnalyzeExitStatus(t *testing.T) {
	bad := filepath.Join("..", "..", "sim", "scenario", "testdata", "bad-unknown-field.yaml")
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a line the output holds
		stderr string // … and the errors
	}{
		{"error findings gate CI", []string{"analyze", threeTier}, exitError,
			"FAIL: 4 errors, 10 warnings, 0 notes over 2 runs.", "analyze: 4 error findings in 1 run (exit status 1)"},
		{"a clean run passes", []string{"analyze", threeTier, "--run", "stormguard"}, exitOK,
			"OK: 0 errors, 1 warning, 0 notes over 1 run.", ""},
		{"flags before the file", []string{"analyze", "--run", "naive", threeTier}, exitError,
			"users runs at 150/s; db becomes vulnerable above 9.26/s", "analyze: 4 error findings in 1 run"},
		{"help", []string{"analyze", "--help"}, exitOK, "Usage: stormguard analyze FILE", ""},
		{"help command", []string{"help", "analyze"}, exitOK, "Usage: stormguard analyze FILE", ""},
		{"listed in the main help", []string{"help"}, exitOK, "stormguard analyze FILE [--run NAME] [--out DIR] [--json]", ""},
		{"no file", []string{"analyze"}, exitUsage, "", "analyze takes one FILE, got 0"},
		{"two files", []string{"analyze", threeTier, threeTier}, exitUsage, "", "analyze takes one FILE, got 2"},
		{"unknown flag", []string{"analyze", threeTier, "--bogus", "x"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{"--out without a directory", []string{"analyze", threeTier, "--out"}, exitUsage, "", "flag needs an argument: -out"},
		{"unknown run", []string{"analyze", threeTier, "--run", "nope"}, exitUsage, "", `no run "nope" in ` + threeTier + " (runs: naive, stormguard)"},
		{"missing file", []string{"analyze", "nonexistent.yaml"}, exitUsage, "", "no such file or directory"},
		{"bad file", []string{"analyze", bad}, exitUsage, "", "bad-unknown-field.yaml:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCmd(t, t.Context(), c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, c.code, errs)
			}
			if !strings.Contains(out, c.stdout) {
				t.Errorf("stdout lacks %q:\n%s", c.stdout, out)
			}
			if c.stderr == "" && errs != "" || !strings.Contains(errs, c.stderr) {
				t.Errorf("stderr %q, want %q", errs, c.stderr)
			}
		})
	}
}

func TestAnalyzeJSON(t *testing.T) {
	for _, c := range []struct {
		args         []string
		code         int
		runs, errors int
	}{
		{[]string{"analyze", threeTier, "--json"}, exitError, 2, 4},
		{[]string{"analyze", "--json", threeTier, "--run", "stormguard"}, exitOK, 1, 0},
	} {
		code, out, errs := runCmd(t, t.Context(), c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, errs)
		}
		dec := json.NewDecoder(strings.NewReader(out))
		var rep analyze.Report
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Errorf("%v: stdout holds more than one JSON value (next: %v)", c.args, err)
		}
		if len(rep.Analyses) != c.runs || rep.Errors != c.errors || rep.Scenario != "three-tier" {
			t.Errorf("%v: %d analyses, %d errors, scenario %q", c.args, len(rep.Analyses), rep.Errors, rep.Scenario)
		}
		for _, a := range rep.Analyses {
			if len(a.Paths) != 3 || len(a.Services) != 3 {
				t.Errorf("%v: run %s has %d paths and %d services", c.args, a.Run, len(a.Paths), len(a.Services))
			}
		}
	}
}

// TestAnalyzeHelpTellsTheTruth: the help names every rule the analyzer
// checks, and every flag it accepts.
func TestAnalyzeHelpTellsTheTruth(t *testing.T) {
	for _, r := range analyze.Rules {
		if !strings.Contains(analyzeHelp, r.ID) {
			t.Errorf("the help does not name rule %s", r.ID)
		}
	}
	for _, flag := range []string{"--run NAME", "--out DIR", "--json", "--help"} {
		if !strings.Contains(analyzeHelp, flag) {
			t.Errorf("the help does not name %s", flag)
		}
	}
}

// TestAnalyzeHelpNamesEveryFlag: every flag the command defines is in the
// help (the flag set is rebuilt from the source's flag names).
func TestAnalyzeHelpNamesEveryFlag(t *testing.T) {
	src, err := os.ReadFile("analyze.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	for _, m := range regexp.MustCompile(`fs\.\w+Var\(&\w+, "([a-z-]+)"`).FindAllStringSubmatch(string(src), -1) {
		fs.Bool(m[1], false, "")
	}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(analyzeHelp, "--"+f.Name+" ") {
			t.Errorf("the help does not name --%s", f.Name)
		}
	})
	if n < 3 {
		t.Errorf("found %d flags in analyze.go", n)
	}
}

// TestAnalyzeOut: analyze FILE --out DIR writes the report, then still
// exits 1 when a rule at severity error is broken; a clean run exits 0.
func TestAnalyzeOut(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		charts []string
		page   string
	}{
		{[]string{"analyze", threeTier}, exitError, []string{"amplification", "vulnerable"}, "FAIL"},
		{[]string{"analyze", "--json", threeTier}, exitError, []string{"amplification", "vulnerable"}, "FAIL"},
		{[]string{"analyze", threeTier, "--run", "stormguard"}, exitOK, []string{"amplification", "vulnerable"}, "OK"},
		{[]string{"analyze", filepath.Join("..", "..", "examples", "hotos-toy.yaml")}, exitError, []string{"amplification", "vulnerable", "fluid"}, "FAIL"},
	} {
		dir := filepath.Join(t.TempDir(), "report")
		args := append(c.args, "--out", dir)
		code, out, errs := runCmd(t, t.Context(), args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", args, code, c.code, errs)
		}
		if c.code == exitError && !strings.Contains(errs, "error finding") {
			t.Errorf("%v: stderr %q", args, errs)
		}
		page, err := os.ReadFile(filepath.Join(dir, "index.html"))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(string(page), `">`+c.page+`</span>`) {
			t.Errorf("%v: the page lacks the verdict %s", args, c.page)
		}
		if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(string(page)); m != "" {
			t.Errorf("%v: index.html loads from the network: %q", args, m)
		}
		if n := strings.Count(string(page), `<img src="data:image/png;base64,`); n != len(c.charts) {
			t.Errorf("%v: %d inline images, want %d", args, n, len(c.charts))
		}
		for _, name := range c.charts {
			b, err := os.ReadFile(filepath.Join(dir, name+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("%s.png: %v", name, err)
			}
			if _, err := os.Stat(filepath.Join(dir, name+".svg")); err != nil {
				t.Error(err)
			}
		}
		var rep analyze.Report
		b, err := os.ReadFile(filepath.Join(dir, "analysis.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rep); err != nil || len(rep.Analyses) == 0 {
			t.Errorf("%v: analysis.json: %v", args, err)
		}
		isJSON := strings.Contains(strings.Join(c.args, " "), "--json")
		if !isJSON && !strings.Contains(out, "Report: "+filepath.Join(dir, "index.html")) {
			t.Errorf("%v: stdout does not name the report:\n%s", args, out)
		}
		if isJSON && strings.Contains(out, "Report:") {
			t.Errorf("%v: --json stdout holds more than the JSON", args)
		}
	}
}
