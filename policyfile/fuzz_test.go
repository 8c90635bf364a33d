package policyfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: the loader reads files from outside. Whatever the input, it
// returns a file or errors that each name the file; a file it returns
// builds a retrier for every dependency and a valid server, and its
// effective policy reads back to itself.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "examples", "policy", "checkout.*"))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"clients:\n  db: stormguard\n",
		"clients:\n  a: &p {max_attempts: 2, breaker: {mode: rate}}\n  b: *p\n  c: {<<: *p, hedge: {delay: 5ms}}\n",
		"server: {limit: {kind: fixed, limit: 10}, queue: {priority: criticality}, max_criticality: critical-plus}\n",
		"clients: {db: {budget: {kind: token-bucket, capacity: 0.5}, retry_probability: 0}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(l, "fuzz.yaml") || len(l) <= len("fuzz.yaml: ") {
					t.Fatalf("error line %q does not name the file and a problem", l)
				}
			}
			return
		}
		for i := range file.Clients {
			if _, err := file.Clients[i].NewRetrier(); err != nil {
				t.Fatalf("dependency %s was returned but its retrier is refused: %v", file.Clients[i].Dependency, err)
			}
		}
		if err := file.HTTPServer().Validate(); err != nil {
			t.Fatalf("the server was returned but is refused: %v", err)
		}
		want, err := file.EffectiveYAML()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("effective.yaml", want)
		if err != nil {
			t.Fatalf("the effective policy does not read back: %v\n%s", err, want)
		}
		got, err := back.EffectiveYAML()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stripComments(got), stripComments(want)) {
			t.Fatalf("the effective policy reads back as\n%s\nwant\n%s", got, want)
		}
	})
}
