package archtest

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/stormguard/stormguard"

// model is the simulator's model: the readers of scenarios, results and
// sweeps must not depend on it (docs/architecture.md, "The simulator's
// side imports downwards only").
const model = module + "/sim"

// modelFree are the packages that read the scenario format, a run's
// results or a sweep's, and never run the model. lab and rehearse take the
// simulator's results from their caller (cmd/stormguard), so they belong
// here too; their tests may import sim, which is not checked.
var modelFree = []string{
	"sim/scenario",
	"sim/result",
	"sweep/plan",
	"analyze",
	"report",
	"lab",
	"rehearse",
}

// oses are the systems whose files are read: a file built only on one of
// them may import what the others do not.
var oses = []string{"linux", "darwin", "freebsd", "windows"}

// root is the module's directory, two above this one.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module "+module+"\n") {
		t.Fatalf("%s is not the module %s: %v", dir, module, err)
	}
	return dir
}

// chain returns the path of imports (non-test files, within the module)
// from the package pkg to the package bad, or nil when pkg does not depend
// on bad. It reads each package's directory for every system in oses.
func chain(t *testing.T, dir, pkg, bad string) []string {
	t.Helper()
	from := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == bad {
			var path []string
			for q := p; q != ""; q = from[q] {
				path = append(path, strings.TrimPrefix(q, module+"/"))
			}
			slices.Reverse(path)
			return path
		}
		for _, imp := range imports(t, dir, p) {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// imports lists the module's packages that the non-test files of pkg
// import, on any system of oses.
func imports(t *testing.T, dir, pkg string) []string {
	t.Helper()
	pkgDir := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(pkg, module)))
	var out []string
	found := false
	for _, goos := range oses {
		ctxt := build.Default
		ctxt.GOOS = goos
		ctxt.CgoEnabled = false
		bp, err := ctxt.ImportDir(pkgDir, 0)
		if _, ok := err.(*build.NoGoError); ok {
			continue
		}
		if err != nil {
			t.Fatalf("%s on %s: %v", pkg, goos, err)
		}
		found = true
		for _, imp := range bp.Imports {
			if (imp == module || strings.HasPrefix(imp, module+"/")) && !slices.Contains(out, imp) {
				out = append(out, imp)
			}
		}
	}
	if !found {
		t.Fatalf("%s: no Go files in %s", pkg, pkgDir)
	}
	slices.Sort(out)
	return out
}

// TestReadersDoNotImportTheModel: the packages that read the format and
// the results reach sim (the model) through no chain of imports.
func TestReadersDoNotImportTheModel(t *testing.T) {
	dir := root(t)
	for _, p := range modelFree {
		t.Run(p, func(t *testing.T) {
			if c := chain(t, dir, module+"/"+p, model); c != nil {
				t.Errorf("%s depends on the model: %s", p, strings.Join(c, " → "))
			}
		})
	}
}

// TestChainFindsTheModel: the walk finds the model where it is imported,
// directly and through another package, so that the test above can fail.
func TestChainFindsTheModel(t *testing.T) {
	dir := root(t)
	for _, c := range []struct {
		pkg  string
		want string
	}{
		{"sim", "sim"},
		{"sweep", "sweep → sim"},
		{"cmd/stormguard", "cmd/stormguard → sim"},
		{"sim/scenario", ""},
	} {
		got := strings.Join(chain(t, dir, module+"/"+c.pkg, model), " → ")
		if got != c.want {
			t.Errorf("chain from %s = %q, want %q", c.pkg, got, c.want)
		}
	}
}
