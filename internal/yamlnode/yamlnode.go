// Package yamlnode holds the YAML node-tree helpers that the strict
// loaders of scenario files (package sim) and policy files (package
// policyfile) share: expanding aliases under a bound, and the key a
// struct field has in YAML.
package yamlnode

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxNodes bounds the nodes of a file once its aliases are expanded, so
// that an alias bomb fails instead of eating the memory.
const MaxNodes = 100_000

// Expand returns a deep copy of n with every alias replaced by a copy of
// its anchor's node, comments and anchors dropped and collections in block
// style (one entry per line, which keeps line numbers one-to-one when the
// copy is encoded). budget counts down the nodes made; past zero Expand
// fails.
func Expand(n *yaml.Node, budget *int) (*yaml.Node, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("the file expands to more than %d nodes (aliases?)", MaxNodes)
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, fmt.Errorf("alias *%s has no anchor", n.Value)
		}
		return Expand(n.Alias, budget)
	}
	c := &yaml.Node{Kind: n.Kind, Style: n.Style &^ yaml.FlowStyle, Tag: n.Tag, Value: n.Value, Line: n.Line, Column: n.Column}
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			var err error
			if c.Content[i], err = Expand(k, budget); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// FieldName is the key yaml.v3 uses for a struct field, or "" for a field
// it leaves out (yaml:"-", unexported).
func FieldName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch tag {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return tag
}
