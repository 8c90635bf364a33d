package scenario

import (
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A FieldError is a problem with one value of a scenario, at its path in
// the file: the same dotted path a run's set uses ("services.db.workers",
// "triggers.0.factor"), list elements by name, or by index from 0. A
// scenario loaded from a file reports it with the file and line of the
// value (see Load); a Scenario built in Go reports the path alone.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// fieldErrs collects a validator's problems, each at a path.
type fieldErrs []error

// add records a problem at path (joined from parts, empty parts skipped).
func (f *fieldErrs) add(msg string, path ...string) {
	*f = append(*f, &FieldError{Path: joinPath(path...), Msg: msg})
}

// wrap records err under path: a FieldError keeps its own path below it,
// an error that names its field (Field and Reason methods, as autoscale's)
// goes at that field, and each error of a join is recorded on its own.
func (f *fieldErrs) wrap(err error, path ...string) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			f.wrap(e, path...)
		}
		return
	}
	if named, ok := err.(interface {
		Field() string
		Reason() string
	}); ok {
		*f = append(*f, &FieldError{Path: joinPath(append(path, named.Field())...), Msg: named.Reason()})
		return
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		*f = append(*f, &FieldError{Path: joinPath(append(path, fe.Path)...), Msg: fe.Msg})
		return
	}
	*f = append(*f, &FieldError{Path: joinPath(path...), Msg: err.Error()})
}

func (f fieldErrs) err() error { return errors.Join(f...) }

func joinPath(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ".")
}

// lineOf returns the line of the value at path in the tree root, or of the
// deepest part of the path the tree holds (the value's default is not in
// the file: its parent is the nearest line). It returns 0 when root holds
// none of the path.
func lineOf(root *yaml.Node, path string) int {
	line := 0
	cur := root
	for _, part := range strings.Split(path, ".") {
		switch cur.Kind {
		case yaml.MappingNode:
			found := false
			for i := 0; i+1 < len(cur.Content); i += 2 {
				if cur.Content[i].Value == part {
					line, cur, found = cur.Content[i].Line, cur.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		case yaml.SequenceNode:
			j, ok := element(cur, part)
			if !ok {
				return line
			}
			cur = cur.Content[j]
			line = cur.Line
		default:
			return line
		}
	}
	if cur.Kind == yaml.ScalarNode {
		line = cur.Line
	}
	return line
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
