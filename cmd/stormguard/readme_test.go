package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeDocs are the files whose command excerpts TestReadmeExcerpts runs.
var readmeDocs = []string{"../../README.md", "../../docs/sweep.md"}

// readmeExcerpt is one "$ go run ./cmd/stormguard ARGS" block of a doc and
// the output it shows.
type readmeExcerpt struct {
	doc  string
	args []string
	want []string
}

// readmeExcerpts finds every fenced block that starts with a stormguard
// command and shows its output.
func readmeExcerpts(t *testing.T) []readmeExcerpt {
	t.Helper()
	var out []readmeExcerpt
	for _, doc := range readmeDocs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "\n```\n")[1:] {
			cmd, rest, ok := strings.Cut(block, "\n")
			if !ok || !strings.HasPrefix(cmd, "$ go run ./cmd/stormguard ") {
				continue
			}
			body, _, _ := strings.Cut(rest, "```")
			out = append(out, readmeExcerpt{doc: filepath.Base(doc),
				args: strings.Fields(strings.TrimPrefix(cmd, "$ go run ./cmd/stormguard ")),
				want: strings.Split(strings.TrimRight(body, "\n"), "\n")})
		}
	}
	return out
}

// readmeTook: the wall time a command reports differs run to run.
var readmeTook = regexp.MustCompile(`took [0-9.]+ s`)

// Every command excerpt of the README (and of docs/sweep.md) is what the
// command prints today: its lines are the first lines of the command's
// standard output, or, when the excerpt is abridged (a line "…"), they
// appear in the output in that order. Wall times ("took 0.2 s") are not
// compared. The sweeps take a minute without the race detector and many
// with it: under -race only the fast excerpts run, and .ci/run runs this
// test again without -race.
func TestReadmeExcerpts(t *testing.T) {
	excerpts := readmeExcerpts(t)
	if len(excerpts) < 4 {
		t.Fatalf("%d command excerpts found; want at least 4 (sim, analyze, two sweeps)", len(excerpts))
	}
	for _, e := range excerpts {
		name := e.doc + ": " + strings.Join(e.args, " ")
		if raceEnabled && e.args[0] == "sweep" {
			t.Logf("%s: skipped under -race", name)
			continue
		}
		args := append([]string(nil), e.args...)
		for i := range args {
			switch {
			case i > 0 && args[i-1] == "--out":
				args[i] = t.TempDir()
			case strings.HasPrefix(args[i], "examples/"):
				args[i] = "../../" + args[i] // the docs run from the repository's root
			}
		}
		_, out, errs := runCmd(t, t.Context(), args...)
		if out == "" {
			t.Errorf("%s: no output; stderr: %s", name, errs)
			continue
		}
		out = strings.ReplaceAll(out, "../../examples/", "examples/")
		got := strings.Split(readmeTook.ReplaceAllString(out, "took X s"), "\n")
		for i := range got {
			got[i] = strings.TrimRight(got[i], " ")
		}
		abridged := false
		for _, w := range e.want {
			abridged = abridged || strings.TrimSpace(w) == "…"
		}
		j := 0
		for i, w := range e.want {
			w = strings.TrimRight(readmeTook.ReplaceAllString(w, "took X s"), " ")
			if strings.TrimSpace(w) == "…" {
				continue
			}
			if !abridged {
				if i >= len(got) || got[i] != w {
					g := ""
					if i < len(got) {
						g = got[i]
					}
					t.Errorf("%s: line %d is\n  %q\nthe command prints\n  %q\nwhole output:\n%s", name, i+1, w, g, out)
					break
				}
				continue
			}
			for j < len(got) && got[j] != w {
				j++
			}
			if j == len(got) {
				t.Errorf("%s: the command does not print, after the lines before it,\n  %q\nwhole output:\n%s", name, w, out)
				break
			}
			j++
		}
	}
}
