package policyfile

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/yamlnode"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
)

// The decoder reads a node tree into the configuration structs field by
// field, by their YAML names. It does not go through yaml's own decoding of
// structs: walking the tree itself, it knows the line of every key and
// value, reports every problem rather than the first, and tells an explicit
// value from an absent one (an explicit zero that would silently become a
// default is an error).

// problem is one thing wrong with a file: its line (0 when unknown), the
// dotted path of the value and what is wrong.
type problem struct {
	line int
	path string
	msg  string
}

// maxNodes bounds the nodes of a file once its aliases are expanded.
const maxNodes = yamlnode.MaxNodes

// zeroAllowed lists, by struct type, the fields whose explicit zero is a
// value: their default is zero, so writing 0 says what it means. Any other
// numeric field written as 0 would silently take its default instead, and
// is an error. Pointer fields (retry_probability, a breaker's jitter) hold
// an explicit zero as such and are always allowed.
var zeroAllowed = map[reflect.Type]map[string]bool{
	reflect.TypeFor[retry.Policy]():      {"attempt_timeout": true, "min_attempt_time": true},
	reflect.TypeFor[retry.HedgePolicy](): {"delay": true},
	reflect.TypeFor[budget.Spec]():       {"ratio": true, "floor": true},
	reflect.TypeFor[admit.Config]():      {"min_remaining": true},
	reflect.TypeFor[shed.Config]():       {"min_remaining": true},
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decoder collects the problems of one file and the paths it holds.
type decoder struct {
	probs   []problem
	written map[string]bool // every key path the file gives a value
}

func (d *decoder) add(n *yaml.Node, path, format string, a ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.probs = append(d.probs, problem{line: line, path: path, msg: fmt.Sprintf(format, a...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// pair is a key and its value in a mapping.
type pair struct{ k, v *yaml.Node }

// pairs returns the entries of mapping n: the entries merged in with <<
// first (those the mapping does not give itself; of two merged sources the
// first wins), then its own. A key given twice is a problem.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var merged, own []pair
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if srcs, ok := mergeSources(k, v); ok {
			for _, s := range srcs {
				if s.Kind != yaml.MappingNode {
					d.add(s, path, "a merge (<<) takes a mapping or a list of mappings")
					continue
				}
				merged = append(merged, d.pairs(s, path)...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.add(k, path, "a key is a name, not a mapping or a list")
			continue
		}
		if seen[k.Value] {
			d.add(k, join(path, k.Value), "is given twice")
			continue
		}
		seen[k.Value] = true
		own = append(own, pair{k, v})
	}
	var out []pair
	from := map[string]bool{}
	for _, p := range merged {
		if !seen[p.k.Value] && !from[p.k.Value] {
			from[p.k.Value] = true
			out = append(out, p)
		}
	}
	return append(out, own...)
}

// mergeSources reports whether the entry k: v of a mapping is a merge
// (<<), and returns what it merges in: v, or each element of v when it is
// a list.
func mergeSources(k, v *yaml.Node) ([]*yaml.Node, bool) {
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
		return nil, false
	}
	if v.Kind == yaml.SequenceNode {
		return v.Content, true
	}
	return []*yaml.Node{v}, true
}

// fieldNames returns the configuration names of struct type t, in order.
func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if n := yamlnode.FieldName(t.Field(i)); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// fieldIndex returns the index of the field of t named name, or -1.
func fieldIndex(t reflect.Type, name string) int {
	for i := range t.NumField() {
		if yamlnode.FieldName(t.Field(i)) == name {
			return i
		}
	}
	return -1
}

// structFrom sets the fields of the struct v from the entries ps, and
// leaves the others as they are (a preset's, or zero). extra lists keys
// the caller handles, for the message about an unknown key.
func (d *decoder) structFrom(ps []pair, v reflect.Value, path string, extra ...string) {
	t := v.Type()
	for _, p := range ps {
		key := p.k.Value
		i := fieldIndex(t, key)
		if i < 0 {
			want := append(append([]string(nil), extra...), fieldNames(t)...)
			d.add(p.k, join(path, key), "unknown field (want one of %s)", strings.Join(want, ", "))
			continue
		}
		d.written[join(path, key)] = true
		d.into(p.v, v.Field(i), join(path, key), zeroAllowed[t][key])
	}
}

// into decodes n into the settable v. zeroOK says an explicit zero is a
// value here (see zeroAllowed).
func (d *decoder) into(n *yaml.Node, v reflect.Value, path string, zeroOK bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		d.add(n, path, "has no value: leave the field out for its default, or give a value")
		return
	}
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		// Decode onto a copy of what is there (a preset's), never through
		// the pointer. Behind a pointer an explicit zero is a value.
		nv := reflect.New(t.Elem())
		if !v.IsNil() {
			nv.Elem().Set(v.Elem())
		}
		before := len(d.probs)
		d.into(n, nv.Elem(), path, true)
		if len(d.probs) == before {
			v.Set(nv)
		}
	case reflect.PointerTo(t).Implements(textType):
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if s == "" {
			d.add(n, path, "is empty: leave the field out for its default, or give a value")
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			d.add(n, path, "%s", tidy(err.Error()))
		}
	case t == durationType:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if n.ShortTag() != "!!str" {
			d.add(n, path, "%s is not a duration: write durations as strings such as \"1s\" or \"50ms\"", s)
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.add(n, path, "%q is not a duration (such as \"1s\", \"50ms\" or \"1m30s\")", s)
			return
		}
		if dur == 0 && !zeroOK {
			d.zero(n, path)
			return
		}
		v.SetInt(int64(dur))
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.add(n, path, "want a mapping (%s), not %s", strings.Join(fieldNames(t), ", "), kindName(n))
			return
		}
		d.structFrom(d.pairs(n, path), v, path)
	case t.Kind() == reflect.Bool:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		var b bool
		if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.add(n, path, "%q is not true or false", s)
			return
		}
		v.SetBool(b)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		var i int64
		if n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			d.add(n, path, "%q is not a whole number", s)
			return
		}
		if v.OverflowInt(i) {
			d.add(n, path, "%s is too large", s)
			return
		}
		if i == 0 && !zeroOK {
			d.zero(n, path)
			return
		}
		v.SetInt(i)
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		var f float64
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" || n.Decode(&f) != nil {
			d.add(n, path, "%q is not a number", s)
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.add(n, path, "%s is not a finite number", s)
			return
		}
		if f == 0 && !zeroOK {
			d.zero(n, path)
			return
		}
		v.SetFloat(f)
	case t.Kind() == reflect.String:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if s == "" {
			d.add(n, path, "is empty: leave the field out for its default, or give a value")
			return
		}
		v.SetString(s)
	default:
		// Not reached with the types this package reads.
		d.add(n, path, "cannot be read into a %s", t)
	}
}

