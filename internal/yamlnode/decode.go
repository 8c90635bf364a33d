package yamlnode

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The strict decoder of both loaders: it reads a node tree into Go values
// field by field, by their YAML names (FieldName). It does not go through
// yaml's own decoding of structs: walking the tree itself, it knows the
// line and the dotted path of every key and value, reports every problem
// rather than the first, names an unknown key with the keys valid at that
// place (never a Go type), and tells an explicit value from an absent one,
// so a loader can refuse an explicit zero that would silently become a
// default. Policy files (package policyfile) and scenario files (package
// sim/scenario) decode with it; each sets the hooks where their rules
// differ.

// Problem is one thing wrong with a file: its line (0 when unknown), the
// dotted path of the value and what is wrong.
type Problem struct {
	Line int
	Path string
	Msg  string
}

// Pair is a key and its value in a mapping.
type Pair struct{ K, V *yaml.Node }

// NodeDecoder is a type that reads itself from a node, such as a value
// written either as a preset's name or as a mapping of fields: the
// Decoder calls it instead of reading the type's fields, and it reports
// its problems with d.Add (and may read its fields with d.StructFrom).
type NodeDecoder interface {
	DecodeNode(d *Decoder, n *yaml.Node, path string)
}

// Decoder collects the problems of one file and the key paths it gives.
// The zero Decoder reads every value, explicit zeros, nulls (the zero
// value) and empty strings included, as yaml.v3 would, but strictly:
// unknown keys, keys given twice, values of the wrong kind, durations that
// are not strings are problems.
type Decoder struct {
	// Problems lists the problems found, unless Report takes them.
	Problems []Problem
	// Report, if set, is called with each problem instead.
	Report func(Problem)
	// Written, if set, gets every key path the file gives a value.
	Written map[string]bool
	// Zero, if set, is asked of every explicit zero (0, 0.0, "0s") that a
	// field of struct type t named field is given, with the value as
	// written: it returns "" when zero is a value there, else the message
	// that refuses it. Fields behind a pointer take an explicit zero as
	// such and are not asked.
	Zero func(t reflect.Type, field, value string) string
	// Check, if set, is asked of every number and duration once read (an
	// int64, a float64 or a time.Duration): "" accepts it, else the
	// message that refuses it.
	Check func(path string, v any, written string) string
	// Strict refuses a null value and an empty string (the field would
	// silently take its default) and reads only integers as whole
	// numbers: a policy file's rules. Without it a null sets the field to
	// its zero value, "" is a value and 2.0 is 2.
	Strict bool
	// ZeroDuration reads a bare 0 as a zero duration (other bare numbers
	// are refused: 5 would be 5 ns).
	ZeroDuration bool

	added int // problems added
}

// Add records a problem at n's line (0 when n is nil).
func (d *Decoder) Add(n *yaml.Node, path, format string, a ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p := Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, a...)}
	d.added++
	if d.Report != nil {
		d.Report(p)
		return
	}
	d.Problems = append(d.Problems, p)
}

