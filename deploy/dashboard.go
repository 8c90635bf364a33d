// Package deploy generates what an operator deploys beside a service that
// uses stormguard: the Grafana dashboard grafana/stormguard.json, built
// here from the metric names of package schema (metrics/schema) so that
// its queries name only series the exporters export. The Prometheus rules
// beside it (prometheus/stormguard.rules.yml) are written by hand and
// tested with promtool (prometheus/stormguard.rules.test.yml); the tests of
// this package check that both name only the schema's series.
//
// Regenerate the dashboard with go test ./deploy -update.
package deploy

import (
	"encoding/json"
	"fmt"

	"github.com/stormguard/stormguard/metrics/schema"
)

// The dashboard's JSON model (the part of Grafana's that it uses).
type (
	Dashboard struct {
		UID           string      `json:"uid"`
		Title         string      `json:"title"`
		Description   string      `json:"description"`
		Tags          []string    `json:"tags"`
		Timezone      string      `json:"timezone"`
		SchemaVersion int         `json:"schemaVersion"`
		Version       int         `json:"version"`
		Refresh       string      `json:"refresh"`
		Time          TimeRange   `json:"time"`
		Templating    Templating  `json:"templating"`
		Annotations   Annotations `json:"annotations"`
		Panels        []Panel     `json:"panels"`
	}
	TimeRange struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	Templating struct {
		List []Variable `json:"list"`
	}
	Annotations struct {
		List []any `json:"list"`
	}
	Variable struct {
		Name       string      `json:"name"`
		Label      string      `json:"label"`
		Type       string      `json:"type"`
		Query      string      `json:"query"`
		Datasource *Datasource `json:"datasource,omitempty"`
		Refresh    int         `json:"refresh,omitempty"`
		Multi      bool        `json:"multi,omitempty"`
		IncludeAll bool        `json:"includeAll,omitempty"`
		AllValue   string      `json:"allValue,omitempty"`
	}
	Datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	Panel struct {
		ID          int          `json:"id"`
		Type        string       `json:"type"`
		Title       string       `json:"title"`
		Description string       `json:"description,omitempty"`
		GridPos     GridPos      `json:"gridPos"`
		Datasource  *Datasource  `json:"datasource,omitempty"`
		Targets     []Target     `json:"targets,omitempty"`
		FieldConfig *FieldConfig `json:"fieldConfig,omitempty"`
		Collapsed   *bool        `json:"collapsed,omitempty"`
		Panels      []Panel      `json:"panels,omitempty"` // a row's, when collapsed
	}
	GridPos struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	}
	Target struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	}
	FieldConfig struct {
		Defaults  FieldDefaults `json:"defaults"`
		Overrides []any         `json:"overrides"`
	}
	FieldDefaults struct {
		Unit     string    `json:"unit"`
		Min      *float64  `json:"min,omitempty"`
		Max      *float64  `json:"max,omitempty"`
		Mappings []Mapping `json:"mappings,omitempty"`
	}
	Mapping struct {
		Type    string                  `json:"type"`
		Options map[string]MappingValue `json:"options"`
	}
	MappingValue struct {
		Text  string `json:"text"`
		Color string `json:"color"`
		Index int    `json:"index"`
	}
)

// The breaker's states as assumed for the value mapping of its panel:
// stormguard_breaker_state is 0 closed, 1 half-open, 2 open (registered by
// the breaker's collector, metrics/breaker.go).
var breakerStates = []MappingValue{{"closed", "green", 0}, {"half-open", "yellow", 1}, {"open", "red", 2}}

// ds is the datasource every panel queries: the dashboard's variable.
var ds = &Datasource{Type: "prometheus", UID: "${datasource}"}

// rate is the rate of a counter's series selected by sel over Grafana's
// rate interval, summed by the labels by.
func rate(m schema.Metric, suffix, sel, by string) string {
	return fmt.Sprintf("sum by (%s) (rate(%s%s{target=~\"$target\"%s}[$__rate_interval]))", by, m.Name, suffix, sel)
}

