package sim

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/internal/yamlnode"
)

// BreakerSpec is a circuit breaker in a scenario: a preset of the breaker
// package, with fields overridden, as a client's or a call's policy is. In
// YAML either a preset name (`breaker: stormguard`) or a mapping
// (`breaker: {preset: rate, failure_rate: 0.1}`; without a preset the
// breaker package's defaults). Each client process (each retrier) has its
// own breaker, whose jitter draws from its own stream.
type BreakerSpec struct {
	Preset string
	breaker.Spec
}

// UnmarshalYAML reads a breaker as a preset name or a mapping that
// overrides a preset's fields, strictly.
func (b *BreakerSpec) UnmarshalYAML(n *yaml.Node) error {
	budget := maxNodes
	n, err := yamlnode.Expand(n, &budget)
	if err != nil {
		return err
	}
	switch n.Kind {
	case yaml.ScalarNode:
		s, err := breakerPreset(n)
		if err != nil {
			return err
		}
		*b = BreakerSpec{Preset: n.Value, Spec: s}
		return nil
	case yaml.MappingNode:
		rest := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag, Line: n.Line, Column: n.Column}
		var spec BreakerSpec
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "preset" {
				s, err := breakerPreset(v)
				if err != nil {
					return err
				}
				spec = BreakerSpec{Preset: v.Value, Spec: s}
				continue
			}
			rest.Content = append(rest.Content, k, v)
		}
		if probs := decodeStrict(rest, &spec.Spec); len(probs) > 0 {
			return typeError(probs)
		}
		*b = spec
		return nil
	}
	return typeError([]problem{{line: n.Line, msg: "a breaker is a preset name or a mapping {preset: NAME, field: value, …}"}})
}

func breakerPreset(n *yaml.Node) (breaker.Spec, error) {
	msg := fmt.Sprintf("a breaker preset is a name, one of %s", strings.Join(breaker.Presets(), ", "))
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return breaker.Spec{}, typeError([]problem{{line: n.Line, msg: msg}})
	}
	s, err := breaker.Preset(n.Value)
	if err != nil {
		return breaker.Spec{}, typeError([]problem{{line: n.Line, msg: fmt.Sprintf("unknown breaker preset %q (%s)", n.Value, msg)}})
	}
	return s, nil
}

// MarshalYAML writes the preset name, or the whole spec.
func (b BreakerSpec) MarshalYAML() (any, error) {
	if base, err := breaker.Preset(b.Preset); err == nil && fmt.Sprint(base) == fmt.Sprint(b.Spec) {
		return b.Preset, nil
	}
	return b.Spec, nil
}
