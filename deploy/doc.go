// Package deploy holds what an operator deploys beside a service that uses
// stormguard, rendered from one source, the monitoring mixin in
// deploy/mixin (jsonnet, with the conventions of kubernetes-mixin: a
// _config of selectors, labels and thresholds):
//
//	prometheus/stormguard.rules.yml       recording rules and alerts (critical, warning), with runbook_url
//	prometheus/stormguard.rules.test.yml  their promtool tests
//	grafana/stormguard.json               the Grafana dashboard
//
// deploy/render, a module of its own (so that go-jsonnet and Grafana's
// foundation SDK never reach a library user's build), renders the rules
// with go-jsonnet and builds the dashboard with the foundation SDK from
// the mixin's _config and the names of package schema (metrics/schema),
// with a copy of the dashboard inside the mixin
// (mixin/dashboards/stormguard.json, for its grafanaDashboards: the
// mixin, a jsonnet-bundler package with no dependencies, is whole when
// vendored alone); CI renders again and fails when a committed file
// differs. The committed files are the default _config's; deploy/render
// -config FILE -out DIR renders both with a user's. The tests of
// this package check that both name only the schema's series, that every
// alert has a runbook in docs/oncall.md, and that promtool parses every
// query of the dashboard. There is no Go API here.
package deploy
