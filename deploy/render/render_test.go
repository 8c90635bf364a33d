package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	jsonnet "github.com/google/go-jsonnet"
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
// those, the dashboard's variables are named for them and its legends name
// them.
func TestConfigOverride(t *testing.T) {
	files, err := render("../..", userConfig)
	if err != nil {
		t.Fatal(err)
	}
	checkUserConfig(t, files[rulesFile], files[dashboardFile])
	if !bytes.Equal(files[mixinDashboardFile], files[dashboardFile]) {
		t.Error("the mixin's copy of the dashboard differs from the dashboard")
	}
}

// userConfig is the configuration of a user that checkUserConfig looks
// for.
const userConfig = `{ _config+:: { stormguardSelector: 'job=~"shop|orders"', clusterLabel: 'k8s_cluster', instanceLabel: 'pod', routeLabel: 'handler' } }`

// checkUserConfig checks that rules and dashboard were rendered with
// userConfig.
func checkUserConfig(t *testing.T, rulesYAML, dashJSON []byte) {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(rulesYAML, &rules); err != nil {
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
			Targets []struct{ Expr, LegendFormat string }
		}
	}
	if err := json.Unmarshal(dashJSON, &d); err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if got, want := strings.Join(vars, " "), "datasource k8s_cluster namespace job pod target handler"; got != want {
		t.Errorf("variables %q; want %q", got, want)
	}
	q, pods, handlers := 0, 0, 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q++
			if !strings.Contains(tg.Expr, `job=~"shop|orders"`) || !strings.Contains(tg.Expr, `pod=~"$pod"`) {
				t.Errorf("query %s: without the selector or the pod variable", tg.Expr)
			}
			if strings.Contains(tg.LegendFormat, "{{instance}}") || strings.Contains(tg.LegendFormat, "{{route}}") {
				t.Errorf("legend %q names a default label, not the configuration's", tg.LegendFormat)
			}
			pods += strings.Count(tg.LegendFormat, "{{pod}}")
			handlers += strings.Count(tg.LegendFormat, "{{handler}}")
		}
	}
	if q == 0 || pods == 0 || handlers == 0 {
		t.Fatalf("%d queries, %d legends name {{pod}}, %d {{handler}}; want some of each", q, pods, handlers)
	}
}

