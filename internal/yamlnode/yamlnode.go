// Package yamlnode holds the YAML helpers that the strict loaders of
// scenario files (package sim/scenario) and policy files (package
// policyfile) share: reading exactly one document, expanding aliases under
// a bound, and the key a struct field has in YAML.
package yamlnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxNodes bounds the nodes of a file once its aliases are expanded, so
// that an alias bomb fails instead of eating the memory.
const MaxNodes = 100_000

// Expand returns a deep copy of n with every alias replaced by a copy of
// its anchor's node, comments and anchors dropped and collections in block
// style (one entry per line, which keeps line numbers one-to-one when the
// copy is encoded). budget counts down the nodes made; past zero Expand
// fails.
func Expand(n *yaml.Node, budget *int) (*yaml.Node, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("the file expands to more than %d nodes (aliases?)", MaxNodes)
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, fmt.Errorf("alias *%s has no anchor", n.Value)
		}
		return Expand(n.Alias, budget)
	}
	c := &yaml.Node{Kind: n.Kind, Style: n.Style &^ yaml.FlowStyle, Tag: n.Tag, Value: n.Value, Line: n.Line, Column: n.Column}
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			var err error
			if c.Content[i], err = Expand(k, budget); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// FieldName is the key yaml.v3 uses for a struct field, or "" for a field
// it leaves out (yaml:"-", unexported).
func FieldName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch tag {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return tag
}

// ErrEmpty is the error of OneDocument for a file that holds no document.
var ErrEmpty = errors.New("the file is empty")

// A DocError is what is wrong with a file as YAML text, before its content
// is read: a syntax error, a second document or aliases that expand past
// MaxNodes, at its line (0 when unknown). Second marks a second document,
// whose message a loader completes with what its files hold.
type DocError struct {
	Line   int
	Msg    string
	Second bool
}

func (e *DocError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// OneDocument parses data as one YAML document and returns its top node
// with every alias expanded (see Expand). A file with no document gives
// ErrEmpty; a syntax error, a second document ("a second YAML document
// starts here") or an expansion past MaxNodes gives a *DocError.
func OneDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(data, err)
	}
	if len(doc.Content) == 0 {
		return nil, ErrEmpty
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &DocError{Line: next.Line, Msg: "a second YAML document starts here", Second: true}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(data, err)
	}
	budget := MaxNodes
	root, err := Expand(doc.Content[0], &budget)
	if err != nil {
		return nil, &DocError{Line: doc.Content[0].Line, Msg: err.Error()}
	}
	return root, nil
}

// syntaxError turns yaml's "yaml: line N: msg" into a *DocError at the
// line of the problem. yaml.v3 gives a parser's error the line of the
// construct it was reading (a list that began lines earlier, counted from
// 0), not the line where the text went wrong; that line is found as the
// first one, from the construct's on, at which the file cut after it fails
// with the same message (see problemLine).
func syntaxError(data []byte, err error) *DocError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(n); err == nil {
				return &DocError{Line: problemLine(data, line, tail), Msg: tail}
			}
		}
	}
	return &DocError{Msg: msg}
}

// problemLine returns the first line L from line on (at most
// maxSyntaxScan lines on) such that the first L lines of data alone fail
// to parse with msg; line when there is none.
func problemLine(data []byte, line int, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for l := max(line, 1); l <= min(len(lines), line+maxSyntaxScan); l++ {
		if parseError(bytes.Join(lines[:l], nil)) == msg {
			return l
		}
	}
	return line
}

// maxSyntaxScan bounds the lines problemLine tries.
const maxSyntaxScan = 200

// parseError returns the message of the first error that parsing every
// document of data gives (without "yaml: line N: "), or "".
func parseError(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		switch {
		case errors.Is(err, io.EOF):
			return ""
		case err != nil:
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if rest, ok := strings.CutPrefix(msg, "line "); ok {
				if _, tail, ok := strings.Cut(rest, ": "); ok {
					return tail
				}
			}
			return msg
		}
	}
}
