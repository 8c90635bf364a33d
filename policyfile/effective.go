package policyfile

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/yamlnode"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
)

// EffectivePolicy returns c's retry policy as the retrier applies it:
// retry's defaults filled in, the backoff's too, and the throttling
// backoff, when the file gives none, equal to the backoff (the retrier
// uses it for throttling errors).
func (c *Client) EffectivePolicy() retry.Policy {
	p := c.Policy.WithDefaults()
	p.Backoff = p.Backoff.WithDefaults()
	tb := p.Backoff
	if p.ThrottleBackoff != nil {
		tb = p.ThrottleBackoff.WithDefaults()
	}
	p.ThrottleBackoff = &tb
	p.Budget = p.Budget.WithDefaults()
	return p
}

// EffectiveBreaker returns c's breaker with its defaults filled in, or nil.
func (c *Client) EffectiveBreaker() *breaker.Spec {
	if c.Breaker == nil {
		return nil
	}
	s := c.Breaker.WithDefaults()
	return &s
}

// EffectiveServer returns the server block as the servers apply it, every
// default filled in (the limit algorithm's too), or nil without a server
// block.
func (f *File) EffectiveServer() *admit.Config {
	if f.Server == nil {
		return nil
	}
	c := f.Server.WithDefaults()
	c.Queue = c.Queue.WithDefaults()
	c.Limit = effectiveLimit(c.Limit)
	if c.Supersede != nil {
		s := c.Supersede.WithDefaults()
		c.Supersede = &s
	}
	return &c
}

// effectiveLimit fills a limit spec's defaults by building the algorithm
// and reading back its configuration, so that they are limit's own.
func effectiveLimit(s limit.Spec) limit.Spec {
	if s.Kind == "" {
		s.Kind = limit.KindVegas
	}
	alg, err := s.New()
	if err != nil {
		return s // not reached: the file was validated
	}
	switch a := alg.(type) {
	case *limit.Vegas:
		s.Vegas = a.Config()
	case *limit.AIMD:
		s.AIMD = a.Config()
	case *limit.Gradient2:
		s.Gradient2 = a.Config()
	}
	return s
}

// EffectiveYAML returns the effective policy of every client and of the
// server as a policy file, each default filled in and marked by a comment
// ("# default", "# preset stormguard", "# = backoff"). Read back, it gives
// the same effective policy. Only the fields the chosen kinds read are
// written (a token bucket's capacity, not a window's ratio).
func (f *File) EffectiveYAML() ([]byte, error) {
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{f.effective(true)}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EffectiveJSON is [File.EffectiveYAML] as indented JSON, without the
// comments; it too reads back as a policy file.
func (f *File) EffectiveJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, f.effective(false)); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// effective builds the node tree of the effective policy, with comments
// when notes is set.
func (f *File) effective(notes bool) *yaml.Node {
	root := mapping()
	if f.Service != "" {
		add(root, "service", str(f.Service))
	}
	if f.Description != "" {
		add(root, "description", str(f.Description))
	}
	if len(f.Clients) > 0 {
		cs := mapping()
		for i := range f.Clients {
			c := &f.Clients[i]
			path := "clients." + c.Dependency
			e := emitter{notes: notes, written: f.written}
			if c.Preset != "" {
				base, _ := retry.Preset(c.Preset)
				e.preset, e.presetName = reflect.ValueOf(base), "preset "+c.Preset
			}
			n := e.value(reflect.ValueOf(c.EffectivePolicy()), path)
			if notes && c.Policy.ThrottleBackoff == nil {
				// The throttle backoff is the backoff, whatever its source.
				for j := 0; j+1 < len(n.Content); j += 2 {
					if n.Content[j].Value == "throttle_backoff" {
						n.Content[j].LineComment = "= backoff"
						clearComments(n.Content[j+1])
					}
				}
			}
			if b := c.EffectiveBreaker(); b != nil {
				be := emitter{notes: notes, written: f.written}
				if c.BreakerPreset != "" {
					base, _ := breaker.Preset(c.BreakerPreset)
					be.preset, be.presetName = reflect.ValueOf(base), "preset "+c.BreakerPreset
				}
				add(n, "breaker", be.value(reflect.ValueOf(*b), path+".breaker"))
			}
			add(cs, c.Dependency, n)
		}
		add(root, "clients", cs)
	}
	if s := f.EffectiveServer(); s != nil {
		e := emitter{notes: notes, written: f.written}
		n := e.value(reflect.ValueOf(*s), "server")
		if notes {
			// min_remaining and queue.min_remaining are one value: the
			// one not given is the other.
			top, queued := find(n, "min_remaining"), find(find(n, "queue"), "min_remaining")
			switch {
			case f.written["server.min_remaining"] && !f.written["server.queue.min_remaining"]:
				queued.LineComment = "= min_remaining"
			case f.written["server.queue.min_remaining"] && !f.written["server.min_remaining"]:
				top.LineComment = "= queue.min_remaining"
			}
		}
		add(root, "server", n)
	}
	return root
}

