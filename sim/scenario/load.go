package scenario

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
)

// File is a scenario file: the scenario as written (Base) and the runs it
// asks for, each a complete, validated Scenario.
//
// Next to the scenario's own fields a file may hold two more keys:
//
//	runs:                      # runs side by side; each changes the base
//	  - name: naive
//	  - name: stormguard
//	    set: {clients.app.policy: stormguard, services.db.defenses: stormguard}
//	sweep:                     # every run once per value
//	  set: clients.app.arrivals.rate
//	  values: [100, 150, 200]
//
// A set key is a dotted path into the scenario (see [RunSpec]); its value is
// any YAML and replaces what is at the path before the scenario is decoded,
// so a mistyped value is reported at its own line.
type File struct {
	Path string
	Base Scenario
	Runs []RunSpec
}

// RunSpec is one run of a file.
//
// Name is the run's name, "NAME/LEAF=VALUE" for a sweep value (LEAF is the
// last element of the swept path, NAME the run's name or, without runs, the
// scenario's), or the scenario's name when the file has neither runs nor a
// sweep.
//
// Changes lists what the run sets on the base scenario, as "path: value",
// in the order applied: the run's set, then the sweep's.
type RunSpec struct {
	Name     string
	Scenario Scenario
	Changes  []string
}

// Load reads and parses the scenario file at path (see [Parse]); path "-"
// reads standard input, named "stdin" in errors. A file larger than
// [MaxFileSize] is refused with [ErrFileTooLarge] once that much is read.
func Load(path string) (File, error) { return load(path, false) }

// LoadRehearsal is [Load] for a rehearsal: see [ParseRehearsal].
func LoadRehearsal(path string) (File, error) { return load(path, true) }

func load(path string, rehearsal bool) (File, error) {
	if path == "-" {
		return read("stdin", os.Stdin, rehearsal)
	}
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	return read(path, f, rehearsal)
}

// Read reads a scenario file from r, at most [MaxFileSize] bytes, and
// parses it (see [Parse]); name is used in errors.
func Read(name string, r io.Reader) (File, error) { return read(name, r, false) }

func read(name string, r io.Reader, rehearsal bool) (File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return File{Path: name}, err
	}
	if len(data) > MaxFileSize {
		return File{Path: name}, fmt.Errorf("%s: %w", name, ErrFileTooLarge)
	}
	return parse(name, data, rehearsal)
}

// Parse decodes a scenario file strictly. name is used in errors, which
// have one line per problem, "NAME:LINE: message": an unknown field, a value
// of the wrong type (durations are Go strings such as "1s"), an unknown
// policy preset, a set path that leads nowhere. Each run is then validated
// (see [Scenario.Validate]); those errors read "NAME: run RUN: message".
// A rehearsal's keys (a real service's target, see [Endpoint]) are
// refused at their line: the model cannot run them.
func Parse(name string, data []byte) (File, error) { return parse(name, data, false) }

// ParseRehearsal is [Parse] for stormguard rehearse: every service is a
// real one (see [Endpoint]), and each run is validated by
// [Scenario.ValidateRehearsal].
func ParseRehearsal(name string, data []byte) (File, error) { return parse(name, data, true) }

func parse(name string, data []byte, rehearsal bool) (File, error) {
	f := File{Path: name}
	root, probs := parseRoot(data)
	if len(probs) > 0 {
		return f, report(name, "", probs)
	}
	if looksLikePolicyFile(root) {
		return f, report(name, "", []problem{{msg: "this is a policy file (service, clients as a mapping of dependency to policy, server), not a scenario: check it with `stormguard check " + name + "`; a scenario has name, clients (a list), services (see docs/simulator.md), and may name a policy file in a client's policy_file"}})
	}
	runsNode := detach(root, "runs")
	sweepNode := detach(root, "sweep")
	if probs := decodeNode(root, &f.Base, false); len(probs) > 0 {
		return f, report(name, "", probs)
	}
	if probs := resolvePolicyFiles(&f.Base, root, name); len(probs) > 0 {
		return f, report(name, "", probs)
	}
	plans, probs := planRuns(runsNode, sweepNode, f.Base.Name, name)
	if len(probs) > 0 {
		return f, report(name, "", probs)
	}
	var errs []error
	seen := map[string]bool{} // a problem of every sweep value is told once
	for _, p := range plans {
		rs, err := build(root, p, name, rehearsal)
		if err == nil {
			f.Runs = append(f.Runs, rs)
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			key := strings.Replace(line, "run "+p.name+": ", "run: ", 1)
			if !seen[key] {
				seen[key] = true
				errs = append(errs, errors.New(line))
			}
		}
	}
	return f, errors.Join(errs...)
}

