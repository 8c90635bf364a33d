package scenario

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
)

// Scenario files are read with the strict decoder that policy files use
// too (yamlnode.Decoder): an unknown key is an error at its line, naming
// the keys valid at that place; a value of the wrong kind is one, with its
// path. A scenario's own rules are its hooks: a null leaves a field as it
// is and an empty string is a value (as they always were in scenario
// files), a duration is a string ("1s") or a bare 0, and in a run an
// explicit zero is refused where it would silently become a default
// (zeroKeys).

// zeroKeys are the fields, by the struct that declares them, where zero
// means nothing: a missing key takes the default given here, so an
// explicit 0 — a typo, or a belief that 0 means "none" or "unlimited" —
// would silently run with the default instead. A run refuses it at its
// line.
var zeroKeys = map[reflect.Type]map[string]string{
	reflect.TypeFor[Scenario](): {"duration": "60s", "bin": "1s"},
	reflect.TypeFor[Client]():   {"timeout": "1s", "processes": "1"},
	reflect.TypeFor[Service]():  {"workers": "1", "replicas": "1"},
	reflect.TypeFor[Call]():     {"timeout": "1s"},
	reflect.TypeFor[Startup]():  {"timeout": "1s"},
}

// decoder returns the scenario's strict decoder, adding its problems to
// probs; zeros refuses the explicit zeros of zeroKeys.
func decoder(probs *[]problem, zeros bool) *yamlnode.Decoder {
	d := &yamlnode.Decoder{
		ZeroDuration: true,
		Report: func(p yamlnode.Problem) {
			*probs = append(*probs, problem{line: p.Line, path: p.Path, msg: p.Msg})
		},
	}
	if zeros {
		d.Zero = func(t reflect.Type, field, value string) string {
			def, ok := zeroKeys[t][field]
			if !ok {
				return ""
			}
			return fmt.Sprintf("%s means nothing here and would silently become the default (%s); leave the key out for the default, or give a value above 0", value, def)
		}
	}
	return d
}

// decodeNode decodes the tree n (aliases expanded) into out, a pointer,
// and returns the problems; zeros as in decoder.
func decodeNode(n *yaml.Node, out any, zeros bool) []problem {
	var probs []problem
	decoder(&probs, zeros).Into(n, reflect.ValueOf(out).Elem(), "", "")
	return probs
}

// policyFileKeys are the top-level keys of a policy file that a scenario
// does not have.
var policyFileKeys = []string{"service", "server"}

// looksLikePolicyFile reports whether the top-level mapping root is a
// policy file's rather than a scenario's: a key only a policy file has,
// or clients as a mapping of dependency to policy instead of a list.
func looksLikePolicyFile(root *yaml.Node) bool {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		for _, p := range policyFileKeys {
			if k.Value == p {
				return true
			}
		}
		if k.Value == "clients" && v.Kind == yaml.MappingNode {
			return true
		}
	}
	return false
}
