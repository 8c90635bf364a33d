package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func init() {
	// -update rewrites the golden files of TestCheckGolden; another test
	// file of the package may have defined the flag already.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata/")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestCheckGolden compares what check prints, on stdout and stderr, with
// testdata/check/*.golden; rerun with -update and review the diff when a
// change is intended.
func TestCheckGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
		code   int
	}{
		{"checkout.yaml.golden", []string{"check", "../../examples/policy/checkout.yaml"}, exitOK},
		{"checkout.json.golden", []string{"check", "--json", "../../examples/policy/checkout.yaml"}, exitOK},
		{"bad.golden", []string{"check", "testdata/check/bad.yaml"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, out, errs := runCmd(t, t.Context(), tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			got := "$ stormguard " + strings.Join(tt.args, " ") + "\n" + out + "-- stderr --\n" + errs
			path := filepath.Join("testdata", "check", tt.golden)
			if updating() {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./cmd/stormguard -run TestCheckGolden -update creates it)", err)
			}
			if got != string(want) {
				t.Errorf("check's output differs from %s; if the change is intended, rerun with -update and review the diff\ngot:\n%s", path, got)
			}
		})
	}
}

// TestCheckExitStatus: 0 for a valid file, 2 for a bad one or a bad
// command line, as the help says.
func TestCheckExitStatus(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"valid", []string{"check", "../../examples/policy/checkout.json"}, exitOK, ""},
		{"flag after the file", []string{"check", "../../examples/policy/checkout.yaml", "--json"}, exitOK, ""},
		{"bad file", []string{"check", "testdata/check/bad.yaml"}, exitUsage, "testdata/check/bad.yaml:6: clients.db.max_attempts: 0 is not a value here"},
		{"missing file", []string{"check", "testdata/check/none.yaml"}, exitUsage, "none.yaml: no such file"},
		{"a scenario is not a policy file", []string{"check", "../../examples/hotos-toy.yaml"}, exitUsage, "hotos-toy.yaml:6: name: unknown field (want one of service, description, clients, server)"},
		{"no file", []string{"check"}, exitUsage, "check takes one FILE, got 0"},
		{"two files", []string{"check", "a.yaml", "b.yaml"}, exitUsage, "check takes one FILE, got 2"},
		{"unknown flag", []string{"check", "--yaml", "a.yaml"}, exitUsage, "check: flag provided but not defined: -yaml (see stormguard check --help)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := runCmd(t, t.Context(), tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errs)
			}
			if tt.stderr == "" && errs != "" || !strings.Contains(errs, tt.stderr) {
				t.Errorf("stderr %q, want %q", errs, tt.stderr)
			}
		})
	}
}

// TestCheckStdin: - reads standard input, named stdin in errors.
func TestCheckStdin(t *testing.T) {
	for _, tt := range []struct {
		text string
		code int
		want string // in stdout, or stderr when the code is not 0
	}{
		{"clients: {db: sre}\n", exitOK, "# stdin is valid."},
		{"clients: {db: {max_attempts: 0}}\n", exitUsage, "stormguard: stdin:1: clients.db.max_attempts: 0 is not a value here"},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString(tt.text); err != nil {
			t.Fatal(err)
		}
		w.Close()
		stdin := os.Stdin
		os.Stdin = r
		code, out, errs := runCmd(t, t.Context(), "check", "-")
		os.Stdin = stdin
		r.Close()
		got := out
		if code != exitOK {
			got = errs
		}
		if code != tt.code || !strings.Contains(got, tt.want) {
			t.Errorf("check - < %q: exit %d, %q; want exit %d, %q", tt.text, code, got, tt.code, tt.want)
		}
	}
}

// TestCheckHelp: --help and help check print the same help, which names
// the flags check has and the exit statuses it uses.
func TestCheckHelp(t *testing.T) {
	code, out, _ := runCmd(t, t.Context(), "check", "--help")
	_, help, _ := runCmd(t, t.Context(), "help", "check")
	if code != exitOK || out != checkHelp || help != checkHelp {
		t.Fatalf("check --help: exit %d, same as the help: %v; help check the same: %v", code, out == checkHelp, help == checkHelp)
	}
	for _, want := range []string{"Usage: stormguard check FILE [--json]", "--json", "-h, --help", "- reads standard input",
		"Exit status: 0 the file is valid, 2 usage error or a bad file"} {
		if !strings.Contains(checkHelp, want) {
			t.Errorf("the help does not say %q", want)
		}
	}
	_, main, _ := runCmd(t, t.Context(), "help")
	if !strings.Contains(main, "stormguard check FILE [--json]") || !strings.Contains(commandList, "check") {
		t.Error("the main help or the command list does not name check")
	}
}

// TestCheckDocsQuoteGolden: the excerpts of check's output in
// docs/policy.md are what check prints (its golden files).
func TestCheckDocsQuoteGolden(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"bad.golden", "checkout.yaml.golden"} {
		b, err := os.ReadFile(filepath.Join("testdata", "check", g))
		if err != nil {
			t.Fatal(err)
		}
		// The excerpt: the output without the command line and stderr
		// marker, from the second line, up to the end of the docs' block.
		lines := strings.Split(string(b), "\n")[1:]
		var quoted []string
		for _, l := range lines {
			if l == "-- stderr --" {
				continue
			}
			l = strings.ReplaceAll(l, "../../examples/", "examples/")
			if !strings.Contains(string(doc), l+"\n") {
				break
			}
			quoted = append(quoted, l)
		}
		if len(quoted) < 7 {
			t.Errorf("docs/policy.md holds only the first %d lines of %s (want at least 7): %q", len(quoted), g, quoted)
		}
	}
}
