package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The committed files are what the mixin renders (CI runs go run . -check
// too), and rendering twice gives the same bytes.
func TestRenderUpToDate(t *testing.T) {
	a, err := Render("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render("../..")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range a {
		if !bytes.Equal(got, b[name]) {
			t.Errorf("%s: two renderings differ", name)
		}
		old, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil || !bytes.Equal(old, got) {
			t.Errorf("%s is not what the mixin renders (%v); run go run . in deploy/render", name, err)
		}
	}
}

// A user's _config reaches every rule and every query of the dashboard:
// with a selector, each names it; with other label names, the rules keep
// those and the dashboard's variables are named for them.
func TestConfigOverride(t *testing.T) {
	files, err := render("../..", `{ _config+:: { stormguardSelector: 'job=~"shop|orders"', clusterLabel: 'k8s_cluster', instanceLabel: 'pod' } }`)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(files[rulesFile], &rules); err != nil {
		t.Fatal(err)
	}
	// A raw series (not a recorded one, job_target:stormguard_…).
	metric := regexp.MustCompile(`(?:^|[^:\w])(stormguard_[a-z_]+)(\{[^}]*\})?`)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range metric.FindAllStringSubmatch(r.Expr, -1) {
				n++
				if !strings.Contains(m[2], `job=~"shop|orders"`) {
					t.Errorf("%s%s: %s does not select job=~\"shop|orders\"", r.Record, r.Alert, m[0])
				}
			}
			if strings.Contains(r.Expr, "sum by (") && !strings.Contains(r.Expr, "k8s_cluster") {
				t.Errorf("%s%s: does not keep k8s_cluster: %s", r.Record, r.Alert, r.Expr)
			}
		}
	}
	if n == 0 {
		t.Fatal("no series in the rules")
	}
	var d struct {
		Templating struct{ List []struct{ Name string } }
		Panels     []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(files[dashboardFile], &d); err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if strings.Join(vars, " ") != "datasource k8s_cluster namespace job pod target route" {
		t.Errorf("variables %v", vars)
	}
	q := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q++
			if !strings.Contains(tg.Expr, `job=~"shop|orders"`) || !strings.Contains(tg.Expr, `pod=~"$pod"`) {
				t.Errorf("query %s: without the selector or the pod variable", tg.Expr)
			}
		}
	}
	if q == 0 {
		t.Fatal("no queries in the dashboard")
	}
}
