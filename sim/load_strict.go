package sim

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
)

// problem is one thing wrong with a scenario file: its line (0 when
// unknown) and what is wrong.
type problem struct {
	line int
	msg  string
}

// maxNodes bounds the nodes of a file once its aliases are expanded.
const maxNodes = yamlnode.MaxNodes

// copyTree returns a deep copy of an expanded tree.
func copyTree(n *yaml.Node) *yaml.Node {
	budget := 2 * maxNodes
	c, err := yamlnode.Expand(n, &budget)
	if err != nil {
		panic("sim: copyTree of a tree that was not expanded: " + err.Error())
	}
	return c
}

// decodeStrict decodes n into out, rejecting unknown fields, and returns
// the problems with lines of n. yaml.v3 is strict only when it reads text
// (Node.Decode is not), so n is encoded, read back with KnownFields, and
// the lines in the errors are mapped back through the two trees.
//
// A failing TextUnmarshaler (an unknown kind name) stops yaml.v3 with an
// error that has no line and loses the others; the scalar it quotes is
// found, reported, set to null, and the decoding tried again.
func decodeStrict(n *yaml.Node, out any) []problem {
	budget := maxNodes
	c, err := yamlnode.Expand(n, &budget)
	if err != nil {
		return []problem{{line: n.Line, msg: err.Error()}}
	}
	var probs []problem
	for range 16 {
		msg, more := decodeOnce(c, out, &probs)
		if msg == "" {
			return probs
		}
		bad := quotedScalar(c, quoted(msg))
		if bad == nil {
			return append(probs, problem{msg: msg})
		}
		probs = append(probs, problem{line: bad.Line, msg: msg})
		*bad = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: bad.Line}
		if !more {
			return probs
		}
	}
	return probs
}

// decodeOnce encodes c, decodes the text strictly into out and appends the
// type errors to probs. It returns the message of an error that stopped the
// decoding, if any, and whether trying again may find more.
func decodeOnce(c *yaml.Node, out any, probs *[]problem) (string, bool) {
	text, err := yaml.Marshal(c)
	if err != nil {
		*probs = append(*probs, problem{line: c.Line, msg: strings.TrimPrefix(err.Error(), "yaml: ")})
		return "", false
	}
	var back yaml.Node
	if err := yaml.Unmarshal(text, &back); err != nil || len(back.Content) == 0 {
		*probs = append(*probs, problem{line: c.Line, msg: fmt.Sprintf("cannot re-read the value (%v)", err)})
		return "", false
	}
	lines := map[int]int{}
	pairLines(c, back.Content[0], lines)
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	err = dec.Decode(out)
	var te *yaml.TypeError
	switch {
	case err == nil:
		return "", false
	case errors.As(err, &te):
		for _, e := range te.Errors {
			*probs = append(*probs, mapProblem(e, lines))
		}
		return "", false
	}
	return strings.TrimPrefix(err.Error(), "yaml: "), true
}

// pairLines maps the lines of b, a re-read of a's encoding, to a's lines.
// Children go first: a block mapping starts on the line of its first key,
// and the key's line is the one that was written.
func pairLines(a, b *yaml.Node, lines map[int]int) {
	for i := range min(len(a.Content), len(b.Content)) {
		pairLines(a.Content[i], b.Content[i], lines)
	}
	if _, ok := lines[b.Line]; !ok {
		lines[b.Line] = a.Line
	}
}

var (
	lineRE    = regexp.MustCompile(`^line (\d+): (.*)$`)
	atLineRE  = regexp.MustCompile(`at line (\d+)`)
	syntaxRE  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	backtickR = regexp.MustCompile("`([^`]*)`")
)

// mapProblem turns one of yaml's "line N: msg" into a problem with the
// line mapped, and a friendlier message where one helps.
func mapProblem(e string, lines map[int]int) problem {
	m := lineRE.FindStringSubmatch(e)
	if m == nil {
		return problem{msg: e}
	}
	n, _ := strconv.Atoi(m[1])
	msg := atLineRE.ReplaceAllStringFunc(m[2], func(s string) string {
		k, _ := strconv.Atoi(strings.TrimPrefix(s, "at line "))
		return fmt.Sprintf("at line %d", lines[k])
	})
	msg = strings.Replace(msg, " not found in type ", " not found in ", 1)
	if strings.HasSuffix(msg, "into time.Duration") {
		msg += ` (write durations as strings such as "1s" or "50ms")`
	}
	return problem{line: lines[n], msg: msg}
}

// quotedScalar returns the first scalar in n whose value is q, or nil.
func quotedScalar(n *yaml.Node, q string) *yaml.Node {
	if q == "" {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Value == q {
		return n
	}
	for _, c := range n.Content {
		if s := quotedScalar(c, q); s != nil {
			return s
		}
	}
	return nil
}

// quoted returns the first Go-quoted string in msg, unquoted, or "".
func quoted(msg string) string {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return ""
	}
	q, err := strconv.QuotedPrefix(msg[i:])
	if err != nil {
		return ""
	}
	s, _ := strconv.Unquote(q)
	return s
}

// syntaxProblem turns a parse error into a problem.
func syntaxProblem(err error) problem {
	if m := syntaxRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return problem{line: n, msg: m[2]}
	}
	return problem{msg: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// lineIndex finds the dotted path (as in a set key) of the scalar behind a
// problem: type errors name the line and value, not the field.
type lineIndex map[int][]indexEntry

type indexEntry struct {
	path  string
	value string
}

// indexLines records the path of every scalar value in tree by line.
func indexLines(tree *yaml.Node) lineIndex {
	idx := lineIndex{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.ScalarNode:
			idx[n.Line] = append(idx[n.Line], indexEntry{path, n.Value})
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value))
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, join(path, elementName(c, i)))
			}
		}
	}
	walk(tree, "")
	return idx
}

// field returns the path of the value p complains about, or "" when the
// message names its field already or the value cannot be told apart.
func (idx lineIndex) field(p problem) string {
	entries := idx[p.line]
	if len(entries) == 0 || strings.HasPrefix(p.msg, "field ") || strings.HasPrefix(p.msg, "mapping key ") {
		return ""
	}
	want, truncated := "", false
	if m := backtickR.FindStringSubmatch(p.msg); m != nil {
		want, truncated = strings.CutSuffix(m[1], "...")
	} else {
		want = quoted(p.msg)
	}
	for _, e := range entries {
		if e.value == want || truncated && strings.HasPrefix(e.value, want) {
			return e.path
		}
	}
	if len(entries) == 1 {
		return entries[0].path
	}
	return ""
}

func join(path, elem string) string {
	if path == "" {
		return elem
	}
	return path + "." + elem
}
