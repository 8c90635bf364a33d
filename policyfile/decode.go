package policyfile

import (
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
// field, by their YAML names, with the strict decoder the scenario loader
// shares (yamlnode.Decoder): walking the tree itself, it knows the line of
// every key and value, reports every problem rather than the first, and
// tells an explicit value from an absent one. A policy file's own rules
// are its hooks here: an explicit zero that would silently become a
// default is an error (zeroAllowed), so are a null and an empty string,
// and every number and duration is bounded (bound).

// problem is one thing wrong with a file: its line (0 when unknown), the
// dotted path of the value and what is wrong.
type problem struct {
	line int
	path string
	msg  string
}

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

var durationType = reflect.TypeFor[time.Duration]()

// decoder collects the problems of one file and the paths it holds.
type decoder struct {
	probs   []problem
	written map[string]bool // every key path the file gives a value
}

// strict is the shared decoder with the policy file's rules, reporting
// into d.
func (d *decoder) strict() *yamlnode.Decoder {
	if d.written == nil {
		d.written = map[string]bool{}
	}
	return &yamlnode.Decoder{
		Strict:  true,
		Written: d.written,
		Report: func(p yamlnode.Problem) {
			d.probs = append(d.probs, problem{line: p.Line, path: p.Path, msg: tidy(p.Msg)})
		},
		Zero: func(t reflect.Type, field, value string) string {
			if zeroAllowed[t][field] {
				return ""
			}
			return zeroMessage(value)
		},
		Check: bound,
	}
}

func (d *decoder) add(n *yaml.Node, path, format string, a ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.probs = append(d.probs, problem{line: line, path: path, msg: fmt.Sprintf(format, a...)})
}

func join(path, key string) string { return yamlnode.Join(path, key) }

// pair is a key and its value in a mapping.
type pair struct{ k, v *yaml.Node }

// pairs returns the entries of mapping n (yamlnode.Decoder.Pairs: merges
// first, a key given twice is a problem).
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	ps := d.strict().Pairs(n, path)
	out := make([]pair, len(ps))
	for i, p := range ps {
		out[i] = pair{p.K, p.V}
	}
	return out
}

// mergeSources: see yamlnode.MergeSources.
func mergeSources(k, v *yaml.Node) ([]*yaml.Node, bool) { return yamlnode.MergeSources(k, v) }

// fieldNames returns the configuration names of struct type t, in order.
func fieldNames(t reflect.Type) []string { return yamlnode.FieldNames(t) }

// structFrom sets the fields of the struct v from the entries ps, and
// leaves the others as they are (a preset's, or zero). extra lists keys
// the caller handles, for the message about an unknown key.
func (d *decoder) structFrom(ps []pair, v reflect.Value, path string, extra ...string) {
	yps := make([]yamlnode.Pair, len(ps))
	for i, p := range ps {
		yps[i] = yamlnode.Pair{K: p.k, V: p.v}
	}
	d.strict().StructFrom(yps, v, path, extra...)
}

// into decodes n into the settable v. zeroOK says an explicit zero is a
// value here (see zeroAllowed).
func (d *decoder) into(n *yaml.Node, v reflect.Value, path string, zeroOK bool) {
	zero := ""
	if !zeroOK {
		zero = zeroMessage(n.Value)
	}
	d.strict().Into(n, v, path, zero)
}

// zeroMessage refuses an explicit zero that would silently become a
// default.
func zeroMessage(value string) string {
	return fmt.Sprintf("%s is not a value here: a zero field takes its default (see docs/policy.md); leave it out for the default, or give a value", value)
}

// bound refuses a number or duration past the bounds below (see
// yamlnode.Decoder.Check).
func bound(path string, v any, s string) string {
	switch v := v.(type) {
	case time.Duration:
		if v > MaxDuration {
			return fmt.Sprintf("%s is more than %v: a duration in a policy file is at most %v (MaxDuration)", s, MaxDuration, MaxDuration)
		}
	case int64:
		if limit := maxCountFor(path); v < 0 || v > limit {
			return fmt.Sprintf("%s is outside [0, %d]: %s", s, limit, countRule(path))
		}
	case float64:
		if math.Abs(v) > MaxCount {
			return fmt.Sprintf("%s is outside [-%d, %d]: a number in a policy file is at most %d (MaxCount) in size", s, MaxCount, MaxCount, MaxCount)
		}
	}
	return ""
}

// The bounds of every value a policy file gives, beyond those of the
// packages that use it (retry.Policy.Validate, breaker.Spec.Validate,
// admit.Config.Validate): what an operator types in an incident is
// checked, and a slip of the keyboard (max_timeout: 1000000h) is an error
// at its line, not a setting.
const (
	// MaxDuration bounds every duration: timeouts, backoffs, windows,
	// delays.
	MaxDuration = time.Hour
	// MaxCount bounds every whole number (attempts, capacities, limits,
	// calls) and the size of every other number.
	MaxCount = 1_000_000
	// MaxBytes bounds a size in bytes (a field named …_bytes).
	MaxBytes = 64 << 20
)

// maxCountFor returns the bound of the whole number at path.
func maxCountFor(path string) int64 {
	if strings.HasSuffix(path, "_bytes") {
		return MaxBytes
	}
	return MaxCount
}

// countRule says which bound applies at path.
func countRule(path string) string {
	if strings.HasSuffix(path, "_bytes") {
		return fmt.Sprintf("a size in bytes in a policy file is at most %d (MaxBytes)", MaxBytes)
	}
	return fmt.Sprintf("a whole number in a policy file is at most %d (MaxCount)", MaxCount)
}

func kindName(n *yaml.Node) string { return yamlnode.KindName(n) }

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
