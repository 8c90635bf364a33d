// The dashboard is built in Go with Grafana's foundation SDK
// (deploy/render/dashboard.go), from this mixin's _config, and rendered to
// deploy/grafana/stormguard.json; a jsonnet user of the mixin gets that
// rendering, made with the default _config (its queries select through the
// dashboard's variables, so the defaults fit any selector).
{
  grafanaDashboards+:: {
    'stormguard.json': import '../grafana/stormguard.json',
  },
}