// New returns the dashboard.
func New() Dashboard {
	var (
		offered  = schema.ServerOffered
		requests = schema.ServerRequests
		attempts = schema.ClientAttempts
		duration = schema.ClientRequestDuration
	)
	throughput := rate(requests, "", `,outcome=~"goodput|failed|wasted"`, "target")
	goodput := rate(requests, "", `,outcome="goodput"`, "target")
	zero, one := 0.0, 1.0
	unit := func(u string) *FieldConfig {
		return &FieldConfig{Defaults: FieldDefaults{Unit: u, Min: &zero}, Overrides: []any{}}
	}
	ratio := &FieldConfig{Defaults: FieldDefaults{Unit: "percentunit", Min: &zero, Max: &one}, Overrides: []any{}}
	breaker := &FieldConfig{Defaults: FieldDefaults{Unit: "none", Min: &zero, Mappings: []Mapping{{Type: "value", Options: map[string]MappingValue{}}}}, Overrides: []any{}}
	for _, s := range breakerStates {
		breaker.Defaults.Mappings[0].Options[fmt.Sprint(s.Index)] = s
	}
	t := func(expr, legend string) Target { return Target{Expr: expr, LegendFormat: legend} }

	rows := []struct {
		title  string
		panels []Panel
	}{
		{"Server: what it is offered, and what becomes of it", []Panel{
			{Title: "Offered load, first tries and retries", FieldConfig: unit("reqps"),
				Description: "Requests arriving at the server per second, first tries and retries apart (stormguard_server_offered_total). Retries that grow while first tries do not are the storm's signature.",
				Targets:     []Target{t(rate(offered, "", "", "target, try"), "{{target}} {{try}}")}},
			{Title: "Throughput, goodput and wasted work", FieldConfig: unit("reqps"),
				Description: "Throughput: handlers that ran to the end, whatever their fate. Goodput: those that succeeded while their caller was still waiting. Wasted: those that finished after the deadline passed or the caller left. Throughput at full with goodput near zero is the metastable state.",
				Targets: []Target{
					t(throughput, "{{target}} throughput"),
					t(goodput, "{{target}} goodput"),
					t(rate(requests, "", `,outcome="wasted"`, "target, reason"), "{{target}} wasted ({{reason}})"),
				}},
			{Title: "Retry share and wasted share", FieldConfig: ratio,
				Description: "The share of the offered load that is retries, and of the throughput that is wasted work: the two inputs of the StormguardRetryStorm alert.",
				Targets: []Target{
					t(rate(offered, "", `,try="retry"`, "target")+" / "+rate(offered, "", "", "target"), "{{target}} retries"),
					t(rate(requests, "", `,outcome="wasted"`, "target")+" / "+throughput, "{{target}} wasted"),
				}},
			{Title: "Shed, by reason", FieldConfig: unit("reqps"),
				Description: "Requests refused for overload before they ran: queue-full, evicted (by a request served first), queue-timeout (adaptive LIFO), kill-switch, throttled.",
				Targets:     []Target{t(rate(requests, "", `,outcome="shed"`, "target, reason"), "{{target}} {{reason}}")}},
			{Title: "Expired and canceled, by reason", FieldConfig: unit("reqps"),
				Description: "Requests dropped before they ran because their deadline had passed (on arrival, or while queued), and those whose caller left while queued.",
				Targets: []Target{
					t(rate(requests, "", `,outcome="expired"`, "target, reason"), "{{target}} expired {{reason}}"),
					t(rate(requests, "", `,outcome="canceled"`, "target"), "{{target}} canceled"),
				}},
			{Title: "Concurrency limit, in flight, queued", FieldConfig: unit("short"),
				Description: "The adaptive concurrency limit, the requests running and those waiting in the admission queue, summed over the instances.",
				Targets: []Target{
					t(fmt.Sprintf("sum by (target) (%s{target=~\"$target\"})", schema.ServerConcurrencyLimit.Name), "{{target}} limit"),
					t(fmt.Sprintf("sum by (target) (%s{target=~\"$target\"})", schema.ServerInFlight.Name), "{{target}} in flight"),
					t(fmt.Sprintf("sum by (target) (%s{target=~\"$target\"})", schema.ServerQueued.Name), "{{target}} queued"),
				}},
			{Title: "Queue wait, p50 and p99", FieldConfig: unit("s"),
				Description: "How long admitted requests waited for a slot.",
				Targets: []Target{
					t(fmt.Sprintf("histogram_quantile(0.5, %s)", rate(schema.ServerQueueWait, "_bucket", "", "target, le")), "{{target}} p50"),
					t(fmt.Sprintf("histogram_quantile(0.99, %s)", rate(schema.ServerQueueWait, "_bucket", "", "target, le")), "{{target}} p99"),
				}},
		}},
		{"Client: what it sends, and how its requests end", []Panel{
			{Title: "Attempts sent, first tries and retries", FieldConfig: unit("reqps"),
				Description: "The load this client offers its dependency (target is the dependency): attempts per second, first tries and retries apart.",
				Targets:     []Target{t(rate(attempts, "", "", "target, try"), "{{target}} {{try}}")}},
			{Title: "Requests: success, and gave up by reason", FieldConfig: unit("reqps"),
				Description: "Requests that ended per second: success (the client's goodput) or gave up, with the reason retrying stopped (attempts-exhausted, budget-exhausted, deadline, not-retryable, server-said-stop, retries-disabled, canceled, retry-declined).",
				Targets: []Target{
					t(rate(duration, "_count", `,outcome="success"`, "target"), "{{target}} success"),
					t(rate(duration, "_count", `,outcome="gave-up"`, "target, reason"), "{{target}} gave up: {{reason}}"),
				}},
			{Title: "Request latency, first attempt to outcome, p50 and p99", FieldConfig: unit("s"),
				Description: "From the start of a request's first attempt to its outcome, waits between attempts included, by outcome.",
				Targets: []Target{
					t(fmt.Sprintf("histogram_quantile(0.5, %s)", rate(duration, "_bucket", "", "target, outcome, le")), "{{target}} {{outcome}} p50"),
					t(fmt.Sprintf("histogram_quantile(0.99, %s)", rate(duration, "_bucket", "", "target, outcome, le")), "{{target}} {{outcome}} p99"),
				}},
			{Title: "Retry budget level", FieldConfig: ratio,
				Description: "Tokens in the retry budget over its capacity, lowest instance. Near 0 the budget refuses retries: requests give up with budget-exhausted (the StormguardRetryBudgetExhausted alert).",
				Targets: []Target{t(fmt.Sprintf("min by (target) (%s{target=~\"$target\"} / %s{target=~\"$target\"})",
					schema.ClientBudgetTokens.Name, schema.ClientBudgetCapacity.Name), "{{target}}")}},
			{Title: "Circuit breaker state", FieldConfig: breaker,
				Description: "The worst state of the target's breakers (0 closed, 1 half-open, 2 open) and their transitions.",
				Targets: []Target{
					t(fmt.Sprintf("max by (target) (%s{target=~\"$target\"})", schema.BreakerState.Name), "{{target}} state"),
					t(fmt.Sprintf("sum by (target) (increase(%s{target=~\"$target\"}[$__rate_interval]))", schema.BreakerTransitions.Name), "{{target}} transitions"),
				}},
		}},
	}

	d := Dashboard{
		UID: "stormguard", Title: "stormguard: offered load, goodput and wasted work",
		Description: "stormguard's metrics (docs/metrics.md): what each server is offered and what becomes of it, what each client sends and how its requests end.",
		Tags:        []string{"stormguard"}, Timezone: "browser", SchemaVersion: 39, Version: 1, Refresh: "30s",
		Time: TimeRange{From: "now-1h", To: "now"},
		Templating: Templating{List: []Variable{
			{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus"},
			{Name: "target", Label: "Target", Type: "query", Datasource: ds, Refresh: 2, Multi: true, IncludeAll: true, AllValue: ".*",
				Query: fmt.Sprintf("label_values({__name__=~\"%s|%s\"}, target)", offered.Name, attempts.Name)},
		}},
		Annotations: Annotations{List: []any{}},
	}
	id, y := 1, 0
	for _, r := range rows {
		expanded := false
		d.Panels = append(d.Panels, Panel{ID: id, Type: "row", Title: r.title, GridPos: GridPos{H: 1, W: 24, X: 0, Y: y}, Collapsed: &expanded})
		id++
		y++
		for i, p := range r.panels {
			p.ID, p.Type, p.Datasource = id, "timeseries", ds
			p.GridPos = GridPos{H: 8, W: 12, X: 12 * (i % 2), Y: y + 8*(i/2)}
			for j := range p.Targets {
				p.Targets[j].RefID = string(rune('A' + j))
			}
			d.Panels = append(d.Panels, p)
			id++
		}
		y += 8 * ((len(r.panels) + 1) / 2)
	}
	return d
}

// JSON returns the dashboard as Grafana imports it, indented, with a final
// newline.
func (d Dashboard) JSON() []byte {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		panic(err) // plain structs: cannot fail
	}
	return append(b, '\n')
}
