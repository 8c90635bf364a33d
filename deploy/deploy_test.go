package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/metrics/schema"
)

const (
	dashboardFile = "grafana/stormguard.json"
	rulesFile     = "prometheus/stormguard.rules.yml"
	runbooks      = "../docs/oncall.md"
)

// dashboard is the checked-in file, read without the generator's types.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name, Type, Query string
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Datasource *struct {
			Type, UID string
		} `json:"datasource"`
		Targets []struct {
			RefID        string `json:"refId"`
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// The variables of the dashboard, outermost first: every query selects
// through each of them but the data source.
var labelVars = []string{"cluster", "namespace", "job", "instance", "target", "route"}

// The dashboard is well formed: unique panel ids, panels within Grafana's
// 24 columns and not overlapping, every panel querying the datasource
// variable with distinct refIds and selecting through every label
// variable, the variables the queries use defined.
func TestDashboardStructure(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("no uid or title")
	}
	var names []string
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		names = append(names, v.Name)
	}
	if want := append([]string{"datasource"}, labelVars...); !slices.Equal(names, want) {
		t.Errorf("variables %v; want %v", names, want)
	}
	for _, l := range labelVars {
		if vars[l] != "query" {
			t.Errorf("variable %s: type %q; want query", l, vars[l])
		}
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	graphs := 0
	for _, p := range d.Panels {
		if p.ID == 0 || ids[p.ID] {
			t.Errorf("panel %q: id %d missing or used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
			t.Errorf("%q: gridPos %+v outside 24 columns", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("%q overlaps %q at (%d, %d)", p.Title, other, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		graphs++
		if !slices.Contains([]string{"timeseries", "stat", "table"}, p.Type) {
			t.Errorf("%q: type %q", p.Title, p.Type)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("%q: datasource %+v; want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%q: no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || refs[q.RefID] {
				t.Errorf("%q: query %+v: empty, or refId repeated", p.Title, q)
			}
			refs[q.RefID] = true
			for _, l := range labelVars {
				if !strings.Contains(q.Expr, fmt.Sprintf(`%s=~"$%s"`, l, l)) {
					t.Errorf("%q: %s does not select $%s", p.Title, q.Expr, l)
				}
			}
		}
	}
	if graphs < 20 {
		t.Errorf("%d panels; want the 20 or more of docs/oncall.md", graphs)
	}
}

// Every picture the dashboard must show is on it: a graph whose queries
// match.
func TestDashboardShows(t *testing.T) {
	d := readDashboard(t)
	shows := []struct {
		what string
		re   string // matched against one query
	}{
		{"offered load by first try and retry (server)", `sum by \(target, try\) \(rate\(stormguard_server_offered_total`},
		{"offered load by first try and retry (client)", `sum by \(target, try\) \(rate\(stormguard_client_attempts_total`},
		{"throughput", `stormguard_server_requests_total\{[^}]*outcome=~"goodput\|failed\|wasted"`},
		{"goodput", `stormguard_server_requests_total\{[^}]*outcome="goodput"`},
		{"wasted work", `stormguard_server_requests_total\{[^}]*outcome="wasted"`},
		{"shed by reason", `sum by \(target, reason\) \(rate\(stormguard_server_requests_total\{[^}]*outcome="shed"`},
		{"expired by reason", `sum by \(target, reason\) \(rate\(stormguard_server_requests_total\{[^}]*outcome="expired"`},
		{"gave up by reason", `sum by \(target, reason\) \(rate\(stormguard_client_request_duration_seconds_count\{[^}]*outcome="gave-up"`},
		{"attempts per request", `stormguard_client_attempts_total[^/]*\n  /\n[^/]*stormguard_client_request_duration_seconds_count`},
		{"client latency", `histogram_quantile\(0.99, sum by \(target, outcome, le\) \(rate\(stormguard_client_request_duration_seconds_bucket`},
		{"budget level per instance", `min by \(target, instance\) \(stormguard_client_retry_budget_tokens\{[^}]*\} / stormguard_client_retry_budget_capacity_tokens`},
		{"concurrency limit", `stormguard_server_concurrency_limit_requests`},
		{"breaker state", `stormguard_breaker_state`},
		{"breaker transitions", `stormguard_breaker_transitions_total`},
		{"offered load per instance", `sum by \(target, instance\) \(rate\(stormguard_server_offered_total`},
		{"goodput per instance", `sum by \(target, instance\) \(rate\(stormguard_server_requests_total\{[^}]*outcome="goodput"`},
		{"offered load per route", `sum by \(target, route, try\) \(rate\(stormguard_server_offered_total`},
		{"goodput per route", `sum by \(target, route\) \(rate\(stormguard_server_requests_total\{[^}]*outcome="goodput"`},
		{"retries off per instance", `max by \(instance\) \(stormguard_dials_retries_off`},
		{"shed fraction per instance", `max by \(instance\) \(stormguard_dials_shed_ratio`},
		{"limit override per instance", `max by \(instance\) \(stormguard_dials_limit_override_requests`},
		{"when the dials changed, and from where", `max by \(instance, origin\) \(stormguard_dials_last_change_timestamp_seconds`},
		{"the policy file's version per instance", `max by \(target, instance, version\) \(stormguard_policy_version_info`},
		{"the policy file's reloads by result", `sum by \(target, instance, result\) \(increase\(stormguard_policy_reloads_total`},
	}
	for _, s := range shows {
		re := regexp.MustCompile(s.re)
		found := false
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				found = found || re.MatchString(q.Expr)
			}
		}
		if !found {
			t.Errorf("no query shows %s (%s)", s.what, s.re)
		}
	}
}

// rules is the rules file.
type rules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record, Alert, Expr, For string
			Labels, Annotations      map[string]string
		}
	}
}

