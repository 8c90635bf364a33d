// Command render renders stormguard's monitoring mixin (deploy/mixin) into
// the files an operator deploys: the Prometheus rules
// (deploy/prometheus/stormguard.rules.yml, evaluated from the jsonnet with
// go-jsonnet) and the Grafana dashboard (deploy/grafana/stormguard.json,
// built with Grafana's foundation SDK from the mixin's _config and the
// metric names of metrics/schema), with a copy of the dashboard inside the
// mixin (deploy/mixin/dashboards/stormguard.json) for its
// grafanaDashboards, so that the mixin directory vendored alone (by
// jsonnet-bundler) is whole.
//
// It is its own module, like bench/, so that go-jsonnet and the SDK never
// reach the module graph of a library user.
//
// Usage, from this directory:
//
//	go run .                          render with the default _config and write the committed files
//	go run . -check                   render and fail (exit 1) if a committed file differs
//	go run . -config FILE -out DIR    render with FILE's _config into DIR
//
// FILE is a jsonnet object merged over the mixin, as a jsonnet user of it
// would write it, for example
//
//	{ _config+:: { stormguardSelector: 'job=~"shop|orders"', clusterLabel: 'k8s_cluster' } }
//
// and both the rules and the dashboard follow it: DIR receives
// stormguard.rules.yml and stormguard.json. A field the mixin does not
// have, at the top or in _config (a typo), is an error. The committed
// files are always the default rendering; CI runs -check.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	jsonnet "github.com/google/go-jsonnet"
)

// The files, relative to the repository's root.
const (
	mixinDir      = "deploy/mixin"
	rulesFile     = "deploy/prometheus/stormguard.rules.yml"
	dashboardFile = "deploy/grafana/stormguard.json"
	// The mixin's copy of the dashboard, which dashboards.libsonnet imports.
	mixinDashboardFile = "deploy/mixin/dashboards/stormguard.json"
)

// The files -out writes, in its directory.
const (
	outRules     = "stormguard.rules.yml"
	outDashboard = "stormguard.json"
)

const rulesHeader = `# Prometheus recording and alerting rules for stormguard's metrics (the
# schema of docs/metrics.md). GENERATED from the mixin in deploy/mixin by
# deploy/render (go run . in that directory): edit the jsonnet, not this
# file. What each alert means and what to do: docs/oncall.md.
#
# Tested with: promtool check rules stormguard.rules.yml
#              promtool test rules stormguard.rules.test.yml
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "compare the rendering with the committed files instead of writing them; exit 1 if one differs")
	root := fs.String("root", "../..", "the repository's root")
	config := fs.String("config", "", "a jsonnet `file` whose object is merged over the mixin ({ _config+:: {...} }); needs -out")
	out := fs.String("out", "", "write "+outRules+" and "+outDashboard+" into `dir` (made if missing) instead of the committed files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *check && (*config != "" || *out != ""):
		return errors.New("-check compares the default rendering with the committed files; it takes neither -config nor -out")
	case *config != "" && *out == "":
		return errors.New("-config needs -out: the committed files are the default rendering")
	}
	if *out != "" {
		override := "{}"
		if *config != "" {
			abs, err := filepath.Abs(*config)
			if err != nil {
				return err
			}
			if _, err := os.Stat(abs); err != nil {
				return fmt.Errorf("-config: %w", err)
			}
			q, _ := json.Marshal(abs) // a JSON string is a jsonnet string
			override = "import " + string(q)
		}
		files, err := render(*root, override)
		if err != nil {
			return err
		}
		if *config != "" {
			note := fmt.Sprintf("#\n# Rendered with the _config of %s (deploy/render -config); the tests\n# named above are written for the default _config.\n", filepath.Base(*config))
			files[rulesFile] = append([]byte(rulesHeader+note), files[rulesFile][len(rulesHeader):]...)
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		for name, from := range map[string]string{outRules: rulesFile, outDashboard: dashboardFile} {
			path := filepath.Join(*out, name)
			if err := os.WriteFile(path, files[from], 0o644); err != nil {
				return err
			}
		}
		for _, name := range []string{outRules, outDashboard} {
			fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*out, name))
		}
		return nil
	}
	files, err := Render(*root)
	if err != nil {
		return err
	}
	var stale []string
	for _, name := range []string{rulesFile, dashboardFile, mixinDashboardFile} {
		path := filepath.Join(*root, name)
		if *check {
			old, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(old, files[name]) {
				stale = append(stale, name)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s (%d bytes)\n", name, len(files[name]))
	}
	if len(stale) > 0 {
		return fmt.Errorf("not what the mixin renders: %v; run go run . in deploy/render and commit the files", stale)
	}
	if *check {
		fmt.Fprintf(stdout, "%s, %s and %s are what deploy/mixin renders\n", rulesFile, dashboardFile, mixinDashboardFile)
	}
	return nil
}

// Render evaluates the mixin under root and returns the rendered files by
// their path relative to root.
func Render(root string) (map[string][]byte, error) { return render(root, "{}") }

// render is Render with the mixin extended by the jsonnet object override
// (a user's `+ { _config+:: {…} }`).
// It refuses an override with a field the mixin does not have, at the top
// or in _config: a typo would otherwise be ignored.
func render(root, override string) (map[string][]byte, error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(root, mixinDir)}})
	vm.StringOutput = true
	vm.ExtCode("override", override)
	unknown, err := vm.EvaluateAnonymousSnippet("render-check-override.jsonnet", `
local base = import 'mixin.libsonnet';
local o = std.extVar('override');
local extra(a, b) = std.setDiff(std.set(std.objectFieldsAll(a)), std.set(std.objectFieldsAll(b)));
if !std.isObject(o) then error 'not an object'
else std.join(', ', extra(o, base) + ['_config.' + f for f in extra((base + o)._config, base._config)])
`)
	if err != nil {
		return nil, fmt.Errorf("the override: %w", err)
	}
	if unknown = strings.TrimSpace(unknown); unknown != "" {
		return nil, fmt.Errorf("the override has fields the mixin does not: %s (write { _config+:: { … } } with the fields of deploy/mixin/config.libsonnet)", unknown)
	}
	rules, err := vm.EvaluateAnonymousSnippet("render-rules.jsonnet", `
local m = (import 'mixin.libsonnet') + std.extVar('override');
std.manifestYamlDoc({ groups: m.prometheusRules.groups + m.prometheusAlerts.groups }, indent_array_in_object=true, quote_keys=false)
`)
	if err != nil {
		return nil, fmt.Errorf("the mixin's rules: %w", err)
	}
	cfgJSON, err := vm.EvaluateAnonymousSnippet("render-config.jsonnet", `std.manifestJsonEx(((import 'mixin.libsonnet') + std.extVar('override'))._config, '  ')`)
	if err != nil {
		return nil, fmt.Errorf("the mixin's _config: %w", err)
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader([]byte(cfgJSON)))
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("the mixin's _config: %w", err)
	}
	if cfg.DashboardUID == "" || cfg.JobLabel == "" || cfg.InstanceLabel == "" {
		return nil, errors.New("the mixin's _config lacks dashboardUID, jobLabel or instanceLabel")
	}
	dash, err := Dashboard(cfg)
	if err != nil {
		return nil, fmt.Errorf("the dashboard: %w", err)
	}
	return map[string][]byte{
		rulesFile:          append([]byte(rulesHeader), rules...),
		dashboardFile:      dash,
		mixinDashboardFile: dash,
	}, nil
}
