package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/sim/result"
)

// runCmd runs the command in-process and returns its exit status, stdout
// and what it printed on stderr, the error included.
func runCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := exit(run(ctx, args, &out, &errb), &errb)
	return code, out.String(), errb.String()
}

func TestSimDefaultJSON(t *testing.T) {
	code, out, errs := runCmd(t, t.Context(), "sim", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var got result.Output
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Errorf("stdout holds more than one JSON value (next: %v)", err)
	}
	if got.Scenario != "hotos-toy" || len(got.Runs) < 2 {
		t.Fatalf("scenario %q with %d runs", got.Scenario, len(got.Runs))
	}
	for _, r := range got.Runs {
		if !slices.Contains([]string{"stable", "recovered", "metastable"}, r.Verdict) {
			t.Errorf("run %s: verdict %q", r.Name, r.Verdict)
		}
	}
	// The stable keys tools rely on.
	for _, key := range []string{`"name":`, `"verdict":`, `"recovery_s":`} {
		if !strings.Contains(out, key) {
			t.Errorf("the JSON lacks %s", key)
		}
	}
	if errs != "" {
		t.Errorf("stderr is not empty: %q", errs)
	}
}

func TestSimFlagsAfterFileAndSeed(t *testing.T) {
	file := filepath.Join("..", "..", "sim", "scenario", "testdata", "minimal.yaml")
	code, out, errs := runCmd(t, t.Context(), "sim", file, "--seed", "7", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got result.Output
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != 1 || got.Runs[0].Seed != 7 || got.Runs[0].Name != "minimal" {
		t.Errorf("runs = %+v", got.Runs)
	}
}

func TestSimOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	code, out, errs := runCmd(t, t.Context(), "sim", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"summary.json", "index.html", "naive.csv", "naive.png", "naive.svg",
		"stormguard.csv", "stormguard.png", "stormguard.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, want := range []string{"RUN", "VERDICT", "naive", "stormguard", "What to change:", filepath.Join(dir, "index.html")} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

func TestErrors(t *testing.T) {
	bad := filepath.Join("..", "..", "sim", "scenario", "testdata", "bad-unknown-field.yaml")
	tests := []struct {
		name string
		args []string
		code int
		want string // in the first line of stderr
	}{
		{"bad flag", []string{"sim", "--bogus"}, exitUsage, "stormguard: sim: flag provided but not defined: -bogus"},
		{"bad seed", []string{"sim", "--seed", "x"}, exitUsage, `invalid value "x" for flag -seed`},
		{"two files", []string{"sim", "a.yaml", "b.yaml"}, exitUsage, "sim takes one FILE, got 2"},
		{"no command", nil, exitUsage, "stormguard: defenses against retry storms"},
		{"unknown command", []string{"simulate"}, exitUsage, `stormguard: unknown command "simulate"`},
		{"missing file", []string{"sim", "no-such.yaml"}, exitUsage, "stormguard: open no-such.yaml: no such file or directory"},
		{"bad file", []string{"sim", bad}, exitUsage, "bad-unknown-field.yaml:5: clients.app.timout: unknown field (want one of name, target,"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCmd(t, t.Context(), tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
			if !strings.Contains(lines[0], tt.want) {
				t.Errorf("stderr = %q, want %q in its first line", errs, tt.want)
			}
			if tt.name != "no command" && len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1: %q", len(lines), errs)
			}
		})
	}
}

func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	code, _, errs := runCmd(t, ctx, "sim")
	if code != exitInterrupted || !strings.Contains(errs, "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d and interrupted", code, errs, exitInterrupted)
	}
}

// TestHelp checks that the help tells of every flag sim has.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"sim", "--help"}, {"sim", "-h"}, {"help", "sim"}} {
		code, out, _ := runCmd(t, t.Context(), args...)
		if code != exitOK || out != simHelp {
			t.Errorf("%q: exit %d, stdout %.40q…", args, code, out)
		}
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	new(simFlags).set(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(simHelp, "--"+f.Name+" ") {
			t.Errorf("the help of sim does not tell of --%s", f.Name)
		}
		if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(simHelp, "default "+f.DefValue) {
			t.Errorf("the help of sim does not give the default of --%s (%s)", f.Name, f.DefValue)
		}
	})
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		if code, out, _ := runCmd(t, t.Context(), args...); code != exitOK || out != mainHelp {
			t.Errorf("%q: exit %d", args, code)
		}
	}
	for _, h := range []string{mainHelp, simHelp} {
		if !strings.Contains(h, "Exit status: 0 success") || !strings.Contains(h, "2 usage error or bad input") {
			t.Error("a help text does not give the exit statuses")
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		code, out, _ := runCmd(t, t.Context(), arg)
		if code != exitOK || !strings.HasPrefix(out, "stormguard ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%s: exit %d, %q", arg, code, out)
		}
	}
	if code, _, _ := runCmd(t, t.Context(), "version", "x"); code != exitUsage {
		t.Errorf("version x: exit %d, want %d", code, exitUsage)
	}
	for _, args := range [][]string{{"help", "version"}, {"version", "--help"}} {
		if code, out, _ := runCmd(t, t.Context(), args...); code != exitOK || !strings.HasPrefix(out, "Usage: stormguard version") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

func TestFormatVersion(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "21c51ce0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-02T11:22:36Z"}, {Key: "vcs.modified", Value: "false"}}},
			"stormguard (devel) revision 21c51ce01234 (2026-12-02T11:22:36Z) go1.26.8"},
		{"dirty", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"stormguard (devel) revision abc+dirty go1.26.8"},
		{"go install @version", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}},
			"stormguard v0.3.0 go1.26.8"},
		{"go run of a file", debug.BuildInfo{GoVersion: "go1.26.8"}, "stormguard (devel) go1.26.8"},
	}
	for _, tt := range tests {
		if got := formatVersion(&tt.bi); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"f.yaml", "--json"}, []string{"f.yaml"}, true},
		{[]string{"--json", "f.yaml"}, []string{"f.yaml"}, true},
		{[]string{"-json=false", "f.yaml", "--out", "d"}, []string{"f.yaml"}, false},
		{[]string{"--", "--json"}, []string{"--json"}, false},
		{nil, nil, false},
	}
	for _, tt := range tests {
		var f simFlags
		fs := flag.NewFlagSet("sim", flag.ContinueOnError)
		f.set(fs)
		pos, err := parseInterleaved(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || f.json != tt.json {
			t.Errorf("%q: pos %q, json %v, err %v; want %q, %v", tt.args, pos, f.json, err, tt.pos, tt.json)
		}
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	if isTerminal(&b) {
		t.Error("a buffer is a terminal")
	}
	p := newProgress(&b, 2)
	p.set(0, 1)
	p.set(1, 0.5)
	got := p.line(3e9)
	if !strings.Contains(got, " 75%  1/2 runs  about 1s left") {
		t.Errorf("line = %q", got)
	}
	p.stop()
	if b.Len() != 0 {
		t.Errorf("an inactive bar wrote %q", b.String())
	}
}

func TestWrap(t *testing.T) {
	long := strings.Repeat("word ", 50)
	got := wrap("  lead: "+long, "    ")
	for i, l := range strings.Split(got, "\n") {
		if len(l) > wrapWidth {
			t.Errorf("line %d is %d bytes long", i, len(l))
		}
		if i > 0 && !strings.HasPrefix(l, "    word") {
			t.Errorf("line %d = %q, want the indent", i, l)
		}
	}
	if strings.Join(strings.Fields(got), " ") != strings.TrimSpace("lead: "+long) {
		t.Error("wrap lost or changed words")
	}
}
