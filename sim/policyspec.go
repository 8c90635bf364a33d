package sim

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
	"github.com/stormguard/stormguard/retry"
)

// UnmarshalYAML reads a policy as a preset name,
//
//	policy: naive
//
// or as a mapping whose fields override the preset's (a mapping without
// preset starts from the zero Policy, the retry package's defaults):
//
//	policy: {preset: aws-2026, max_attempts: 2}
//
// The fields are decoded strictly: an unknown field is an error at its line.
// Nested mappings override field by field (backoff: {base: 10ms} keeps the
// preset's backoff kind and cap).
func (p *PolicySpec) UnmarshalYAML(n *yaml.Node) error {
	budget := maxNodes
	n, err := yamlnode.Expand(n, &budget)
	if err != nil {
		return err
	}
	switch n.Kind {
	case yaml.ScalarNode:
		pol, err := preset(n)
		if err != nil {
			return err
		}
		*p = PolicySpec{Preset: n.Value, Policy: pol}
		return nil
	case yaml.MappingNode:
		rest := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag, Line: n.Line, Column: n.Column}
		var spec PolicySpec
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "preset" {
				pol, err := preset(v)
				if err != nil {
					return err
				}
				spec = PolicySpec{Preset: v.Value, Policy: pol}
				continue
			}
			rest.Content = append(rest.Content, k, v)
		}
		if probs := decodeStrict(rest, &spec.Policy); len(probs) > 0 {
			return typeError(probs)
		}
		*p = spec
		return nil
	}
	return typeError([]problem{{line: n.Line, msg: "a policy is a preset name or a mapping {preset: NAME, field: value, …}"}})
}

// preset returns the policy of the preset named by the scalar n.
func preset(n *yaml.Node) (retry.Policy, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return retry.Policy{}, typeError([]problem{{line: n.Line,
			msg: fmt.Sprintf("a policy preset is a name, one of %s", strings.Join(retry.Presets(), ", "))}})
	}
	pol, err := retry.Preset(n.Value)
	if err != nil {
		return retry.Policy{}, typeError([]problem{{line: n.Line,
			msg: fmt.Sprintf("unknown policy preset %q (want one of %s)", n.Value, strings.Join(retry.Presets(), ", "))}})
	}
	return pol, nil
}

// typeError returns problems the way yaml.v3 collects them, so the decoder
// that called UnmarshalYAML goes on and reports them with its own.
func typeError(probs []problem) error {
	e := &yaml.TypeError{Errors: make([]string, len(probs))}
	for i, p := range probs {
		e.Errors[i] = fmt.Sprintf("line %d: %s", p.line, p.msg)
	}
	return e
}

// MarshalYAML writes the shortest form that reads back to p: the preset
// name when p is the preset unchanged, else {preset: NAME} with the fields
// that differ from the preset, or the whole policy when there is no preset.
func (p PolicySpec) MarshalYAML() (any, error) {
	if p.Preset == "" {
		return p.Policy, nil
	}
	base, err := retry.Preset(p.Preset)
	if err != nil {
		return nil, err
	}
	if base == p.Policy {
		return p.Preset, nil
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, strNode("preset", 0), strNode(p.Preset, 0))
	diff, err := diffFields(reflect.ValueOf(base), reflect.ValueOf(p.Policy))
	if err != nil {
		return nil, err
	}
	m.Content = append(m.Content, diff...)
	return m, nil
}

// diffFields returns the key and value nodes of the fields of struct v that
// differ from base. Nested structs (and pointers to structs set on both
// sides) recurse, since decoding onto the preset merges them.
func diffFields(base, v reflect.Value) ([]*yaml.Node, error) {
	var out []*yaml.Node
	t := v.Type()
	for i := range t.NumField() {
		name := yamlnode.FieldName(t.Field(i))
		bf, vf := base.Field(i), v.Field(i)
		if name == "" || reflect.DeepEqual(bf.Interface(), vf.Interface()) {
			continue
		}
		val := &yaml.Node{}
		switch {
		case vf.Kind() == reflect.Struct:
			sub, err := diffFields(bf, vf)
			if err != nil {
				return nil, err
			}
			val = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: sub}
		case vf.Kind() == reflect.Pointer && vf.Elem().Kind() == reflect.Struct && !bf.IsNil() && !vf.IsNil():
			sub, err := diffFields(bf.Elem(), vf.Elem())
			if err != nil {
				return nil, err
			}
			val = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: sub}
		default:
			if err := val.Encode(vf.Interface()); err != nil {
				return nil, err
			}
		}
		out = append(out, strNode(name, 0), val)
	}
	return out, nil
}
