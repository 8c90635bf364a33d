package yamlnode

import (
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