// zero reports an explicit zero that would silently become a default.
func (d *decoder) zero(n *yaml.Node, path string) {
	d.add(n, path, "%s is not a value here: a zero field takes its default (see docs/policy.md); leave it out for the default, or give a value", n.Value)
}

// scalar returns the text of the scalar n, or reports that n is not one.
func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.add(n, path, "want a single value, not %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "this"
}

// tidy drops the package prefixes from a validator's message: the line
// and path already say where, and "budget: invalid spec: " says nothing
// the field's name does not.
func tidy(msg string) string {
	for _, p := range []string{
		"admit: invalid config: ", "budget: invalid spec: ", "breaker: invalid spec: ",
		"limit: invalid config: ", "shed: invalid config: ", "retry: ",
	} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	msg = strings.ReplaceAll(msg, "backoff: backoff: ", "backoff: ")
	msg = strings.ReplaceAll(msg, "budget: budget: ", "budget: ")
	return msg
}

// keyLine is a key path in a block of the file and its line.
type keyLine struct {
	parts []string
	line  int
}

// keyLines lists every key path under the mapping n, depth first.
func keyLines(n *yaml.Node, prefix []string, out *[]keyLine) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if srcs, ok := mergeSources(k, v); ok {
			for _, s := range srcs {
				keyLines(s, prefix, out)
			}
			continue
		}
		parts := append(append([]string(nil), prefix...), k.Value)
		*out = append(*out, keyLine{parts, k.Line})
		keyLines(v, parts, out)
	}
}

// locate finds the line of the field a validator's message is about, in
// the block n (a client's policy, a breaker, the server) at line def. The
// validators name fields by their configuration names ("hedge.max_attempts
// 9 is outside [1, 5]", "queue: codel_target 200ms exceeds codel_interval
// 100ms"), so the field is the key path written in the block whose last
// key appears in the message as a word and whose other keys appear most
// often before it; ties go to the key the message names first, then to
// the shorter path. A message that names no key of the block gets def.
func locate(n *yaml.Node, def int, msg string) int {
	var keys []keyLine
	keyLines(n, nil, &keys)
	words := wordPositions(msg)
	best, bestMatched, bestMissing, bestPos := def, 0, 0, 0
	for _, k := range keys {
		leafAt, ok := words[k.parts[len(k.parts)-1]]
		if !ok {
			continue
		}
		matched, missing := 1, 0
		for _, p := range k.parts[:len(k.parts)-1] {
			if at, ok := words[p]; ok && at[0] < leafAt[len(leafAt)-1] {
				matched++
			} else {
				missing++
			}
		}
		pos := leafAt[0]
		better := bestMatched == 0 || matched > bestMatched ||
			matched == bestMatched && (pos < bestPos || pos == bestPos && missing < bestMissing)
		if better {
			best, bestMatched, bestMissing, bestPos = k.line, matched, missing, pos
		}
	}
	return best
}

// wordPositions maps each word of msg (letters, digits, underscores) to
// the byte offsets where it occurs, in order.
func wordPositions(msg string) map[string][]int {
	out := map[string][]int{}
	start := -1
	isWord := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for i := 0; i <= len(msg); i++ {
		if i < len(msg) && isWord(msg[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			w := msg[start:i]
			out[w] = append(out[w], start)
			start = -1
		}
	}
	return out
}

// sortProblems orders problems by line, keeping the order of those on one
// line.
func sortProblems(ps []problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].line < ps[j].line })
}