// go run . -config FILE -out DIR writes the rules and the dashboard with
// FILE's _config into DIR, and leaves the committed files alone; the flags
// refuse what they cannot do, and a config with a field the mixin does not
// have is refused with the field's name.
func TestRunConfigOut(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "my-config.jsonnet")
	if err := os.WriteFile(cfg, []byte(userConfig+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := committed(t)
	out := filepath.Join(dir, "out", "sub")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-config", cfg, "-out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v (%s)", err, stderr.String())
	}
	rules, err := os.ReadFile(filepath.Join(out, "stormguard.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile(filepath.Join(out, "stormguard.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkUserConfig(t, rules, dash)
	if !bytes.Contains(rules, []byte("# Rendered with the _config of my-config.jsonnet")) {
		t.Error("the rules do not say which _config they were rendered with")
	}
	if got := committed(t); !maps.EqualFunc(got, before, bytes.Equal) {
		t.Error("-out changed a committed file")
	}

	// -out alone: the default rendering, the committed files' bytes.
	def := filepath.Join(dir, "default")
	if err := run([]string{"-out", def}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for name, committedAs := range map[string]string{"stormguard.rules.yml": rulesFile, "stormguard.json": dashboardFile} {
		if b, err := os.ReadFile(filepath.Join(def, name)); err != nil || !bytes.Equal(b, before[committedAs]) {
			t.Errorf("-out alone: %s is not the committed %s (%v)", name, committedAs, err)
		}
	}

	bad := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"-config without -out", []string{"-config", cfg}, "-config needs -out"},
		{"-check with -out", []string{"-check", "-out", dir}, "-check"},
		{"-check with -config", []string{"-check", "-config", cfg}, "-check"},
		{"a missing config", []string{"-config", filepath.Join(dir, "none.jsonnet"), "-out", dir}, "no such file"},
		{"a typo in _config", []string{"-config", bad("typo.jsonnet", `{ _config+:: { stormguardSelecter: 'job="shop"' } }`), "-out", dir}, "_config.stormguardSelecter"},
		{"_config's fields at the top", []string{"-config", bad("flat.jsonnet", `{ stormguardSelector: 'job="shop"' }`), "-out", dir}, "stormguardSelector"},
		{"not an object", []string{"-config", bad("list.jsonnet", `[1]`), "-out", dir}, "not an object"},
		{"not jsonnet", []string{"-config", bad("broken.jsonnet", `{ _config+:: `), "-out", dir}, "broken.jsonnet"},
		{"an argument", []string{"-out", dir, "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run %q: %v; want an error with %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// committed reads the committed rendered files.
func committed(t *testing.T) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range []string{rulesFile, dashboardFile, mixinDashboardFile} {
		b, err := os.ReadFile(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		m[name] = b
	}
	return m
}

// The mixin vendored alone, as jsonnet-bundler lays it out (jb install
// github.com/stormguard/stormguard/deploy/mixin@…: a copy of the directory
// at vendor/github.com/stormguard/stormguard/deploy/mixin), is whole: its
// jsonnetfile.json declares no dependencies, the import of docs/oncall.md
// evaluates with -J vendor, its rules follow the snippet's _config, and its
// dashboard is the committed default rendering. The config file of
// docs/oncall.md renders with -config.
func TestVendoredMixin(t *testing.T) {
	vendor := t.TempDir()
	dst := filepath.Join(vendor, "github.com", "stormguard", "stormguard", "deploy", "mixin")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("../..", mixinDir))); err != nil {
		t.Fatal(err)
	}

	var jf struct {
		Version       int               `json:"version"`
		Dependencies  []json.RawMessage `json:"dependencies"`
		LegacyImports bool              `json:"legacyImports"`
	}
	b, err := os.ReadFile(filepath.Join(dst, "jsonnetfile.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jf); err != nil || jf.Version != 1 || jf.Dependencies == nil || len(jf.Dependencies) != 0 {
		t.Errorf("jsonnetfile.json: %+v, %v; want version 1, dependencies []", jf, err)
	}

	doc, err := os.ReadFile("../../docs/oncall.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```jsonnet\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) != 2 {
		t.Fatalf("docs/oncall.md has %d jsonnet blocks; want 2 (the -config file, the import)", len(blocks))
	}
	config, imp := blocks[0], blocks[1]
	if !strings.Contains(imp, "'github.com/stormguard/stormguard/deploy/mixin/mixin.libsonnet'") {
		t.Fatalf("the import of docs/oncall.md is not by the full path:\n%s", imp)
	}

	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{vendor}})
	out, err := vm.EvaluateAnonymousSnippet(filepath.Join(t.TempDir(), "user.jsonnet"),
		"local m = "+imp+";\n{ groups: m.prometheusRules.groups + m.prometheusAlerts.groups, dashboards: m.grafanaDashboards }")
	if err != nil {
		t.Fatalf("docs/oncall.md's import, with the mixin vendored alone: %v", err)
	}
	var got struct {
		Groups []struct {
			Rules []struct{ Record, Alert, Expr string }
		}
		Dashboards map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, g := range got.Groups {
		for _, r := range g.Rules {
			rules++
			if !strings.Contains(r.Expr, `job=~"shop|orders"`) && !strings.Contains(r.Expr, "job_target:") {
				t.Errorf("%s%s: neither the snippet's selector nor a recorded series: %s", r.Record, r.Alert, r.Expr)
			}
			if strings.Contains(r.Expr, "sum by (") && !strings.Contains(r.Expr, "k8s_cluster") {
				t.Errorf("%s%s: does not keep k8s_cluster: %s", r.Record, r.Alert, r.Expr)
			}
		}
	}
	if rules != 13 {
		t.Errorf("%d rules; want 9 recording rules and 4 alerts", rules)
	}
	committedDash, err := os.ReadFile(filepath.Join("../..", dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var want, gotDash any
	if err := json.Unmarshal(committedDash, &want); err != nil {
		t.Fatal(err)
	}
	if len(got.Dashboards) != 1 || json.Unmarshal(got.Dashboards["stormguard.json"], &gotDash) != nil || !reflect.DeepEqual(gotDash, want) {
		t.Errorf("grafanaDashboards: %d dashboards; want stormguard.json, the committed default rendering", len(got.Dashboards))
	}

	// The config file of docs/oncall.md, with -config.
	cfg := filepath.Join(t.TempDir(), "my-stormguard.jsonnet")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-config", cfg, "-out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("docs/oncall.md's config with -config: %v", err)
	}
	dash, err := os.ReadFile(filepath.Join(dir, "stormguard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(dash, []byte(`job=~\"shop|orders\"`)) || !bytes.Contains(dash, []byte(`k8s_cluster=~\"$k8s_cluster\"`)) {
		t.Error("the dashboard rendered with docs/oncall.md's config has neither its selector nor its cluster label")
	}
}
