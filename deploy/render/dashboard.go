package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/stormguard/stormguard/metrics/schema"
)

// Config is the part of the mixin's _config the dashboard reads.
type Config struct {
	StormguardSelector string   `json:"stormguardSelector"`
	ClusterLabel       string   `json:"clusterLabel"`
	NamespaceLabel     string   `json:"namespaceLabel"`
	JobLabel           string   `json:"jobLabel"`
	InstanceLabel      string   `json:"instanceLabel"`
	RouteLabel         string   `json:"routeLabel"`
	DashboardUID       string   `json:"dashboardUID"`
	DashboardTitle     string   `json:"dashboardTitle"`
	DashboardTags      []string `json:"dashboardTags"`
	DashboardRefresh   string   `json:"dashboardRefresh"`
	DashboardTimezone  string   `json:"dashboardTimezone"`
}

// q holds what every query of the dashboard shares.
type q struct {
	c Config
}

// sel returns the matchers of every query: the mixin's selector, then
// each variable's label (an "All" selects every value, and a series
// without the label).
func (x q) sel(extra ...string) string {
	var ms []string
	if x.c.StormguardSelector != "" {
		ms = append(ms, x.c.StormguardSelector)
	}
	for _, l := range x.labels() {
		ms = append(ms, fmt.Sprintf(`%s=~"$%s"`, l, l))
	}
	return "{" + strings.Join(append(ms, extra...), ", ") + "}"
}

// labels are the labels the dashboard has a variable for, outermost first.
func (x q) labels() []string {
	return []string{x.c.ClusterLabel, x.c.NamespaceLabel, x.c.JobLabel, x.c.InstanceLabel, schema.LabelTarget, x.c.RouteLabel}
}

// rate is sum by (by) of the rate of a counter's series.
func (x q) rate(m schema.Metric, suffix, by string, extra ...string) string {
	return fmt.Sprintf("sum by (%s) (rate(%s%s%s[$__rate_interval]))", by, m.Name, suffix, x.sel(extra...))
}

// agg is op by (by) of a gauge.
func (x q) agg(op string, m schema.Metric, by string, extra ...string) string {
	return fmt.Sprintf("%s by (%s) (%s%s)", op, by, m.Name, x.sel(extra...))
}

// The dashboard's data source: its variable.
var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// query is a query with its legend; the legend names the labels of the
// configuration (see legend).
func (x q) query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(x.legend(legend))
}

// legend returns a legend written with the default label names
// ({{instance}}, {{route}}) with the configuration's instead.
func (x q) legend(s string) string {
	return strings.NewReplacer("{{instance}}", "{{"+x.c.InstanceLabel+"}}", "{{route}}", "{{"+x.c.RouteLabel+"}}").Replace(s)
}

func graph(title, unit, desc string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).Unit(unit).Min(0).Span(12).Height(8)
	for i, t := range queries {
		p.WithTarget(t.RefId(string(rune('A' + i))))
	}
	return p
}