// build applies a plan's changes to a copy of the base tree, decodes it
// strictly and validates the scenario.
func build(root *yaml.Node, p plan, file string, rehearsal bool) (RunSpec, error) {
	run := p.name
	if p.implicit {
		run = ""
	}
	tree := copyTree(root)
	var probs []problem
	for _, c := range p.changes {
		if pr := setPath(tree, c.path, c.value, c.line); pr != nil {
			probs = append(probs, *pr)
		}
	}
	if len(probs) > 0 {
		return RunSpec{}, report(file, run, probs)
	}
	var s Scenario
	if probs := decodeNode(tree, &s, true); len(probs) > 0 {
		return RunSpec{}, report(file, run, probs)
	}
	if probs := resolvePolicyFiles(&s, tree, file); len(probs) > 0 {
		return RunSpec{}, report(file, run, probs)
	}
	if err := s.validate(rehearsal); err != nil {
		// A value error names its path; the tree gives its line.
		for _, e := range unjoin(err) {
			p := problem{msg: e.Error()}
			var fe *FieldError
			if errors.As(e, &fe) {
				p.line = lineOf(tree, fe.Path)
			}
			probs = append(probs, p)
		}
		return RunSpec{}, report(file, run, probs)
	}
	return RunSpec{Name: p.name, Scenario: s, Changes: p.describe()}, nil
}

// parseRoot parses data into a node tree with aliases expanded and returns
// its top-level mapping.
func parseRoot(data []byte) (*yaml.Node, []problem) {
	root, err := yamlnode.OneDocument(data)
	var de *yamlnode.DocError
	switch {
	case errors.Is(err, yamlnode.ErrEmpty):
		return nil, []problem{{msg: "the file is empty: a scenario needs at least name, clients and services"}}
	case errors.As(err, &de) && de.Second:
		return nil, []problem{{line: de.Line, msg: de.Msg + "; a scenario file holds one"}}
	case errors.As(err, &de):
		return nil, []problem{{line: de.Line, msg: de.Msg}}
	}
	if root.Kind != yaml.MappingNode {
		return nil, []problem{{line: root.Line, msg: "a scenario file is a mapping (name: …, clients: …, services: …)"}}
	}
	return root, nil
}

// detach removes key from the mapping m and returns its value, or nil.
func detach(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			v := m.Content[i+1]
			m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
			return v
		}
	}
	return nil
}

// report formats problems as one error line each: "file:line: run: path: msg".
func report(file, run string, probs []problem) error {
	slices.SortStableFunc(probs, func(a, b problem) int { return cmp.Compare(a.line, b.line) })
	errs := make([]error, 0, len(probs))
	for _, p := range probs {
		var b strings.Builder
		b.WriteString(file)
		if p.line > 0 {
			fmt.Fprintf(&b, ":%d", p.line)
		}
		b.WriteString(": ")
		if run != "" {
			fmt.Fprintf(&b, "run %s: ", run)
		}
		if p.path != "" {
			b.WriteString(p.path + ": ")
		}
		// A message quotes values, which may span lines: keep it on one.
		b.WriteString(strings.ReplaceAll(p.msg, "\n", `\n`))
		errs = append(errs, errors.New(b.String()))
	}
	return errors.Join(errs...)
}

// stem is the file name without directory and extension.
func stem(path string) string {
	b := filepath.Base(path)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// MaxFileSize bounds a scenario file: [Load] and [Read] read at most this
// many bytes. A file within the simulator's other bounds (at most 100 000
// YAML nodes once aliases are expanded) is far smaller.
const MaxFileSize = 1 << 20

// ErrFileTooLarge is the error, wrapped with the file's name, of a scenario
// file larger than [MaxFileSize].
var ErrFileTooLarge = errors.New("the file is larger than 1 MiB, the most a scenario file may hold")