// Join appends key to a dotted path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Pairs returns the entries of mapping n: the entries merged in with <<
// first (those the mapping does not give itself; of two merged sources the
// first wins), then its own. A key given twice is a problem.
func (d *Decoder) Pairs(n *yaml.Node, path string) []Pair {
	var merged, own []Pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if srcs, ok := MergeSources(k, v); ok {
			for _, s := range srcs {
				if s.Kind != yaml.MappingNode {
					d.Add(s, path, "a merge (<<) takes a mapping or a list of mappings")
					continue
				}
				merged = append(merged, d.Pairs(s, path)...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.Add(k, path, "a key is a name, not a mapping or a list")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.Add(k, Join(path, k.Value), "is given twice (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		own = append(own, Pair{k, v})
	}
	var out []Pair
	from := map[string]bool{}
	for _, p := range merged {
		if _, own := seen[p.K.Value]; !own && !from[p.K.Value] {
			from[p.K.Value] = true
			out = append(out, p)
		}
	}
	return append(out, own...)
}

// MergeSources reports whether the entry k: v of a mapping is a merge
// (<<), and returns what it merges in: v, or each element of v when it is
// a list.
func MergeSources(k, v *yaml.Node) ([]*yaml.Node, bool) {
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
		return nil, false
	}
	if v.Kind == yaml.SequenceNode {
		return v.Content, true
	}
	return []*yaml.Node{v}, true
}

// FieldNames returns the YAML names of the fields of struct type t, in
// order, those of inlined structs in their place.
func FieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if inline(f) {
			names = append(names, FieldNames(f.Type)...)
			continue
		}
		if n := FieldName(f); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// inline reports whether yaml.v3 inlines the struct field f.
func inline(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return f.IsExported() && f.Type.Kind() == reflect.Struct && strings.Contains(","+opts+",", ",inline,")
}

// field returns the field of the struct v named name (looking into
// inlined structs) and the type of the struct that declares it.
func field(v reflect.Value, name string) (reflect.Value, reflect.Type, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if inline(f) {
			if fv, ft, ok := field(v.Field(i), name); ok {
				return fv, ft, true
			}
			continue
		}
		if FieldName(f) == name {
			return v.Field(i), t, true
		}
	}
	return reflect.Value{}, nil, false
}

// StructFrom sets the fields of the struct v from the entries ps, and
// leaves the others as they are (a preset's, or zero). extra lists keys
// the caller handles, for the message about an unknown key.
func (d *Decoder) StructFrom(ps []Pair, v reflect.Value, path string, extra ...string) {
	for _, p := range ps {
		key := p.K.Value
		fv, ft, ok := field(v, key)
		if !ok {
			want := append(append([]string(nil), extra...), FieldNames(v.Type())...)
			d.Add(p.K, Join(path, key), "unknown field (want one of %s)", strings.Join(want, ", "))
			continue
		}
		if d.Written != nil {
			d.Written[Join(path, key)] = true
		}
		zero := ""
		if d.Zero != nil {
			zero = d.Zero(ft, key, p.V.Value)
		}
		d.Into(p.V, fv, Join(path, key), zero)
	}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
	nodeType     = reflect.TypeFor[NodeDecoder]()
)

// Into decodes n into the settable v. zero, when not "", refuses an
// explicit zero with that message (see Decoder.Zero).
func (d *Decoder) Into(n *yaml.Node, v reflect.Value, path, zero string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		if d.Strict {
			d.Add(n, path, "has no value: leave the field out for its default, or give a value")
			return
		}
		v.Set(reflect.Zero(v.Type()))
		return
	}
	t := v.Type()
	switch {
	case reflect.PointerTo(t).Implements(nodeType):
		v.Addr().Interface().(NodeDecoder).DecodeNode(d, n, path)
	case t.Kind() == reflect.Pointer:
		// Decode onto a copy of what is there (a preset's), never through
		// the pointer. Behind a pointer an explicit zero is a value.
		nv := reflect.New(t.Elem())
		if !v.IsNil() {
			nv.Elem().Set(v.Elem())
		}
		before := d.added
		d.Into(n, nv.Elem(), path, "")
		if d.added == before {
			v.Set(nv)
		}
	case reflect.PointerTo(t).Implements(textType):
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if s == "" && d.Strict {
			d.Add(n, path, "is empty: leave the field out for its default, or give a value")
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			d.Add(n, path, "%s", err.Error())
		}
	case t == durationType:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if n.ShortTag() != "!!str" && !(d.ZeroDuration && isZeroNumber(n)) {
			d.Add(n, path, "%s is not a duration: write durations as strings such as \"1s\" or \"50ms\"", s)
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil && !(d.ZeroDuration && isZeroNumber(n)) {
			d.Add(n, path, "%q is not a duration (such as \"1s\", \"50ms\" or \"1m30s\")", s)
			return
		}
		if d.check(n, path, dur) {
			d.store(n, path, zero, false, dur == 0, func() { v.SetInt(int64(dur)) })
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.Add(n, path, "want a mapping (%s), not %s", strings.Join(FieldNames(t), ", "), KindName(n))
			return
		}
		d.StructFrom(d.Pairs(n, path), v, path)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.Add(n, path, "want a list, not %s", KindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.Into(e, s.Index(i), Join(path, elementName(e, i)), "")
		}
		v.Set(s)
	case t.Kind() == reflect.Bool:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		var b bool
		if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.Add(n, path, "%q is not true or false", s)
			return
		}
		v.SetBool(b)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		i, ok := wholeNumber(n, !d.Strict)
		if !ok {
			d.Add(n, path, "%q is not a whole number", s)
			return
		}
		if d.check(n, path, i) {
			d.store(n, path, zero, v.OverflowInt(i), i == 0, func() { v.SetInt(i) })
		}
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		var u uint64
		if n.ShortTag() != "!!int" || n.Decode(&u) != nil {
			d.Add(n, path, "%q is not a whole number from 0 up", s)
			return
		}
		d.store(n, path, zero, v.OverflowUint(u), u == 0, func() { v.SetUint(u) })
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		var f float64
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" || n.Decode(&f) != nil {
			d.Add(n, path, "%q is not a number", s)
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.Add(n, path, "%s is not a finite number", s)
			return
		}
		if d.check(n, path, f) {
			d.store(n, path, zero, false, f == 0, func() { v.SetFloat(f) })
		}
	case t.Kind() == reflect.String:
		s, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if s == "" && d.Strict {
			d.Add(n, path, "is empty: leave the field out for its default, or give a value")
			return
		}
		v.SetString(s)
	default:
		// Not reached with the types the loaders read.
		d.Add(n, path, "cannot be read into a %s", t)
	}
}

