package analyze

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/sim/scenario"
)

// sc builds a scenario from one client and services written as YAML flow
// mappings, and applies nothing else.
func sc(t *testing.T, client string, services ...string) scenario.Scenario {
	t.Helper()
	y := "name: t\nclients:\n  - " + client + "\nservices:\n"
	for _, s := range services {
		y += "  - " + s + "\n"
	}
	f, err := scenario.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return f.Runs[0].Scenario
}

// got is a finding reduced to what the rule tables compare.
type got struct {
	sev   Severity
	where string
}

func (g got) String() string { return g.sev.String() + " " + g.where }

func findingsOf(t *testing.T, s scenario.Scenario, rule string) []got {
	t.Helper()
	if !slices.ContainsFunc(Rules, func(r Rule) bool { return r.ID == rule }) {
		t.Fatalf("rule %q is not in Rules", rule)
	}
	a, err := Scenario(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []got
	for _, f := range a.Findings {
		if f.Rule == rule {
			out = append(out, got{f.Severity, f.Where})
			if f.Message == "" || f.Fix == "" || !strings.HasSuffix(f.Fix, ".") {
				t.Errorf("%s at %s: message %q, fix %q: both must be sentences", rule, f.Where, f.Message, f.Fix)
			}
		}
	}
	return out
}

// Services used by the rule tables.
const (
	// db serves 200 attempts/s.
	db    = `{name: db, workers: 10, service_time: {mean: 50ms}}`
	dbSG  = `{name: db, workers: 10, service_time: {mean: 50ms}, defenses: stormguard}`
	leaf  = `{name: db, workers: 10, service_time: {mean: 1ms}}`
	front = `{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, policy: naive}]}`
)

// ruleCases: for every rule, scenarios that break it and scenarios that
// do not, with the findings wanted.
var ruleCases = []struct {
	name     string
	rule     string
	client   string
	services []string
	want     []got
}{
	{"overloaded: first tries above capacity", "overloaded",
		`{name: users, target: db, arrivals: {rate: 250}, policy: naive}`, []string{db},
		[]got{{Error, "db"}}},
	{"overloaded: below capacity", "overloaded",
		`{name: users, target: db, arrivals: {rate: 150}, policy: naive}`, []string{db}, nil},

	{"vulnerable: 150/s against 200/3", "vulnerable",
		`{name: users, target: db, arrivals: {rate: 150}, policy: naive}`, []string{db},
		[]got{{Error, "db"}}},
	{"vulnerable: 50/s is below 200/3", "vulnerable",
		`{name: users, target: db, arrivals: {rate: 50}, policy: naive}`, []string{db}, nil},
	{"vulnerable: a 10 % budget lifts the threshold to 200/1.1", "vulnerable",
		`{name: users, target: db, arrivals: {rate: 150}, policy: sre}`, []string{db}, nil},
	{"vulnerable: first tries first", "vulnerable",
		`{name: users, target: db, arrivals: {rate: 150}, policy: naive}`, []string{dbSG}, nil},
	{"vulnerable: a burst has no rate", "vulnerable",
		`{name: users, target: db, arrivals: {kind: burst, count: 1000}, policy: naive}`, []string{db}, nil},

	{"layered-retries: two unbudgeted layers", "layered-retries",
		`{name: users, target: front, arrivals: {rate: 1}, policy: naive}`, []string{front, leaf},
		[]got{{Error, "users → front → db"}}},
	{"layered-retries: one layer budgeted", "layered-retries",
		`{name: users, target: front, arrivals: {rate: 1}, policy: stormguard}`, []string{front, leaf},
		[]got{{Warning, "users → front → db"}}},
	{"layered-retries: only the top layer retries", "layered-retries",
		`{name: users, target: front, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, policy: {preset: naive, max_attempts: 1}}]}`, leaf},
		nil},
	{"layered-retries: the top two of three, reported once", "layered-retries",
		`{name: users, target: front, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: mid, policy: naive}]}`,
			`{name: mid, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, policy: {preset: naive, max_attempts: 1}}]}`, leaf},
		[]got{{Error, "users → front → mid"}}},

	{"timeout-exceeds-caller: 1s call under a 1s caller, retrying", "timeout-exceeds-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s}`, []string{front, leaf},
		[]got{{Error, "front→db"}}},
	{"timeout-exceeds-caller: without retries", "timeout-exceeds-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 2s, policy: {preset: naive, max_attempts: 1}}]}`, leaf},
		[]got{{Warning, "front→db"}}},
	{"timeout-exceeds-caller: a client deadline is the wait", "timeout-exceeds-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 5s, deadline: 500ms}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 500ms, policy: naive}]}`, leaf},
		[]got{{Error, "front→db"}}},
	{"timeout-exceeds-caller: 200ms under 1s", "timeout-exceeds-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 200ms, policy: naive}]}`, leaf},
		nil},

	{"retries-exceed-caller: 3 × 400ms > 1s", "retries-exceed-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 400ms, policy: naive}]}`, leaf},
		[]got{{Warning, "front→db"}}},
	{"retries-exceed-caller: propagated to a deadline-aware policy", "retries-exceed-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s, propagate_deadline: true}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 400ms, policy: stormguard, propagate_deadline: true}]}`, leaf},
		[]got{{Info, "front→db"}}},
	{"retries-exceed-caller: the backoff counts", "retries-exceed-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 300ms, policy: {preset: naive, backoff: {kind: constant, base: 100ms}}}]}`, leaf},
		[]got{{Warning, "front→db"}}},
	{"retries-exceed-caller: 3 × 300ms fit in 1s", "retries-exceed-caller",
		`{name: users, target: front, arrivals: {rate: 1}, timeout: 1s}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, calls: [{service: db, timeout: 300ms, policy: naive}]}`, leaf},
		nil},

	{"timeout-exceeds-deadline: timeout = deadline", "timeout-exceeds-deadline",
		`{name: users, target: db, arrivals: {rate: 1}, timeout: 1s, deadline: 1s}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"timeout-exceeds-deadline: timeout under the deadline", "timeout-exceeds-deadline",
		`{name: users, target: db, arrivals: {rate: 1}, timeout: 300ms, deadline: 1s}`, []string{leaf}, nil},

	{"retries-unretryable: naive above a retrying call", "retries-unretryable",
		`{name: users, target: front, arrivals: {rate: 1}, policy: naive}`, []string{front, leaf},
		[]got{{Warning, "users→front"}}},
	{"retries-unretryable: the caller honours signals", "retries-unretryable",
		`{name: users, target: front, arrivals: {rate: 1}, policy: stormguard}`, []string{front, leaf}, nil},
	{"retries-unretryable: a fallback answers success", "retries-unretryable",
		`{name: users, target: front, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: front, workers: 100, service_time: {mean: 1ms}, on_call_failure: fallback, calls: [{service: db, policy: naive}]}`, leaf},
		nil},
	{"retries-unretryable: nothing retries below", "retries-unretryable",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{leaf}, nil},

	{"ignores-pushback: naive against stormguard defenses", "ignores-pushback",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{dbSG},
		[]got{{Warning, "users→db"}}},
	{"ignores-pushback: stormguard against stormguard defenses", "ignores-pushback",
		`{name: users, target: db, arrivals: {rate: 1}, policy: stormguard}`, []string{dbSG}, nil},
	{"ignores-pushback: no defenses to ignore", "ignores-pushback",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{db}, nil},

	{"missing-budget: naive", "missing-budget",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"missing-budget: the default policy is naive", "missing-budget",
		`{name: users, target: db, arrivals: {rate: 1}}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"missing-budget: a concurrency budget of 100 % bounds nothing", "missing-budget",
		`{name: users, target: db, arrivals: {rate: 1}, policy: {preset: envoy, budget: {kind: concurrency, percent: 1}}}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"missing-budget: aws-2026 has a quota", "missing-budget",
		`{name: users, target: db, arrivals: {rate: 1}, policy: aws-2026}`, []string{leaf}, nil},
	{"missing-budget: no retries", "missing-budget",
		`{name: users, target: db, arrivals: {rate: 1}, policy: {preset: naive, max_attempts: 1}}`, []string{leaf}, nil},

	{"missing-jitter: no backoff", "missing-jitter",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"missing-jitter: exponential", "missing-jitter",
		`{name: users, target: db, arrivals: {rate: 1}, policy: {preset: sre, backoff: {kind: exponential}}}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"missing-jitter: throttle backoff constant", "missing-jitter",
		`{name: users, target: db, arrivals: {rate: 1}, policy: {preset: stormguard, throttle_backoff: {kind: constant, base: 1s}}}`, []string{leaf},
		[]got{{Warning, "users→db"}}},
	{"missing-jitter: equal jitter is partial", "missing-jitter",
		`{name: users, target: db, arrivals: {rate: 1}, policy: aws-legacy}`, []string{leaf},
		[]got{{Info, "users→db"}, {Info, "users→db"}}},
	{"missing-jitter: full jitter", "missing-jitter",
		`{name: users, target: db, arrivals: {rate: 1}, policy: stormguard}`, []string{leaf}, nil},
	{"missing-jitter: no retries", "missing-jitter",
		`{name: users, target: db, arrivals: {rate: 1}, policy: {preset: naive, max_attempts: 1}}`, []string{leaf}, nil},

	// db serves 200/s: a 90 % cache at 1,000/s hides 800/s of it.
	{"cache-hides-load: cold first tries above capacity", "cache-hides-load",
		`{name: users, target: db, arrivals: {rate: 1000}, policy: {preset: naive, max_attempts: 1}}`,
		[]string{`{name: db, workers: 10, service_time: {mean: 50ms}, cache: {hit_rate: 0.9}}`}, []got{{Warning, "db"}}},
	{"cache-hides-load: only the retries would", "cache-hides-load",
		`{name: users, target: db, arrivals: {rate: 150}, policy: naive}`,
		[]string{`{name: db, workers: 10, service_time: {mean: 50ms}, cache: {hit_rate: 0.9}}`}, []got{{Info, "db"}}},
	{"cache-hides-load: cold load within capacity", "cache-hides-load",
		`{name: users, target: db, arrivals: {rate: 50}, policy: naive}`,
		[]string{`{name: db, workers: 10, service_time: {mean: 50ms}, cache: {hit_rate: 0.9}}`}, nil},

	{"thrashing: a knee below the workers", "thrashing",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: db, workers: 100, service_time: {mean: 50ms}, capacity_law: {kind: processor-sharing, cores: 4, knee: 50, drop: 0.5}}`}, []got{{Warning, "db"}}},
	{"thrashing: a knee above the workers", "thrashing",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: db, workers: 40, service_time: {mean: 50ms}, capacity_law: {kind: processor-sharing, cores: 4, knee: 50, drop: 0.5}}`}, nil},

	// 2 % of 500/s held 30 s is 300 workers; propagated 1 s deadlines hold 10.
	{"hang-holds-workers: released after 30 s", "hang-holds-workers",
		`{name: users, target: db, arrivals: {rate: 500}, policy: naive}`,
		[]string{`{name: db, workers: 50, service_time: {mean: 5ms}, hang: {probability: 0.02, release: 30s}}`}, []got{{Warning, "db"}}},
	{"hang-holds-workers: nothing releases", "hang-holds-workers",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: db, workers: 50, service_time: {mean: 5ms}, hang: {probability: 0.02}}`}, []got{{Warning, "db"}}},
	{"hang-holds-workers: deadlines propagate", "hang-holds-workers",
		`{name: users, target: db, arrivals: {rate: 500}, policy: naive, propagate_deadline: true}`,
		[]string{`{name: db, workers: 50, service_time: {mean: 5ms}, hang: {probability: 0.02, release: 30s}}`}, nil},

	{"crash-before-shed: the default queue", "crash-before-shed",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: db, workers: 10, service_time: {mean: 5ms}, crash: {queue: 50, restart: 10s}}`}, []got{{Warning, "db"}}},
	{"crash-before-shed: a queue bounded below", "crash-before-shed",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: db, workers: 10, service_time: {mean: 5ms}, queue: {capacity: 40}, crash: {queue: 50, restart: 10s}}`}, nil},

	{"costly-failures: refusals cost work", "costly-failures",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: db, workers: 10, service_time: {mean: 10ms}, failure_cost: {refuse: 2ms}}`}, []got{{Info, "db"}}},
	{"cpu-blind-autoscaler: workers wait on a call", "cpu-blind-autoscaler",
		`{name: users, target: web, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: web, workers: 10, service_time: {mean: 5ms}, calls: [{service: db}], autoscale: {metric: cpu, target: 0.5, max: 10}}`,
			`{name: db, workers: 10, service_time: {mean: 50ms}}`}, []got{{Warning, "web"}}},
	{"cpu-blind-autoscaler: never scales down", "cpu-blind-autoscaler",
		`{name: users, target: web, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: web, workers: 10, service_time: {mean: 5ms}, calls: [{service: db}], autoscale: {metric: cpu, target: 0.5, max: 10, scale_down: {select_policy: disabled}}}`,
			`{name: db, workers: 10, service_time: {mean: 50ms}}`}, nil},
	{"cpu-blind-autoscaler: concurrency", "cpu-blind-autoscaler",
		`{name: users, target: web, arrivals: {rate: 1}, policy: naive}`,
		[]string{`{name: web, workers: 10, service_time: {mean: 5ms}, calls: [{service: db}], autoscale: {metric: concurrency, target: 5, max: 10}}`,
			`{name: db, workers: 10, service_time: {mean: 50ms}}`}, nil},
	{"no-off-switch: a layer retries", "no-off-switch",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{leaf}, []got{{Warning, "runbook"}}},
	{"no-off-switch: nothing retries", "no-off-switch",
		`{name: users, target: db, arrivals: {rate: 1}, policy: {preset: naive, max_attempts: 1}}`, []string{leaf}, nil},
	{"costly-failures: free refusals", "costly-failures",
		`{name: users, target: db, arrivals: {rate: 1}, policy: naive}`, []string{leaf}, nil},
}

