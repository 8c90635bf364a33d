package policyfile

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
)

// TestDocsNameEveryField: docs/policy.md names every field a policy file
// takes, so that a field added to a configuration type is documented.
func TestDocsNameEveryField(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[retry.Policy](), reflect.TypeFor[retry.Pushback](), reflect.TypeFor[retry.HedgePolicy](),
		reflect.TypeFor[backoff.Policy](), reflect.TypeFor[budget.Spec](), reflect.TypeFor[breaker.Spec](),
		reflect.TypeFor[admit.Config](), reflect.TypeFor[admit.SupersedeConfig](), reflect.TypeFor[shed.Config](),
		reflect.TypeFor[limit.Spec](), reflect.TypeFor[limit.AIMDConfig](), reflect.TypeFor[limit.VegasConfig](),
		reflect.TypeFor[limit.Gradient2Config](),
	} {
		for _, name := range fieldNames(typ) {
			named := false
			for _, form := range []string{"`" + name + "`", " " + name + ",", " " + name + "}", "{" + name + ","} {
				named = named || strings.Contains(string(doc), form)
			}
			if !named {
				t.Errorf("docs/policy.md does not name %s's field %s", typ, name)
			}
		}
	}
}

// TestDocsQuoteExample: the Go snippet of docs/policy.md is the package
// example's code, which go test runs.
func TestDocsQuoteExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "```go\n")
	snippet, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("docs/policy.md has no Go snippet")
	}
	var body strings.Builder
	for _, l := range strings.Split(string(ex), "\n") {
		body.WriteString(strings.TrimPrefix(l, "\t") + "\n")
	}
	if !strings.Contains(body.String(), snippet) {
		t.Errorf("the snippet of docs/policy.md is not in example_test.go:\n%s", snippet)
	}
}
