package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every link of README.md is to a file of this repository, and so is
// every file it names (a DESIGN.md outside the repository was one);
// every relative link of docs/*.md and CHANGELOG.md resolves too.
func TestDocLinks(t *testing.T) {
	const root = "../.."
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	named := regexp.MustCompile("(?:^|[\\s`(])([A-Za-z0-9_./-]+\\.md)\\b")
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files := append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}, docs...)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		readme := filepath.Base(f) == "README.md"
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") {
				if readme {
					t.Errorf("README.md links outside the repository: %s", m[1])
				}
				continue
			}
			if target == "" {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				t.Errorf("%s: link to %s: %v", f, m[1], err)
			}
		}
		if !readme {
			continue
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			checked++
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("README.md names %s, which is not in the repository", m[1])
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d links checked: the patterns find nothing", checked)
	}
}