func TestRules(t *testing.T) {
	for _, c := range ruleCases {
		t.Run(c.name, func(t *testing.T) {
			gotF := findingsOf(t, sc(t, c.client, c.services...), c.rule)
			if fmt.Sprint(gotF) != fmt.Sprint(c.want) {
				t.Errorf("%s findings = %v, want %v", c.rule, gotF, c.want)
			}
		})
	}
}

// TestRulesAllTested: every rule has a case that breaks it and one that
// does not.
func TestRulesAllTested(t *testing.T) {
	for _, r := range Rules {
		broken, kept := false, false
		for _, c := range ruleCases {
			if c.rule == r.ID {
				broken = broken || len(c.want) > 0
				kept = kept || len(c.want) == 0
			}
		}
		if !broken || !kept || r.Summary == "" {
			t.Errorf("rule %s: a breaking case %v, a keeping case %v, summary %q", r.ID, broken, kept, r.Summary)
		}
	}
}

// TestFindingsOrder: errors first, then warnings, then notes.
func TestFindingsOrder(t *testing.T) {
	a, err := Scenario(sc(t, `{name: users, target: front, arrivals: {rate: 500}, policy: aws-legacy}`, front, db))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Findings) < 3 {
		t.Fatalf("only %d findings", len(a.Findings))
	}
	for i := 1; i < len(a.Findings); i++ {
		if a.Findings[i].Severity > a.Findings[i-1].Severity {
			t.Errorf("finding %d (%s) outranks finding %d (%s)", i, a.Findings[i].Severity, i-1, a.Findings[i-1].Severity)
		}
	}
}

