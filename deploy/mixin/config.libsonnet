// The mixin's configuration: every selector, label set and threshold the
// rules, the alerts and the dashboard use. Override it the usual way, with
// the mixin vendored by jsonnet-bundler
// (jb install github.com/stormguard/stormguard/deploy/mixin@main) and
// jsonnet -J vendor:
//
//   (import 'github.com/stormguard/stormguard/deploy/mixin/mixin.libsonnet') + {
//     _config+:: { stormguardSelector: 'job=~"shop|orders"' },
//   }
//
// The rules and the alerts follow it; the dashboard that jsonnet returns is
// the default rendering (see dashboards.libsonnet): for one with this
// _config, render with deploy/render -config FILE -out DIR.
//
// The defaults fit kube-prometheus: its scrape configs set namespace, job
// (the Service), pod and instance; a multi-cluster setup adds cluster.
{
  _config+:: {
    // Label matchers that select stormguard's series (without braces); every
    // rule and panel starts from them. Empty: every series named
    // stormguard_*, whatever job exports it.
    stormguardSelector: '',

    // The labels that say where a series comes from. A service as a whole is
    // (cluster, namespace, job); one process of it adds instance. Rules keep
    // these, plus the schema's target, and sum the rest away.
    clusterLabel: 'cluster',
    namespaceLabel: 'namespace',
    jobLabel: 'job',
    instanceLabel: 'instance',

    // An optional label that splits a service's series by route (a group of
    // handlers with its own stormguard server, registered with
    // prometheus.WrapRegistererWith or otelx's extra attributes): the
    // dashboard's per-route views group by it; series without it are one
    // route, "".
    routeLabel: 'route',

    // The window of every rate. Scrape at least every minute for it.
    rateInterval: '5m',

    // Where each alert's runbook is: %s is the alert's name in lower case
    // (the anchor of its heading in docs/oncall.md).
    runbookURLPattern: 'https://github.com/stormguard/stormguard/blob/main/docs/oncall.md#%s',

    // Thresholds of the alerts (docs/oncall.md says why each is where it is).
    stormRetryShare: 0.2,  // retries over what a service is offered
    stormGoodputDrop: 0.8,  // goodput below this share of its best in stormPeakWindow
    stormPeakWindow: '30m',
    collapseWastedShare: 0.5,  // wasted work over the work finished
    collapseMinThroughput: 1,  // requests a second, below which nothing is judged
    killSwitchLeftOnAfter: 3600,  // seconds a dial may stay turned before a warning

    // The dashboard.
    dashboardUID: 'stormguard',
    dashboardTitle: 'stormguard: offered load, goodput, wasted work and the kill switch',
    dashboardTags: ['stormguard'],
    dashboardRefresh: '30s',
    dashboardTimezone: 'browser',
  },
}