func readRules(t *testing.T) rules {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var r rules
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return r
}

var (
	// A raw series: not the metric part of a recorded name.
	metricName = regexp.MustCompile(`(?:^|[^:\w])(stormguard_[a-z_]+)`)
	// A recorded name: level:stormguard_metric:operations.
	recordName = regexp.MustCompile(`\b[a-z_]+:stormguard_[a-z0-9_]+:[a-z0-9_]+`)
)

// inSchema reports whether a series name in a query is one of the
// schema's, or a histogram's _bucket, _count or _sum.
func inSchema(name string) bool {
	if _, ok := schema.Lookup(name); ok {
		return true
	}
	for _, s := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, s); ok {
			if m, ok := schema.Lookup(base); ok && m.Kind == schema.Histogram {
				return true
			}
		}
	}
	return false
}

// Every series a query of the dashboard or of the rules names is in the
// schema; every recorded series the rules use is recorded by them.
func TestQueriesNameSchemaSeries(t *testing.T) {
	var exprs []string
	for _, p := range readDashboard(t).Panels {
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	recorded := map[string]bool{}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	named := 0
	for _, e := range exprs {
		for _, m := range metricName.FindAllStringSubmatch(e, -1) {
			n := m[1]
			named++
			if !inSchema(n) {
				t.Errorf("%s: not in the schema (in %s)", n, e)
			}
		}
		for _, n := range recordName.FindAllString(e, -1) {
			if !recorded[n] {
				t.Errorf("%s: not recorded by %s (in %s)", n, rulesFile, e)
			}
		}
	}
	if named == 0 {
		t.Fatal("no series named: the pattern finds nothing")
	}
	if !inSchema("stormguard_client_request_duration_seconds_bucket") || inSchema("stormguard_server_offered_total_count") || inSchema("stormguard_goodput_total") {
		t.Error("inSchema is wrong")
	}
}

// Each alert follows the mixins' conventions: severity critical or
// warning, a for: duration, a summary, a description, and a runbook_url
// that points at a heading of docs/oncall.md named for it.
func TestAlertsHaveRunbooks(t *testing.T) {
	doc, err := os.ReadFile(runbooks)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
				t.Errorf("%s: severity %q; want critical or warning (what Alertmanager routing trees match)", r.Alert, sev)
			}
			if r.For == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: for %q, annotations %v; want a for: duration, a summary and a description", r.Alert, r.For, r.Annotations)
			}
			anchor := "#" + strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "/docs/oncall.md"+anchor) {
				t.Errorf("%s: runbook_url %q; want docs/oncall.md%s", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			if !bytes.Contains(doc, []byte("\n### "+r.Alert+"\n")) {
				t.Errorf("%s: docs/oncall.md has no heading ### %s", r.Alert, r.Alert)
			}
		}
	}
	want := []string{"StormguardRetryStorm", "StormguardGoodputCollapsed", "StormguardRetryBudgetExhausted", "StormguardKillSwitchLeftOn"}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v; want %v", alerts, want)
	}
}

