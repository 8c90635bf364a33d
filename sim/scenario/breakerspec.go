package scenario

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
// breaker package's defaults). `stops: retries` makes it Brooker's breaker
// that stops retries only, first tries going through ([breaker.StopsRetries];
// the default, calls, stops every attempt). Each client process (each
// retrier) has its own breaker, whose jitter draws from its own stream; the
// retrier asks it as production's does, so the simulator runs no breaker
// logic of its own.
type BreakerSpec struct {
	Preset string
	breaker.Spec
}

// DecodeNode reads a breaker as a preset name or a mapping that
// overrides a preset's fields, strictly.
func (b *BreakerSpec) DecodeNode(d *yamlnode.Decoder, n *yaml.Node, path string) {
	if name, spec, ok := decodePreset(d, n, path, "a breaker", breakerPreset); ok {
		*b = BreakerSpec{Preset: name, Spec: spec}
	}
}

// UnmarshalYAML reads a breaker as DecodeNode does, for yaml.v3's decoder.
func (b *BreakerSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalNode(b, n) }

func breakerPreset(n *yaml.Node) (breaker.Spec, string) {
	msg := fmt.Sprintf("a breaker preset is a name, one of %s", strings.Join(breaker.Presets(), ", "))
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return breaker.Spec{}, msg
	}
	s, err := breaker.Preset(n.Value)
	if err != nil {
		return breaker.Spec{}, fmt.Sprintf("unknown breaker preset %q (%s)", n.Value, msg)
	}
	return s, ""
}

// MarshalYAML writes the preset name, or the whole spec.
func (b BreakerSpec) MarshalYAML() (any, error) {
	if base, err := breaker.Preset(b.Preset); err == nil && fmt.Sprint(base) == fmt.Sprint(b.Spec) {
		return b.Preset, nil
	}
	return b.Spec, nil
}
