package scenario

import (
	"strings"
	"testing"
	"time"
)

// oneWeb is a scenario of one client and one service, web, whose
// autoscale: follows.
const oneWeb = `name: a
clients:
  - name: app
    target: web
    arrivals: {kind: poisson, rate: 10}
services:
  - name: web
    service_time: {kind: constant, mean: 10ms}
`

// An autoscaler's bad fields are reported each at its own line, one line
// per problem (they were all at the autoscale: line, joined by a literal
// \n).
func TestAutoscaleErrorsAtTheirLines(t *testing.T) {
	const file = oneWeb + `    autoscale:
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

// The behavior fields' errors are at their own lines too, list elements
// included; an empty list of policies is refused (it would mean neither
// the default nor "no scaling").
func TestAutoscaleBehaviorErrors(t *testing.T) {
	const file = oneWeb + `    autoscale:
      metric: cpu
      target: 0.5
      max: 4
      readiness_delay: -1s
      scale_up:
        policies: []
      scale_down:
        stabilization_window: 2h
        select_policy: Max
        policies:
          - {type: pods, value: 1, period: 15s}
          - type: Percent
            value: 0
            period: 1h
`
	_, err := Parse("a.yaml", []byte(file))
	if err == nil {
		t.Fatal("a bad autoscaler loaded")
	}
	want := []string{
		"a.yaml:13: services.web.autoscale.readiness_delay: -1s is outside [0s, 1h0m0s]",
		"a.yaml:15: services.web.autoscale.scale_up.policies: give at least one policy, or leave the key out for the default (select_policy: disabled stops scaling this way)",
		"a.yaml:17: services.web.autoscale.scale_down.stabilization_window: 2h0m0s is outside [0s, 1h0m0s]",
		`a.yaml:18: services.web.autoscale.scale_down.select_policy: "Max" is not one of max, min, disabled`,
		`a.yaml:21: services.web.autoscale.scale_down.policies.1.type: "Percent" is not one of pods, percent`,
		"a.yaml:22: services.web.autoscale.scale_down.policies.1.value: 0 is outside [1, 1000000]",
		"a.yaml:23: services.web.autoscale.scale_down.policies.1.period: 1h0m0s is outside (0s, 30m0s]",
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A run's set reaches the behavior fields, and an explicit zero window is
// kept (it is not the default).
func TestAutoscaleBehaviorSet(t *testing.T) {
	const file = oneWeb + `    autoscale: {metric: cpu, target: 0.5, max: 4}
runs:
  - name: fast
    set:
      services.web.autoscale.scale_down.stabilization_window: 0s
      services.web.autoscale.scale_up.policies: [{type: pods, value: 2, period: 30s}]
`
	f, err := Parse("a.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	p := f.Runs[0].Scenario.Services[0].Autoscale.Policy
	if p.ScaleDown == nil || p.ScaleDown.StabilizationWindow == nil || *p.ScaleDown.StabilizationWindow != 0 {
		t.Errorf("scale_down: %+v, want a window of 0s", p.ScaleDown)
	}
	if p.ScaleUp == nil || len(p.ScaleUp.Policies) != 1 || p.ScaleUp.Policies[0].Value != 2 || p.ScaleUp.Policies[0].Period != 30*time.Second {
		t.Errorf("scale_up: %+v", p.ScaleUp)
	}
}