// TestMechanismCapacity: the capacity figures of the simulator's capacity
// laws and replicas, each against its formula.
func TestMechanismCapacity(t *testing.T) {
	for _, c := range []struct {
		svc        string
		cap, peak  float64
		hit        float64
		firstTries float64 // at 100/s
	}{
		{`{name: db, workers: 10, replicas: 4, service_time: {mean: 50ms}}`, 800, 0, 0, 100},
		{`{name: db, workers: 100, service_time: {mean: 50ms}, capacity_law: {kind: processor-sharing, cores: 4}}`, 80, 0, 0, 100},
		{`{name: db, workers: 100, service_time: {mean: 20ms}, capacity_law: {kind: processor-sharing}}`, 50, 0, 0, 100}, // cores default 1
		{`{name: db, workers: 10, service_time: {mean: 50ms}, capacity_law: {kind: linear, per_request: 5ms}}`, 100, 0, 0, 100},
		{`{name: db, workers: 100, service_time: {mean: 50ms}, capacity_law: {kind: processor-sharing, cores: 4, knee: 50, drop: 0.5}}`, 40, 80, 0, 100},
		{`{name: db, workers: 10, service_time: {kind: mixture, of: [{weight: 1, mean: 10ms}, {weight: 1, mean: 90ms}]}}`, 200, 0, 0, 100},
		{`{name: db, workers: 10, service_time: {mean: 50ms}, cache: {hit_rate: 0.75}}`, 200, 0, 0.75, 25},
	} {
		a, err := Scenario(sc(t, `{name: users, target: db, arrivals: {rate: 100}, policy: naive}`, c.svc))
		if err != nil {
			t.Fatal(err)
		}
		sf := a.Services[0]
		if diff(sf.Capacity, c.cap) || diff(sf.PeakCapacity, c.peak) || diff(sf.CacheHitRate, c.hit) || diff(sf.FirstTries, c.firstTries) {
			t.Errorf("%s: capacity %v, peak %v, hit rate %v, first tries %v; want %v, %v, %v, %v",
				c.svc, sf.Capacity, sf.PeakCapacity, sf.CacheHitRate, sf.FirstTries, c.cap, c.peak, c.hit, c.firstTries)
		}
	}
}

