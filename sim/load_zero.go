package sim

import (
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// zeroKeys are the keys where zero means nothing: a missing key takes the
// default in brackets, so an explicit 0 — a typo, or a belief that 0 means
// "none" or "unlimited" — would silently run with the default instead. The
// loader refuses it at its line. ("*" is every element of a list.)
var zeroKeys = []struct {
	path string
	def  string
}{
	{"duration", "60s"},
	{"bin", "1s"},
	{"clients.*.timeout", "1s"},
	{"clients.*.processes", "1"},
	{"services.*.workers", "1"},
	{"services.*.replicas", "1"},
	{"services.*.calls.*.timeout", "1s"},
	{"services.*.autoscale.startup.timeout", "1s"},
}

// explicitZeros reports every key of zeroKeys written as zero in tree.
func explicitZeros(tree *yaml.Node) []problem {
	var probs []problem
	for _, k := range zeroKeys {
		walkZero(tree, strings.Split(k.path, "."), func(key, val *yaml.Node) {
			probs = append(probs, problem{line: val.Line, msg: key.Value + ": " + val.Value +
				" means nothing here and would silently become the default (" + k.def + "); leave the key out for the default, or give a value above 0"})
		})
	}
	return probs
}

// walkZero calls found for every key along path in n whose value is a
// scalar zero.
func walkZero(n *yaml.Node, path []string, found func(key, val *yaml.Node)) {
	if n == nil || len(path) == 0 {
		return
	}
	if path[0] == "*" {
		if n.Kind == yaml.SequenceNode {
			for _, e := range n.Content {
				walkZero(e, path[1:], found)
			}
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != path[0] {
			continue
		}
		v := n.Content[i+1]
		if len(path) > 1 {
			walkZero(v, path[1:], found)
		} else if v.Kind == yaml.ScalarNode && isZero(v.Value) {
			found(n.Content[i], v)
		}
	}
}

// isZero reports whether a scalar reads as zero: a number (0, 0.0, 0e3) or
// a duration ("0s", "0ms").
func isZero(s string) bool {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f == 0
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d == 0
	}
	return false
}