// find returns the value of key in the mapping m, or an empty node.
func find(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return &yaml.Node{}
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func add(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, str(key), v)
}

func clearComments(n *yaml.Node) {
	n.LineComment = ""
	for _, c := range n.Content {
		clearComments(c)
	}
}

// emitter writes a configuration struct as a node tree, noting for each
// value whether the file gave it, a preset did, or it is a default.
type emitter struct {
	notes      bool
	written    map[string]bool
	preset     reflect.Value // the preset's struct, or invalid
	presetName string
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// value returns the node of v, at path in the file.
func (e *emitter) value(v reflect.Value, path string) *yaml.Node {
	return e.at(v, path, e.preset)
}

// at returns the node of v; pre is the preset's value at the same place,
// or invalid.
func (e *emitter) at(v reflect.Value, path string, pre reflect.Value) *yaml.Node {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if pre.IsValid() {
			if pre.IsNil() {
				pre = reflect.Value{}
			} else {
				pre = pre.Elem()
			}
		}
		return e.at(v.Elem(), path, pre)
	}
	if t.Kind() == reflect.Struct && t != durationType && !t.Implements(textMarshaler) {
		m := mapping()
		for i := range t.NumField() {
			name := yamlnode.FieldName(t.Field(i))
			fv := v.Field(i)
			if name == "" || !applies(v, name) || fv.Kind() == reflect.Pointer && fv.IsNil() {
				continue
			}
			var fp reflect.Value
			if pre.IsValid() {
				fp = pre.Field(i)
			}
			add(m, name, e.at(fv, join(path, name), fp))
		}
		return m
	}
	n := scalarOf(v)
	if e.notes && !e.written[path] {
		switch {
		case pre.IsValid() && !pre.IsZero():
			n.LineComment = e.presetName
		default:
			n.LineComment = "default"
		}
	}
	return n
}

// scalarOf returns the scalar node of a leaf value.
func scalarOf(v reflect.Value) *yaml.Node {
	if v.Type() == durationType {
		return str(time.Duration(v.Int()).String())
	}
	if v.Type().Implements(textMarshaler) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return str(fmt.Sprint(v.Interface()))
		}
		return str(string(b))
	}
	switch v.Kind() {
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(v.Uint(), 10)}
	case reflect.String:
		return str(v.String())
	case reflect.Float32, reflect.Float64:
		s := strconv.FormatFloat(v.Float(), 'g', -1, 64)
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s}
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
	}
	return str(fmt.Sprint(v.Interface()))
}

// applies reports whether the field name of the struct v is read, given
// the kind or mode v chose: a token bucket has no window, a fixed limit no
// Vegas settings.
func applies(v reflect.Value, name string) bool {
	switch s := v.Interface().(type) {
	case backoff.Policy:
		switch s.Kind {
		case backoff.None:
			return name == "kind"
		case backoff.Constant, backoff.DecorrelatedJitter:
			return name == "kind" || name == "base" || name == "cap"
		case backoff.Proportional:
			return true
		}
		return name != "jitter"
	case budget.Spec:
		fields := map[budget.Kind][]string{
			budget.KindTokenBucket: {"capacity", "retry_cost", "throttle_cost", "timeout_cost", "success_reward", "no_refund"},
			budget.KindTokenRatio:  {"max_tokens", "token_ratio"},
			budget.KindWindow:      {"window", "ratio", "floor"},
			budget.KindConcurrency: {"percent", "min_concurrency"},
		}[s.Kind]
		return name == "kind" || contains(fields, name)
	case breaker.Spec:
		switch name {
		case "failures":
			return s.Mode != breaker.Rate
		case "failure_rate", "min_calls", "window", "buckets":
			return s.Mode == breaker.Rate
		case "probes": // a breaker that stops retries is never half-open
			return s.Stops != breaker.StopsRetries
		case "successes":
			return s.Stops != breaker.StopsRetries || s.Mode != breaker.Rate
		}
	case limit.Spec:
		switch name {
		case "limit":
			return s.Kind == limit.KindFixed
		case "aimd", "vegas", "gradient2":
			return string(s.Kind) == name
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeJSON writes the node tree n as compact JSON, keys in order.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int", "!!float", "!!bool":
			b.WriteString(n.Value)
		default:
			s, _ := json.Marshal(n.Value)
			b.Write(s)
		}
	default:
		return fmt.Errorf("policyfile: cannot write a %v node as JSON", n.Kind)
	}
	return nil
}