// store sets a number (set) unless it overflows its field or is an
// explicit zero that zero refuses.
func (d *Decoder) store(n *yaml.Node, path, zero string, overflow, isZero bool, set func()) {
	switch {
	case overflow:
		d.Add(n, path, "%s is too large", n.Value)
	case isZero && zero != "":
		d.Add(n, path, "%s", zero)
	default:
		set()
	}
}

// wholeNumber reads the scalar n as a whole number: an integer, or with
// floats a float without a fraction (2.0).
func wholeNumber(n *yaml.Node, floats bool) (int64, bool) {
	var i int64
	if n.ShortTag() == "!!int" && n.Decode(&i) == nil {
		return i, true
	}
	var f float64
	if floats && n.ShortTag() == "!!float" && n.Decode(&f) == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f), true
	}
	return 0, false
}

// check asks Check of a number or duration, and reports its refusal.
func (d *Decoder) check(n *yaml.Node, path string, v any) bool {
	if d.Check == nil {
		return true
	}
	if msg := d.Check(path, v, n.Value); msg != "" {
		d.Add(n, path, "%s", msg)
		return false
	}
	return true
}

// isZeroNumber reports whether the scalar n is a number equal to zero.
func isZeroNumber(n *yaml.Node) bool {
	var f float64
	tag := n.ShortTag()
	return (tag == "!!int" || tag == "!!float") && n.Decode(&f) == nil && f == 0
}

// elementName names a list element in a path, as a scenario's set keys
// do: by its name (or, for a call, its service) when it has one without
// dots, else by its index from 0.
func elementName(n *yaml.Node, i int) string {
	if n.Kind == yaml.MappingNode {
		for _, key := range []string{"name", "service"} {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if k, v := n.Content[j], n.Content[j+1]; k.Value == key && v.Kind == yaml.ScalarNode && v.Value != "" && !strings.Contains(v.Value, ".") {
					return v.Value
				}
			}
		}
	}
	return fmt.Sprint(i)
}

// Count is how many problems the decoder has found so far.
func (d *Decoder) Count() int { return d.added }

// scalar returns the text of the scalar n, or reports that n is not one.
func (d *Decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.Add(n, path, "want a single value, not %s", KindName(n))
		return "", false
	}
	return n.Value, true
}

// KindName names what n is, for messages: "a mapping", "a list", "the
// value \"x\"".
func KindName(n *yaml.Node) string {
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