func diff(a, b float64) bool { return a-b > 1e-9*max(1, b) || b-a > 1e-9*max(1, b) }

// TestOffSwitchCovered: a runbook step that turns a layer's retries off
// (or sheds or pauses its target) is its off switch.
func TestOffSwitchCovered(t *testing.T) {
	for _, step := range []string{"{at: 10s, kind: retries-off, target: users}", "{at: 10s, kind: shed, target: db, value: 0.5}", "{at: 10s, kind: pause, target: db}"} {
		f, err := scenario.Parse("t.yaml", []byte("name: t\nclients: [{name: users, target: db, arrivals: {rate: 1}, policy: naive}]\n"+
			"services: [{name: db, workers: 10, service_time: {mean: 1ms}}]\nactions: ["+step+"]\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := findingsOf(t, f.Runs[0].Scenario, "no-off-switch"); len(got) != 0 {
			t.Errorf("with %s: %v, want no finding", step, got)
		}
	}
}

// TestHedgedAmplification: a hedged layer's worst case counts its hedges.
func TestHedgedAmplification(t *testing.T) {
	a, err := Scenario(sc(t, `{name: users, target: db, arrivals: {rate: 10}, policy: {preset: stormguard, max_attempts: 1, hedge: {max_attempts: 3, delay: 20ms}}}`, db))
	if err != nil {
		t.Fatal(err)
	}
	if w := a.Services[0].Clients[0].Worst; w != 3 {
		t.Errorf("worst case of a layer hedging 3 copies: %v, want 3", w)
	}
}

// TestBlindAutoscalerWindow: the finding says how long a slowdown must last
// before the CPU autoscaler scales the tier down: Kubernetes' 300 s
// scale-down stabilization window by default, the next evaluation without
// one.
func TestBlindAutoscalerWindow(t *testing.T) {
	for _, c := range []struct {
		autoscale, want string
		window          float64
	}{
		{`{metric: cpu, target: 0.5, max: 10}`, "once a slowdown outlasts its 5m0s scale-down stabilization window", 300},
		{`{metric: cpu, target: 0.5, max: 10, interval: 30s, scale_down: {stabilization_window: 0s}}`, "at its next evaluation (every 30s)", 0},
	} {
		s := sc(t, `{name: users, target: web, arrivals: {rate: 1}, policy: naive}`,
			`{name: web, workers: 10, service_time: {mean: 5ms}, calls: [{service: db}], autoscale: `+c.autoscale+`}`,
			`{name: db, workers: 10, service_time: {mean: 50ms}}`)
		r, err := Scenario(s)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range r.Findings {
			if f.Rule != "cpu-blind-autoscaler" {
				continue
			}
			found = true
			if !strings.Contains(f.Message, c.want) {
				t.Errorf("%s: message %q lacks %q", c.autoscale, f.Message, c.want)
			}
			if got := f.Numbers["scale_down_window_s"]; got != c.window {
				t.Errorf("%s: scale_down_window_s = %v, want %v", c.autoscale, got, c.window)
			}
		}
		if !found {
			t.Errorf("%s: no cpu-blind-autoscaler finding", c.autoscale)
		}
	}
}
