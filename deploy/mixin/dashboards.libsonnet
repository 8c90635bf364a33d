// The dashboard. It is built in Go with Grafana's foundation SDK
// (deploy/render/dashboard.go), not in jsonnet, so jsonnet cannot rebuild it
// from a user's _config. What this file gives is the rendering made with
// the DEFAULT _config, dashboards/stormguard.json (a copy of
// deploy/grafana/stormguard.json that deploy/render writes and CI checks),
// whatever _config the importer sets. Its queries select only through its
// variables (cluster, namespace, job, instance, target, route, each "All" =
// .* at first): a _config's stormguardSelector is not in them, so "All"
// shows every stormguard_* series of the data source until you pick your
// jobs; and with other label names (clusterLabel: 'k8s_cluster', say) the
// default's variable of that name lists nothing and matches every series,
// so the views are not split by your label and the legends name instance
// and route. The recording rules and the alerts, which are jsonnet, do
// follow the importer's _config.
//
// For a dashboard with your _config, render it with the Go tool from a
// checkout:
//
//   cd deploy/render && go run . -config my-config.jsonnet -out DIR
//
// where my-config.jsonnet holds { _config+:: { … } }; DIR receives
// stormguard.rules.yml and stormguard.json, both with it (docs/oncall.md).
{
  grafanaDashboards+:: {
    'stormguard.json': import 'dashboards/stormguard.json',
  },
}