// mapping returns value mappings from a number's text to a text and a
// color.
func mapping(pairs ...[3]string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i, p := range pairs {
		opts[p[0]] = dashboard.ValueMappingResult{Text: cog.ToPtr(p[1]), Color: cog.ToPtr(p[2]), Index: cog.ToPtr(int32(i))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// steps returns absolute thresholds: the base color, then value, color
// pairs.
func steps(base string, more ...any) *dashboard.ThresholdsConfigBuilder {
	s := []dashboard.Threshold{{Color: base}}
	for i := 0; i+1 < len(more); i += 2 {
		s = append(s, dashboard.Threshold{Value: cog.ToPtr(more[i].(float64)), Color: more[i+1].(string)})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(s)
}

func (x q) dialStat(title, desc, expr, unit string, maps []dashboard.ValueMapping, th *dashboard.ThresholdsConfigBuilder) *stat.PanelBuilder {
	p := stat.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).Unit(unit).Span(6).Height(6).
		WithTarget(x.query(expr, "{{instance}}").Instant().RefId("A")).
		ColorMode(common.BigValueColorModeBackground).GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(th)
	if maps != nil {
		p.Mappings(maps)
	}
	return p
}

// Dashboard builds the dashboard for the mixin's configuration c and
// returns it as Grafana imports it, indented, with a final newline.
func Dashboard(c Config) ([]byte, error) {
	x := q{c}
	inst := c.InstanceLabel
	var (
		offered  = schema.ServerOffered
		requests = schema.ServerRequests
		attempts = schema.ClientAttempts
		duration = schema.ClientRequestDuration
	)
	throughput := func(by string) string { return x.rate(requests, "", by, `outcome=~"goodput|failed|wasted"`) }
	goodput := func(by string) string { return x.rate(requests, "", by, `outcome="goodput"`) }
	wasted := func(by string) string { return x.rate(requests, "", by, `outcome="wasted"`) }
	retryShare := func(by string) string {
		return x.rate(offered, "", by, `try="retry"`) + "\n  /\n" + x.rate(offered, "", by)
	}
	wastedShare := func(by string) string { return wasted(by) + "\n  /\n" + throughput(by) }

	b := dashboard.NewDashboardBuilder(c.DashboardTitle).
		Uid(c.DashboardUID).
		Description("stormguard's metrics (docs/metrics.md) and what to do about them (docs/oncall.md): the kill switch's dials in each process; what each server is offered and what becomes of it, per service, per instance and per route; what each client sends and how its requests end. Generated from deploy/mixin by deploy/render.").
		Tags(c.DashboardTags).
		Timezone(c.DashboardTimezone).
		Refresh(c.DashboardRefresh).
		Time("now-1h", "now").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Editable()

	b.WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	// One variable per label, each listing the values the ones before it
	// leave (cluster, then namespace, …), all of them by default.
	for i, l := range x.labels() {
		var ms []string
		if c.StormguardSelector != "" {
			ms = append(ms, c.StormguardSelector)
		}
		for _, outer := range x.labels()[:i] {
			ms = append(ms, fmt.Sprintf(`%s=~"$%s"`, outer, outer))
		}
		src := fmt.Sprintf(`{__name__=~"%s|%s|%s", %s}`, offered.Name, attempts.Name, schema.DialsRetriesOff.Name, strings.Join(ms, ", "))
		if len(ms) == 0 {
			src = fmt.Sprintf(`{__name__=~"%s|%s|%s"}`, offered.Name, attempts.Name, schema.DialsRetriesOff.Name)
		}
		lq := fmt.Sprintf("label_values(%s, %s)", src, l)
		b.WithVariable(dashboard.NewQueryVariableBuilder(l).Label(l).Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr(lq)}).Definition(lq).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).IncludeAll(true).AllValue(".*").
			Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("All")}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")}}))
	}

	// The kill switch, per process.
	b.WithRow(dashboard.NewRowBuilder("Kill switch and policy file: the dials and the policy of each process"))
	b.WithPanel(x.dialStat("Retries", "Whether the kill switch turns retries off in each process (stormguard_dials_retries_off). OFF is what `stormguard fleet set --retries-off` or the admin endpoint asked for; a process that still shows on did not get it.",
		x.agg("max", schema.DialsRetriesOff, inst), "none",
		mapping([3]string{"0", "on", "green"}, [3]string{"1", "OFF", "red"}), steps("green", 1.0, "red")))
	b.WithPanel(x.dialStat("Shed", "The fraction of requests each process's kill switch sheds (stormguard_dials_shed_ratio).",
		x.agg("max", schema.DialsShedRatio, inst), "percentunit", nil, steps("green", 0.000001, "red")))
	b.WithPanel(x.dialStat("Concurrency limit override", "The limit the kill switch pins each process's limiters to (stormguard_dials_limit_override_requests); none: the adaptive limit rules.",
		x.agg("max", schema.DialsLimitOverride, inst), "none",
		mapping([3]string{"0", "none", "green"}), steps("green", 1.0, "orange")))
	lastChange := fmt.Sprintf("max by (%s, %s) (%s%s) * 1000 > 0", inst, schema.LabelOrigin, schema.DialsLastChange.Name, x.sel())
	b.WithPanel(table.NewPanelBuilder().Title("Last change, and where it came from").
		Description("When each process's dials last changed (stormguard_dials_last_change_timestamp_seconds) and its origin: local (this process's admin endpoint or code) or fleet (the fleet's dials in Redis). StormguardKillSwitchLeftOn warns when a dial stays turned for an hour.").
		Datasource(ds).Span(6).Height(6).Unit("dateTimeAsIso").
		WithTarget(x.query(lastChange, "").Instant().Format(prometheus.PromQueryFormatTable).RefId("A")).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true},
			"renameByName":  map[string]string{"Value": "changed at", inst: inst, schema.LabelOrigin: schema.LabelOrigin},
		}}))
	b.WithPanel(graph("Dials over time, per instance", "none",
		"Retries off (1) and the fraction shed in each process over time: when a change took effect, and where it did not.",
		x.query(x.agg("max", schema.DialsRetriesOff, inst), "{{instance}} retries off"),
		x.query(x.agg("max", schema.DialsShedRatio, inst), "{{instance}} shed")).Span(24))

	// The policy file, per process.
	b.WithPanel(table.NewPanelBuilder().Title("Policy file version per instance").
		Description("The version of the policy file each process runs (stormguard_policy_version_info: the first 12 hex digits of the file's SHA-256), for a service that follows its file with policyfile.Live. After a change, every instance should show the new version; one that does not refused it or did not see it.").
		Datasource(ds).Span(12).Height(6).
		WithTarget(x.query(fmt.Sprintf("max by (target, %s, %s) (%s%s)", inst, schema.LabelVersion, schema.PolicyVersion.Name, x.sel()), "").Instant().Format(prometheus.PromQueryFormatTable).RefId("A")).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "Value": true},
		}}))
	b.WithPanel(graph("Policy file reloads", "short",
		"New versions of the policy file read, per instance: applied, or refused (invalid: the last good version keeps running; its FILE:LINE errors are in the process's log).",
		x.query(fmt.Sprintf("sum by (target, %s, %s) (increase(%s%s[$__rate_interval]))", inst, schema.LabelResult, schema.PolicyReloads.Name, x.sel()), "{{target}} {{instance}} {{result}}")).Height(6))

	// The server, per service.
	b.WithRow(dashboard.NewRowBuilder("Server: what each service is offered, and what becomes of it"))
	b.WithPanel(graph("Offered load, first tries and retries", "reqps",
		"Requests arriving at the server per second, first tries and retries apart (stormguard_server_offered_total). Retries that grow while first tries do not are the storm's signature.",
		x.query(x.rate(offered, "", "target, try"), "{{target}} {{try}}")))
	b.WithPanel(graph("Throughput, goodput and wasted work", "reqps",
		"Throughput: handlers that ran to the end, whatever their fate. Goodput: those that succeeded while their caller was still waiting. Wasted: those that finished after the deadline passed or the caller left. Throughput at full with goodput near zero is the metastable state.",
		x.query(throughput("target"), "{{target}} throughput"),
		x.query(goodput("target"), "{{target}} goodput"),
		x.query(x.rate(requests, "", "target, reason", `outcome="wasted"`), "{{target}} wasted ({{reason}})")))
	b.WithPanel(graph("Retry share and wasted share", "percentunit",
		"The share of the offered load that is retries (StormguardRetryStorm pages above 20 % while goodput falls) and of the throughput that is wasted work (StormguardGoodputCollapsed pages above 50 %).",
		x.query(retryShare("target"), "{{target}} retries"),
		x.query(wastedShare("target"), "{{target}} wasted")).Max(1))
	b.WithPanel(graph("Shed, by reason", "reqps",
		"Requests refused for overload before they ran: queue-full, evicted (by a request served first), queue-timeout (adaptive LIFO), kill-switch, throttled, key-busy.",
		x.query(x.rate(requests, "", "target, reason", `outcome="shed"`), "{{target}} {{reason}}")))
	b.WithPanel(graph("Expired and canceled, by reason", "reqps",
		"Requests dropped before they ran because their deadline had passed (on arrival, or while queued), and those whose caller left while queued.",
		x.query(x.rate(requests, "", "target, reason", `outcome="expired"`), "{{target}} expired {{reason}}"),
		x.query(x.rate(requests, "", "target", `outcome="canceled"`), "{{target}} canceled")))
	b.WithPanel(graph("Concurrency limit, in flight, queued", "short",
		"The adaptive concurrency limit, the requests running and those waiting in the admission queue, summed over the instances.",
		x.query(x.agg("sum", schema.ServerConcurrencyLimit, "target"), "{{target}} limit"),
		x.query(x.agg("sum", schema.ServerInFlight, "target"), "{{target}} in flight"),
		x.query(x.agg("sum", schema.ServerQueued, "target"), "{{target}} queued")))
	b.WithPanel(graph("Queue wait, p50 and p99", "s",
		"How long admitted requests waited for a slot.",
		x.query(fmt.Sprintf("histogram_quantile(0.5, %s)", x.rate(schema.ServerQueueWait, "_bucket", "target, le")), "{{target}} p50"),
		x.query(fmt.Sprintf("histogram_quantile(0.99, %s)", x.rate(schema.ServerQueueWait, "_bucket", "target, le")), "{{target}} p99")))

	// The server, per instance.
	byInst := "target, " + inst
	b.WithRow(dashboard.NewRowBuilder("Server: per instance"))
	b.WithPanel(graph("Offered load per instance", "reqps",
		"Requests arriving at each instance, first tries and retries together: an instance offered far more than its peers is where a load balancer or a retry policy sends the storm.",
		x.query(x.rate(offered, "", byInst), "{{target}} {{instance}}")))
	b.WithPanel(graph("Goodput per instance", "reqps",
		"Requests each instance answered successfully while their caller waited.",
		x.query(goodput(byInst), "{{target}} {{instance}}")))
	b.WithPanel(graph("Retry share per instance", "percentunit",
		"The share of each instance's offered load that is retries.",
		x.query(retryShare(byInst), "{{target}} {{instance}}")).Max(1))
	b.WithPanel(graph("Wasted share per instance", "percentunit",
		"The share of each instance's finished work that nobody waited for.",
		x.query(wastedShare(byInst), "{{target}} {{instance}}")).Max(1))
	b.WithPanel(graph("Concurrency limit and in flight per instance", "short",
		"Each instance's adaptive limit and the requests it runs: an instance pinned at its limit is saturated.",
		x.query(x.agg("max", schema.ServerConcurrencyLimit, byInst), "{{target}} {{instance}} limit"),
		x.query(x.agg("max", schema.ServerInFlight, byInst), "{{target}} {{instance}} in flight")))
	b.WithPanel(graph("Shed and expired per instance", "reqps",
		"Requests each instance refused before running them (shed, expired).",
		x.query(x.rate(requests, "", byInst+", outcome", `outcome=~"shed|expired"`), "{{target}} {{instance}} {{outcome}}")))

	// The server, per route.
	byRoute := "target, " + c.RouteLabel
	b.WithRow(dashboard.NewRowBuilder("Server: per route"))
	routeNote := fmt.Sprintf(" Routes are told apart by the %s label, which a service sets when it wraps each route (a group of handlers) with its own stormguard server (docs/metrics.md); without it, a service is one route.", c.RouteLabel)
	b.WithPanel(graph("Offered load per route", "reqps",
		"Requests arriving per route, first tries and retries apart."+routeNote,
		x.query(x.rate(offered, "", byRoute+", try"), "{{target}} {{route}} {{try}}")))
	b.WithPanel(graph("Goodput and wasted per route", "reqps",
		"Goodput and wasted work per route."+routeNote,
		x.query(goodput(byRoute), "{{target}} {{route}} goodput"),
		x.query(wasted(byRoute), "{{target}} {{route}} wasted")))
	b.WithPanel(graph("Retry share per route", "percentunit",
		"The share of each route's offered load that is retries."+routeNote,
		x.query(retryShare(byRoute), "{{target}} {{route}}")).Max(1))
	b.WithPanel(graph("Shed per route, by reason", "reqps",
		"Requests each route refused for overload, by reason."+routeNote,
		x.query(x.rate(requests, "", byRoute+", reason", `outcome="shed"`), "{{target}} {{route}} {{reason}}")))

	// The client.
	b.WithRow(dashboard.NewRowBuilder("Client: what it sends, and how its requests end"))
	b.WithPanel(graph("Attempts sent, first tries and retries", "reqps",
		"The load this client offers its dependency (target is the dependency): attempts per second, first tries and retries apart.",
		x.query(x.rate(attempts, "", "target, try"), "{{target}} {{try}}")))
	b.WithPanel(graph("Attempts per request", "short",
		"Attempts sent per request that ended: 1 when nothing is retried; a budget of 10 % keeps it near 1.1 whatever the dependency does.",
		x.query(x.rate(attempts, "", "target")+"\n  /\n"+x.rate(duration, "_count", "target"), "{{target}}")))
	b.WithPanel(graph("Requests: success, and gave up by reason", "reqps",
		"Requests that ended per second: success (the client's goodput) or gave up, with the reason retrying stopped (attempts-exhausted, budget-exhausted, deadline, not-retryable, server-said-stop, retries-disabled, canceled, retry-declined, breaker-open).",
		x.query(x.rate(duration, "_count", "target", `outcome="success"`), "{{target}} success"),
		x.query(x.rate(duration, "_count", "target, reason", `outcome="gave-up"`), "{{target}} gave up: {{reason}}")))
	b.WithPanel(graph("Request latency, first attempt to outcome, p50 and p99", "s",
		"From the start of a request's first attempt to its outcome, waits between attempts included, by outcome.",
		x.query(fmt.Sprintf("histogram_quantile(0.5, %s)", x.rate(duration, "_bucket", "target, outcome, le")), "{{target}} {{outcome}} p50"),
		x.query(fmt.Sprintf("histogram_quantile(0.99, %s)", x.rate(duration, "_bucket", "target, outcome, le")), "{{target}} {{outcome}} p99")))
	b.WithPanel(graph("Retry budget level per instance", "percentunit",
		"Tokens in each instance's retry budget over its capacity. Near 0 the budget refuses retries: requests give up with budget-exhausted (StormguardRetryBudgetExhausted).",
		x.query(fmt.Sprintf("min by (%s) (%s%s / %s%s)", byInst, schema.ClientBudgetTokens.Name, x.sel(), schema.ClientBudgetCapacity.Name, x.sel()), "{{target}} {{instance}}")).Max(1))
	b.WithPanel(graph("Circuit breaker state", "none",
		"The worst state of the target's breakers (0 closed, 1 half-open, 2 open) and their transitions.",
		x.query(x.agg("max", schema.BreakerState, "target"), "{{target}} state"),
		x.query(fmt.Sprintf("sum by (target) (increase(%s%s[$__rate_interval]))", schema.BreakerTransitions.Name, x.sel()), "{{target}} transitions")).
		Mappings(mapping([3]string{"0", "closed", "green"}, [3]string{"1", "half-open", "yellow"}, [3]string{"2", "open", "red"})))

	d, err := b.Build()
	if err != nil {
		return nil, err
	}
	// Number the panels and rows in order, so that each has the id a link
	// to it (viewPanel=N) needs.
	for i := range d.Panels {
		id := uint32(i + 1)
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

var _ cog.Builder[variants.Dataquery] = (*prometheus.DataqueryBuilder)(nil)
