// stormguard's monitoring mixin: recording rules, alerts and a Grafana
// dashboard for the series of metrics/schema (docs/metrics.md), with the
// conventions of the monitoring-mixins ecosystem (kubernetes-mixin,
// node-mixin): a _config of selectors, labels and thresholds;
// prometheusRules, prometheusAlerts and grafanaDashboards.
//
// Rendered by deploy/render (go run . in that directory) into
// deploy/prometheus/stormguard.rules.yml and deploy/grafana/stormguard.json
// (and the mixin's copy of the dashboard, dashboards/stormguard.json); CI
// renders it again and fails if the committed files differ. With a _config
// of your own: go run . -config FILE -out DIR (docs/oncall.md).
//
// A jsonnet-bundler package with no dependencies (jsonnetfile.json): vendored
// alone, this directory is whole. Import it by its full path,
// 'github.com/stormguard/stormguard/deploy/mixin/mixin.libsonnet'.
(import 'config.libsonnet') +
(import 'rules.libsonnet') +
(import 'alerts.libsonnet') +
(import 'dashboards.libsonnet')