// promtool parses every query of the dashboard (each as the expression of
// a recording rule, with Grafana's variables filled in). CI installs
// promtool (Debian's prometheus package); elsewhere the test is skipped
// without it.
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed (apt-get install prometheus)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	fill := strings.NewReplacer("$__rate_interval", "5m", "$cluster", ".*", "$namespace", ".*", "$job", ".*", "$instance", ".*", "$target", ".*", "$route", ".*")
	n := 0
	for _, p := range readDashboard(t).Panels {
		for _, q := range p.Targets {
			n++
			expr, _ := json.Marshal(fill.Replace(q.Expr)) // a JSON string is a YAML string
			fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", n, expr)
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s", n, err, out)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", n); !strings.Contains(string(out), want) {
		t.Errorf("promtool: %s; want %q", out, want)
	}
	if !slices.Contains(strings.Fields(string(out)), "SUCCESS:") {
		t.Errorf("promtool: %s", out)
	}
}

// Every Go snippet of docs/metrics.md and of the README's section on
// metrics is quoted, line for line, from an example that go test runs.
func TestSnippetsQuoteExamples(t *testing.T) {
	var examples []string
	for _, f := range []string{"../metrics/wiring_example_test.go", "../otelx/example_test.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t")) // the body of a function
		}
		examples = append(examples, strings.Join(lines, "\n"))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(readme[bytes.Index(readme, []byte("## Metrics, dashboard and alerts")):]), "\n## ")
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := 0
	for name, text := range map[string]string{"README.md": section, "docs/metrics.md": string(doc)} {
		for _, block := range strings.Split(text, "```go\n")[1:] {
			code, _, _ := strings.Cut(block, "```")
			snippets++
			if !slices.ContainsFunc(examples, func(e string) bool { return strings.Contains(e, code) }) {
				t.Errorf("%s: this snippet is not in an example:\n%s", name, code)
			}
		}
	}
	if snippets != 4 {
		t.Errorf("%d snippets; want 4 (two in each file)", snippets)
	}
}

// docs/oncall.md describes every panel of the dashboard, in order, under
// its row, and nothing else.
func TestDashboardPanelsDescribed(t *testing.T) {
	doc, err := os.ReadFile(runbooks)
	if err != nil {
		t.Fatal(err)
	}
	var described []string
	for _, line := range strings.Split(string(doc), "\n") {
		f := strings.Split(line, " | ")
		if len(f) >= 3 && strings.HasPrefix(f[0], "| ") && f[0] != "| row" && !strings.HasPrefix(f[0], "|---") {
			if strings.HasPrefix(f[0], "| Kill switch") || strings.HasPrefix(f[0], "| Server") || strings.HasPrefix(f[0], "| Client") {
				described = append(described, f[1])
			}
		}
	}
	var panels []string
	for _, p := range readDashboard(t).Panels {
		if p.Type != "row" {
			panels = append(panels, p.Title)
		}
	}
	if !slices.Equal(described, panels) {
		t.Errorf("docs/oncall.md describes the panels\n  %q\nthe dashboard has\n  %q", described, panels)
	}
}
