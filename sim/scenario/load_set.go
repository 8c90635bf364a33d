package scenario

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
	"github.com/stormguard/stormguard/retry"
)

// setPath puts a copy of v at the dotted path in the scenario tree root, a
// mapping decoded later as a Scenario. line is the line of the set key, for
// the keys it adds.
//
// Each element of the path names a field by its YAML name or, in a list, an
// element: the one whose name (or, for calls, service) is the element, or
// else the one at that index from 0 (triggers.0). Missing fields are added;
// the value replaces what was there (a mapping replaces a mapping whole). A
// policy written as a preset name is read as {preset: NAME} when the path
// goes into it, so clients.app.policy.max_attempts works either way.
//
// The path is checked against the Scenario type first: an error names the
// path and the field that does not exist.
func setPath(root *yaml.Node, path string, v *yaml.Node, line int) *problem {
	bad := func(format string, a ...any) *problem {
		return &problem{line: line, msg: fmt.Sprintf("set %s: ", path) + fmt.Sprintf(format, a...)}
	}
	parts := strings.Split(path, ".")
	cur, t := root, reflect.TypeFor[Scenario]()
	for i, part := range parts {
		last := i == len(parts)-1
		if part == "" {
			return bad("the path has an empty element")
		}
		var err error
		if t, err = step(t, part); err != nil {
			return bad("%v", err)
		}
		switch cur.Kind {
		case yaml.MappingNode:
			slot := mapSlot(cur, part, line, last)
			if last {
				*slot = copyTree(v)
				return nil
			}
			if next := *slot; next.Kind == yaml.ScalarNode || next.Kind == yaml.MappingNode && len(next.Content) == 0 {
				switch {
				case isList(t):
					return bad("%s has no element %q (the list is empty)", strings.Join(parts[:i+1], "."), parts[i+1])
				case next.ShortTag() == "!!null":
					*slot = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
				case t == reflect.TypeFor[PolicySpec]() && next.ShortTag() == "!!str":
					*slot = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: next.Line,
						Content: []*yaml.Node{strNode("preset", next.Line), next}}
				}
			}
			cur = *slot
		case yaml.SequenceNode:
			j, ok := element(cur, part)
			if !ok {
				have := make([]string, len(cur.Content))
				for k, c := range cur.Content {
					have[k] = elementName(c, k)
				}
				list := "have " + strings.Join(have, ", ")
				if len(have) == 0 {
					list = "the list is empty"
				}
				return bad("%s has no element %q (%s)", strings.Join(parts[:i], "."), part, list)
			}
			if last {
				cur.Content[j] = copyTree(v)
				return nil
			}
			cur = cur.Content[j]
		default:
			return bad("%s is a single value, not a mapping or a list", strings.Join(parts[:i], "."))
		}
	}
	return nil
}

// mapSlot returns the value slot of key in the mapping m, adding the key
// (with an empty mapping, or a null when last) when it is missing.
func mapSlot(m *yaml.Node, key string, line int, last bool) **yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			if last {
				// Errors about the new value point at the set, on the
				// key's line too (both end on one line when encoded).
				m.Content[i].Line = line
			}
			return &m.Content[i+1]
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
	if last {
		v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}
	}
	m.Content = append(m.Content, strNode(key, line), v)
	return &m.Content[len(m.Content)-1]
}

func strNode(s string, line int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Line: line}
}

func isList(t reflect.Type) bool {
	return t.Kind() == reflect.Slice || t.Kind() == reflect.Array
}

// element finds a list element by name, by service, then by index.
func element(seq *yaml.Node, part string) (int, bool) {
	for _, key := range []string{"name", "service"} {
		for j, c := range seq.Content {
			if scalarField(c, key) == part {
				return j, true
			}
		}
	}
	if j, err := strconv.Atoi(part); err == nil && j >= 0 && j < len(seq.Content) {
		return j, true
	}
	return 0, false
}

// elementName is how a path names the i-th element c of a list.
func elementName(c *yaml.Node, i int) string {
	for _, key := range []string{"name", "service"} {
		if s := scalarField(c, key); s != "" {
			return s
		}
	}
	return strconv.Itoa(i)
}

// scalarField returns the value of key in the mapping m if it is a scalar.
func scalarField(m *yaml.Node, key string) string {
	if m.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}

// step returns the type that part selects in a value of type t: a field of
// a struct by YAML name, an element of a list, a value of a map.
func step(t reflect.Type, part string) (reflect.Type, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[PolicySpec]() {
		if part == "preset" {
			return reflect.TypeFor[string](), nil
		}
		t = reflect.TypeFor[retry.Policy]()
	}
	switch t.Kind() {
	case reflect.Struct:
		var have []string
		for i := range t.NumField() {
			f := t.Field(i)
			if isInline(f) {
				// An inlined struct's fields are the parent's.
				if ft, err := step(f.Type, part); err == nil {
					return ft, nil
				}
				for j := range f.Type.NumField() {
					if n := yamlnode.FieldName(f.Type.Field(j)); n != "" {
						have = append(have, n)
					}
				}
				continue
			}
			name := yamlnode.FieldName(f)
			if name == "" {
				continue
			}
			if name == part {
				return f.Type, nil
			}
			have = append(have, name)
		}
		if t == reflect.TypeFor[retry.Policy]() {
			have = append([]string{"preset"}, have...)
		}
		return nil, fmt.Errorf("%s has no field %q (have %s)", t, part, strings.Join(have, ", "))
	case reflect.Slice, reflect.Array, reflect.Map:
		return t.Elem(), nil
	}
	return nil, fmt.Errorf("%q is inside a %s, which has no fields", part, t)
}

// isInline reports whether yaml.v3 inlines the struct field f.
func isInline(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return f.Type.Kind() == reflect.Struct && strings.Contains(","+opts+",", ",inline,")
}
