package scenario

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// plan is one run to build from a file: the changes to make to the base
// tree. implicit marks the single run of a file without runs or sweep.
type plan struct {
	name     string
	implicit bool
	changes  []change
}

// change is one set entry: put value at path. line is the set key's.
type change struct {
	path  string
	value *yaml.Node
	line  int
}

// describe lists the changes as "path: value".
func (p plan) describe() []string {
	if len(p.changes) == 0 {
		return nil
	}
	out := make([]string, len(p.changes))
	for i, c := range p.changes {
		out[i] = c.path + ": " + valueText(c.value)
	}
	return out
}

// MaxRuns bounds the runs a file asks for (its runs × its sweep values):
// each is decoded and validated when the file is read, and then simulated.
const MaxRuns = 1000

// planRuns reads the runs and sweep sections (either may be nil) and
// returns the runs in file order: each run once per sweep value.
func planRuns(runs, sweep *yaml.Node, scenario, file string) ([]plan, []problem) {
	if scenario == "" {
		scenario = stem(file)
	}
	var probs []problem
	bad := func(n *yaml.Node, format string, a ...any) {
		probs = append(probs, problem{line: n.Line, msg: fmt.Sprintf(format, a...)})
	}
	var plans []plan
	if runs != nil && !isNull(runs) {
		if runs.Kind != yaml.SequenceNode {
			bad(runs, "runs is a list of {name: NAME, set: {PATH: VALUE, …}}")
			return nil, probs
		}
		seen := map[string]int{}
		for _, r := range runs.Content {
			p, ok := readRun(r, bad)
			if !ok {
				continue
			}
			if l, dup := seen[p.name]; dup {
				bad(r, "run name %q is used twice (first at line %d)", p.name, l)
				continue
			}
			seen[p.name] = r.Line
			plans = append(plans, p)
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	if len(plans) > MaxRuns {
		bad(runs, "the file lists %d runs; the most is %d", len(plans), MaxRuns)
		return nil, probs
	}
	if len(plans) == 0 {
		plans = []plan{{name: scenario, implicit: sweep == nil || isNull(sweep)}}
	}
	if sweep == nil || isNull(sweep) {
		return plans, nil
	}
	paths, values, ok := readSweep(sweep, bad)
	if !ok {
		return nil, probs
	}
	if n := len(plans) * len(values); n > MaxRuns {
		bad(sweep, "the file asks for %d runs (%d × %d sweep values); the most is %d", n, len(plans), len(values), MaxRuns)
		return nil, probs
	}
	leaf := paths[0].Value[strings.LastIndexByte(paths[0].Value, '.')+1:]
	var out []plan
	seen := map[string]bool{}
	for _, p := range plans {
		for _, v := range values {
			changes := append([]change(nil), p.changes...)
			for _, path := range paths {
				changes = append(changes, change{path.Value, v, v.Line})
			}
			name := p.name + "/" + leaf + "=" + valueText(v)
			if seen[name] {
				bad(v, "sweep value %s is listed twice", valueText(v))
				return nil, probs
			}
			seen[name] = true
			out = append(out, plan{name: name, changes: changes})
		}
	}
	return out, nil
}

// readRun reads one entry of runs: {name: NAME, set: {PATH: VALUE, …}}.
func readRun(r *yaml.Node, bad func(*yaml.Node, string, ...any)) (plan, bool) {
	if r.Kind != yaml.MappingNode {
		bad(r, "a run is a mapping {name: NAME, set: {PATH: VALUE, …}}")
		return plan{}, false
	}
	var p plan
	ok := true
	for i := 0; i+1 < len(r.Content); i += 2 {
		k, v := r.Content[i], r.Content[i+1]
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode || v.Value == "" || isNull(v) {
				bad(v, "a run's name is a non-empty string")
				ok = false
			}
			p.name = v.Value
		case "set":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				bad(v, "set is a mapping {PATH: VALUE, …}")
				ok = false
				continue
			}
			seen := map[string]int{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				pk := v.Content[j]
				if pk.Kind != yaml.ScalarNode || pk.Value == "" {
					bad(pk, "a set key is a dotted path such as clients.app.policy")
					ok = false
					continue
				}
				if l, dup := seen[pk.Value]; dup {
					bad(pk, "set %s is already set at line %d", pk.Value, l)
					ok = false
					continue
				}
				seen[pk.Value] = pk.Line
				p.changes = append(p.changes, change{pk.Value, v.Content[j+1], pk.Line})
			}
		default:
			bad(k, "field %s not found in a run (want name, set)", k.Value)
			ok = false
		}
	}
	if p.name == "" && ok {
		bad(r, "a run needs a name")
		ok = false
	}
	return p, ok
}

// readSweep reads sweep: {set: PATH, values: [V, …]}. set may also be a
// list of paths that all take each value (the same rate on every tier).
func readSweep(s *yaml.Node, bad func(*yaml.Node, string, ...any)) ([]*yaml.Node, []*yaml.Node, bool) {
	if s.Kind != yaml.MappingNode {
		bad(s, "sweep is a mapping {set: PATH, values: [VALUE, …]}")
		return nil, nil, false
	}
	var paths []*yaml.Node
	var values []*yaml.Node
	ok := true
	for i := 0; i+1 < len(s.Content); i += 2 {
		k, v := s.Content[i], s.Content[i+1]
		switch k.Value {
		case "set":
			list := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode && len(v.Content) > 0 {
				list = v.Content
			}
			for _, p := range list {
				if p.Kind != yaml.ScalarNode || p.Value == "" || isNull(p) {
					bad(p, "sweep.set is a dotted path such as clients.app.arrivals.rate, or a list of them")
					ok = false
					continue
				}
				paths = append(paths, p)
			}
		case "values":
			if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
				bad(v, "sweep.values is a non-empty list")
				ok = false
				continue
			}
			values = v.Content
		default:
			bad(k, "field %s not found in sweep (want set, values)", k.Value)
			ok = false
		}
	}
	if ok && (len(paths) == 0 || values == nil) {
		bad(s, "sweep needs set and values")
		ok = false
	}
	return paths, values, ok
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// valueText writes a value on one line: a scalar as it is, a collection in
// flow style.
func valueText(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode {
		return v.Value
	}
	c := copyTree(v)
	var flow func(*yaml.Node)
	flow = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			n.Style |= yaml.FlowStyle
		}
		for _, k := range n.Content {
			flow(k)
		}
	}
	flow(c)
	b, err := yaml.Marshal(c)
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b)), " ")
}
