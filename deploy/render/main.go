// Command render renders stormguard's monitoring mixin (deploy/mixin) into
// the files an operator deploys: the Prometheus rules
// (deploy/prometheus/stormguard.rules.yml, evaluated from the jsonnet with
// go-jsonnet) and the Grafana dashboard (deploy/grafana/stormguard.json,
// built with Grafana's foundation SDK from the mixin's _config and the
// metric names of metrics/schema).
//
// It is its own module, like bench/, so that go-jsonnet and the SDK never
// reach the module graph of a library user.
//
// Usage, from this directory:
//
//	go run .           render and write the files
//	go run . -check    render and fail (exit 1) if a committed file differs
//
// CI runs -check.
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

	jsonnet "github.com/google/go-jsonnet"
)

// The files, relative to the repository's root.
const (
	mixinDir      = "deploy/mixin"
	rulesFile     = "deploy/prometheus/stormguard.rules.yml"
	dashboardFile = "deploy/grafana/stormguard.json"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	files, err := Render(*root)
	if err != nil {
		return err
	}
	var stale []string
	for _, name := range []string{rulesFile, dashboardFile} {
		path := filepath.Join(*root, name)
		if *check {
			old, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(old, files[name]) {
				stale = append(stale, name)
			}
			continue
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
		fmt.Fprintf(stdout, "%s and %s are what deploy/mixin renders\n", rulesFile, dashboardFile)
	}
	return nil
}

// Render evaluates the mixin under root and returns the rendered files by
// their path relative to root.
func Render(root string) (map[string][]byte, error) { return render(root, "{}") }

// render is Render with the mixin extended by the jsonnet object override
// (a user's `+ { _config+:: {…} }`).
func render(root, override string) (map[string][]byte, error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(root, mixinDir)}})
	vm.StringOutput = true
	vm.ExtCode("override", override)
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
		rulesFile:     append([]byte(rulesHeader), rules...),
		dashboardFile: dash,
	}, nil
}
