package scenario

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
	"github.com/stormguard/stormguard/retry"
)

// DecodeNode reads a policy as a preset name,
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
func (p *PolicySpec) DecodeNode(d *yamlnode.Decoder, n *yaml.Node, path string) {
	if name, pol, ok := decodePreset(d, n, path, "a policy", preset); ok {
		*p = PolicySpec{Preset: name, Policy: pol}
	}
}

// UnmarshalYAML reads a policy as DecodeNode does, for yaml.v3's decoder.
func (p *PolicySpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalNode(p, n) }

// unmarshalNode reads n into v with the scenario's decoder, for yaml.v3's
// UnmarshalYAML.
func unmarshalNode(v yamlnode.NodeDecoder, n *yaml.Node) error {
	var probs []problem
	v.DecodeNode(decoder(&probs, false), n, "")
	return typeError(probs)
}

// decodePreset reads a value written as a preset's name or as a mapping
// whose preset key (optional) names the base and whose other keys override
// its fields, strictly; preset reads the name ("" and a message when it
// names none). what names the value in the message for anything else ("a
// policy"). ok is false when d found a problem.
func decodePreset[T any](d *yamlnode.Decoder, n *yaml.Node, path, what string, preset func(*yaml.Node) (T, string)) (string, T, bool) {
	var zero T
	before := d.Count()
	switch n.Kind {
	case yaml.ScalarNode:
		v, msg := preset(n)
		if msg != "" {
			d.Add(n, path, "%s", msg)
			return "", zero, false
		}
		return n.Value, v, true
	case yaml.MappingNode:
		name, v := "", zero
		var rest []yamlnode.Pair
		for _, p := range d.Pairs(n, path) {
			if p.K.Value != "preset" {
				rest = append(rest, p)
				continue
			}
			base, msg := preset(p.V)
			if msg != "" {
				d.Add(p.V, yamlnode.Join(path, "preset"), "%s", msg)
				continue
			}
			name, v = p.V.Value, base
		}
		d.StructFrom(rest, reflect.ValueOf(&v).Elem(), path, "preset")
		return name, v, d.Count() == before
	}
	d.Add(n, path, "%s is a preset name or a mapping {preset: NAME, field: value, …}, not %s", what, yamlnode.KindName(n))
	return "", zero, false
}

// preset returns the policy of the preset named by the scalar n, or why
// it names none.
func preset(n *yaml.Node) (retry.Policy, string) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return retry.Policy{}, fmt.Sprintf("a policy preset is a name, one of %s", strings.Join(retry.Presets(), ", "))
	}
	pol, err := retry.Preset(n.Value)
	if err != nil {
		return retry.Policy{}, fmt.Sprintf("unknown policy preset %q (want one of %s)", n.Value, strings.Join(retry.Presets(), ", "))
	}
	return pol, ""
}

// typeError returns problems as one error the way yaml.v3 collects them
// (nil without problems), for UnmarshalYAML.
func typeError(probs []problem) error {
	if len(probs) == 0 {
		return nil
	}
	e := &yaml.TypeError{Errors: make([]string, len(probs))}
	for i, p := range probs {
		msg := p.msg
		if p.path != "" {
			msg = p.path + ": " + msg
		}
		e.Errors[i] = fmt.Sprintf("line %d: %s", p.line, msg)
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
