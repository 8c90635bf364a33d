package sim

import (
	"strings"
	"testing"
)

// An autoscaler's bad fields are reported each at its own line, one line
// per problem (they were all at the autoscale: line, joined by a literal
// \n).
func TestAutoscaleErrorsAtTheirLines(t *testing.T) {
	const file = `name: a
clients:
  - name: app
    target: web
    arrivals: {kind: poisson, rate: 10}
services:
  - name: web
    service_time: {kind: constant, mean: 10ms}
    autoscale:
      metric: cpu
      target: -1
      min: 1
      max: 4
      interval: 15s
      cooldown: -5s
`
	_, err := Parse("a.yaml", []byte(file))
	if err == nil {
		t.Fatal("a bad autoscaler loaded")
	}
	got := strings.Split(err.Error(), "\n")
	want := []string{
		"a.yaml:11: services.web.autoscale.target: -1: a cpu target is a utilisation in (0, 1]",
		"a.yaml:15: services.web.autoscale.cooldown: -5s must not be negative",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(err.Error(), `\n`) {
		t.Errorf("a literal \\n in %q", err)
	}
}
