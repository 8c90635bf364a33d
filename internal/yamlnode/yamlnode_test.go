package yamlnode

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func parse(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

func TestExpand(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // the expanded tree, encoded; "" for an error
		err       string
	}{
		{"alias copied, flow made block", "a: &x {b: 1}\nc: *x\n", "a:\n    b: 1\nc:\n    b: 1\n", ""},
		{"no alias", "a: [1, 2]\n", "a:\n    - 1\n    - 2\n", ""},
		// 10 levels of ten aliases each: 10^10 nodes once expanded.
		{"alias bomb", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + bomb(), "", "more than 100000 nodes"},
	}
	for _, tt := range tests {
		budget := MaxNodes
		got, err := Expand(parse(t, tt.src), &budget)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		out, _ := yaml.Marshal(got)
		if string(out) != tt.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, out, tt.want)
		}
	}
}

func bomb() string {
	var b strings.Builder
	for i := 1; i < 10; i++ {
		p := "*a" + string(rune('0'+i-1))
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [" + strings.Repeat(p+", ", 9) + p + "]\n")
	}
	return b.String()
}

func TestFieldName(t *testing.T) {
	type s struct {
		Plain    int
		Tagged   int `yaml:"tagged_name,omitempty"`
		Skipped  int `yaml:"-"`
		OnlyOpts int `yaml:",omitempty"`
		hidden   int
	}
	want := []string{"plain", "tagged_name", "", "onlyopts", ""}
	typ := reflect.TypeFor[s]()
	for i := range typ.NumField() {
		if got := FieldName(typ.Field(i)); got != want[i] {
			t.Errorf("%s: %q, want %q", typ.Field(i).Name, got, want[i])
		}
	}
	_ = s{}.hidden
}

// TestOneDocument: one document is read with its aliases expanded; no
// document, a second one, a syntax error and an alias bomb are refused at
// their lines.
func TestOneDocument(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // the expanded root, encoded, when it is read
		err       *DocError
		empty     bool
	}{
		{"one", "a: &x 1\nb: *x\n", "a: 1\nb: 1\n", nil, false},
		{"empty", "# nothing\n", "", nil, true},
		{"second document", "a: 1\n---\nb: 2\n", "", &DocError{Line: 2, Msg: "a second YAML document starts here", Second: true}, false},
		{"syntax", "a: 1\nb: [\n", "", &DocError{Line: 2, Msg: "did not find expected node content"}, false},
		{"alias bomb", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + bomb(), "", &DocError{Line: 1, Msg: "the file expands to more than 100000 nodes (aliases?)"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := OneDocument([]byte(tt.src))
			var de *DocError
			switch {
			case tt.empty:
				if !errors.Is(err, ErrEmpty) {
					t.Fatalf("err = %v, want ErrEmpty", err)
				}
			case tt.err != nil:
				if !errors.As(err, &de) || *de != *tt.err {
					t.Fatalf("err = %#v, want %#v", err, tt.err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				out, _ := yaml.Marshal(root)
				if string(out) != tt.want {
					t.Errorf("root = %q, want %q", out, tt.want)
				}
			}
		})
	}
}

// TestSyntaxErrorLine: a parser's error is reported at the line where the
// text goes wrong; yaml.v3 names the line before the construct it was
// reading (an unclosed flow mapping on line 3 said line 2, a key indented
// wrong on line 4 said line 1).
func TestSyntaxErrorLine(t *testing.T) {
	for _, c := range []struct {
		text string
		line int
	}{
		{"a: 1\nb:\n  c: {d: 1\ne: 2\n", 3},
		{"a:\n  - b: 1\n    c: 2\n   d: 3\n", 4},
		{"a: 1\nb: c: d\n", 2},
		{"a: 1\nb: @x\n", 2},
	} {
		_, err := OneDocument([]byte(c.text))
		var de *DocError
		if !errors.As(err, &de) || de.Line != c.line {
			t.Errorf("%q: %v, want an error at line %d", c.text, err, c.line)
		}
	}
}
