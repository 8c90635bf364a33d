package lab

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
)

func TestParseControl(t *testing.T) {
	tests := []struct {
		line  string
		want  controlLine
		valid bool
	}{
		{"stop", controlLine{stop: true}, true},
		{"start 1700000000000000000", controlLine{start: time.Unix(0, 1700000000000000000)}, true},
		{"start 1", controlLine{start: time.Unix(0, 1)}, true},
		{"start 0", controlLine{}, false},
		{"start -5", controlLine{}, false},
		{"start +5", controlLine{}, false},
		{"start 05", controlLine{}, false},
		{"start  5", controlLine{}, false},
		{"start 5 ", controlLine{}, false},
		{"start 99999999999999999999", controlLine{}, false},
		{"start", controlLine{}, false},
		{"stop now", controlLine{}, false},
		{" stop", controlLine{}, false},
		{"STOP", controlLine{}, false},
		{"", controlLine{}, false},
	}
	for _, tt := range tests {
		got, err := parseControl(tt.line)
		if (err == nil) != tt.valid || got.stop != tt.want.stop || !got.start.Equal(tt.want.start) {
			t.Errorf("parseControl(%q) = %+v, %v; want %+v, valid %v", tt.line, got, err, tt.want, tt.valid)
		}
		if err == nil && formatControl(got) != tt.line {
			t.Errorf("formatControl(parseControl(%q)) = %q", tt.line, formatControl(got))
		}
	}
}

func TestParseReady(t *testing.T) {
	tests := []struct {
		role, line, want string
		valid            bool
	}{
		{RoleBackend, `{"addr":"127.0.0.1:8080"}` + "\n", "127.0.0.1:8080", true},
		{RoleProxy, `{"addr": "127.0.0.1:1"}`, "127.0.0.1:1", true},
		{RoleLoadgen, `{"addr":""}` + "\n", "", true},
		{RoleLoadgen, `{"addr":"127.0.0.1:80"}`, "", false},
		{RoleBackend, `{"addr":""}`, "", false},
		// The old check (a prefix) let these through.
		{RoleBackend, `{"addr":"127.0.0.1:x"}`, "", false},
		{RoleBackend, `{"addr":"127.0.0.1:"}`, "", false},
		{RoleBackend, `{"addr":"127.0.0.1:0"}`, "", false},
		{RoleBackend, `{"addr":"127.0.0.1:65536"}`, "", false},
		{RoleBackend, `{"addr":"127.0.0.1:080"}`, "", false},
		{RoleBackend, `{"addr":"127.0.0.1:80:81"}`, "", false},
		{RoleApp, `{"addr":"0.0.0.0:80"}`, "", false},
		{RoleApp, `{"addr":"[::1]:80"}`, "", false},
		{RoleApp, `{"addr":"localhost:80"}`, "", false},
		{RoleApp, `{"addr":"127.0.0.1:80","x":1}`, "", false},
		{RoleApp, `{"addr":"127.0.0.1:80"} {}`, "", false},
		{RoleApp, `{"addr":80}`, "", false},
		{RoleApp, `not json`, "", false},
		{RoleApp, ``, "", false},
	}
	for _, tt := range tests {
		got, err := parseReady(tt.role, []byte(tt.line))
		if (err == nil) != tt.valid || got != tt.want {
			t.Errorf("parseReady(%s, %q) = %q, %v; want %q, valid %v", tt.role, tt.line, got, err, tt.want, tt.valid)
		}
	}
	if got, err := parseReady(RoleApp, formatReady("127.0.0.1:4242")); err != nil || got != "127.0.0.1:4242" {
		t.Errorf("parseReady(formatReady) = %q, %v", got, err)
	}
}

// validConfigs are the configurations the orchestrator writes for the
// default scenario's stormguard run, with addresses and result files.
func validConfigs(t testing.TB) map[string][]byte {
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f.Runs[1].Scenario)
	if err != nil {
		t.Fatal(err)
	}
	p.Backend.Result, p.Proxy.Result, p.App.Result, p.Loadgen.Result = "/r/backend", "/r/proxy", "/r/app", "/r/loadgen"
	p.Proxy.Target, p.App.Call.Upstream, p.Loadgen.Target = "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"
	out := map[string][]byte{}
	for role, cfg := range map[string]any{RoleBackend: p.Backend, RoleProxy: p.Proxy, RoleApp: p.App, RoleLoadgen: p.Loadgen} {
		data, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[role] = data
	}
	return out
}

func TestParseConfig(t *testing.T) {
	valid := validConfigs(t)
	for role, data := range valid {
		if _, err := parseConfig(role, data); err != nil {
			t.Errorf("%s: the orchestrator's own configuration: %v", role, err)
		}
	}
	// edit changes one key of a role's valid configuration.
	edit := func(role, key string, v any) []byte {
		var m map[string]any
		json.Unmarshal(valid[role], &m)
		m[key] = v
		data, _ := json.Marshal(m)
		return data
	}
	tests := []struct {
		name, role string
		data       []byte
		want       string
	}{
		{"another role's", RoleBackend, valid[RoleApp], `role "app" in the configuration of a backend`},
		{"an app without its call", RoleApp, edit(RoleApp, "call", nil), "an app has a call"},
		{"role field", RoleProxy, edit(RoleProxy, "role", "backend"), `role "backend"`},
		{"unknown field", RoleBackend, edit(RoleBackend, "bogus", 1), "unknown field"},
		{"trailing data", RoleBackend, append(valid[RoleBackend], []byte(" {}")...), "after the JSON"},
		{"bin of 1ns", RoleBackend, edit(RoleBackend, "bin_ns", 1), "bin_ns"},
		{"a year", RoleLoadgen, edit(RoleLoadgen, "duration_ns", int64(365*24*time.Hour)), "duration_ns"},
		{"relative result", RoleProxy, edit(RoleProxy, "result", "r.json"), "absolute"},
		{"no result", RoleProxy, edit(RoleProxy, "result", ""), "result"},
		{"outside target", RoleLoadgen, edit(RoleLoadgen, "target", "10.0.0.1:80"), "not 127.0.0.1"},
		{"outside proxy target", RoleProxy, edit(RoleProxy, "target", "example.com:80"), "not 127.0.0.1"},
		{"rate", RoleLoadgen, edit(RoleLoadgen, "arrivals", map[string]any{"kind": "poisson", "rate": 1e9}), "rate"},
		{"arrivals kind", RoleLoadgen, edit(RoleLoadgen, "arrivals", map[string]any{"kind": "closed"}), "kind"},
		{"processes", RoleLoadgen, edit(RoleLoadgen, "processes", 1e9), "processes"},
		{"timeout", RoleLoadgen, edit(RoleLoadgen, "timeout_ns", 0), "timeout"},
		{"load peak", RoleLoadgen, edit(RoleLoadgen, "triggers", []map[string]any{{"kind": "load", "factor": 1e6}}), "peak"},
		{"workers", RoleBackend, edit(RoleBackend, "workers", 1e9), "workers"},
		{"no workers", RoleBackend, edit(RoleBackend, "workers", 0), "workers"},
		{"error rate", RoleBackend, edit(RoleBackend, "error_rate", 2), "error_rate"},
		{"service time", RoleBackend, edit(RoleBackend, "service_time", map[string]any{"kind": "pareto"}), "service_time"},
		{"window", RoleBackend, edit(RoleBackend, "triggers", []map[string]any{{"kind": "capacity", "factor": 0.5, "at_ns": -1}}), "window"},
		{"capacity factor", RoleBackend, edit(RoleBackend, "triggers", []map[string]any{{"kind": "capacity", "factor": 0}}), "factor"},
		{"fault", RoleProxy, edit(RoleProxy, "faults", []map[string]any{{"kind": "outage", "mode": "melt"}}), "faults[0]"},
		{"not json", RoleApp, []byte("workers: 3"), "invalid character"},
	}
	for _, tt := range tests {
		_, err := parseConfig(tt.role, tt.data)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: parseConfig(%s) = %v, want an error with %q", tt.name, tt.role, err, tt.want)
		}
	}
}

// resultBins is the number of bins of validResults' run: few, so that
// the fuzzer's inputs stay small.
const resultBins = 2

// validResults are result files of a quick run of resultBins bins, one
// per role.
func validResults(t testing.TB) (Plan, map[string][]byte) {
	quick := quickScenario(time.Second, "hold")
	quick.Bin = quick.Duration / resultBins
	p, err := NewPlan(quick)
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock(time.Now(), p.Scenario.Bin, p.Scenario.Duration)
	cc := newClientCounts(clk)
	for range 30 {
		cc.sent(clk.start.Add(50 * time.Millisecond))
	}
	for range 25 {
		cc.ended(clk.start.Add(60*time.Millisecond), 10*time.Millisecond, outcome{kind: outcomeSuccess}, nil)
	}
	for range 5 {
		cc.ended(clk.start.Add(600*time.Millisecond), 500*time.Millisecond, outcome{kind: outcomeTimeout}, nil)
	}
	client, outs := cc.series("users", 0)
	sc := newServiceCounts(clk)
	sc.arrived(clk.start, 1)
	sc.completedAt(clk.start.Add(10*time.Millisecond), admit.FateGoodput)
	service := sc.series("db", 0)
	host := &HostStats{TimerSamples: 100, TimerLateP50: time.Millisecond, TimerLateP99: 2 * time.Millisecond, TimerLateMax: 3 * time.Millisecond}
	files := map[string]roleResult{
		RoleLoadgen: {Client: &client, Outcomes: &outs, MaxLag: time.Millisecond, Host: host},
		RoleBackend: {Service: &service, Host: &HostStats{TimerSamples: 100, Works: 1, ServiceNominal: 10 * time.Millisecond, ServiceMeasured: 11 * time.Millisecond}},
		RoleProxy:   {Proxy: &ProxyStats{Accepted: 1}, Host: host},
	}
	out := map[string][]byte{}
	for role, r := range files {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[role] = data
	}
	return p, out
}

// outputsFor parses valid result files for assemble, with data as the
// result of role.
func outputsFor(p Plan, files map[string][]byte) ([]roleOutput, error) {
	bins := newClock(time.Time{}, p.Scenario.Bin, p.Scenario.Duration).n
	names := map[string]string{RoleLoadgen: p.Loadgen.Name, RoleBackend: p.Backend.Name, RoleProxy: p.Proxy.Name}
	var outs []roleOutput
	for _, role := range []string{RoleBackend, RoleProxy, RoleLoadgen} {
		r, err := parseResult(role, files[role], bins)
		if err != nil {
			return nil, err
		}
		outs = append(outs, roleOutput{role: role, name: names[role], res: r})
	}
	return outs, nil
}

func TestParseResult(t *testing.T) {
	p, files := validResults(t)
	outs, err := outputsFor(p, files)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := assemble(p, "quick", outs)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Outcomes.Sent != 30 || rr.Result.Verdict == "" || len(rr.Host.Roles) != 3 || rr.Host.ServiceRatio != 1.1 {
		t.Errorf("assembled: sent %d, verdict %q, %d host roles, ratio %v", rr.Outcomes.Sent, rr.Result.Verdict, len(rr.Host.Roles), rr.Host.ServiceRatio)
	}
	edit := func(role string, f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(files[role], &m)
		f(m)
		data, _ := json.Marshal(m)
		return data
	}
	tests := []struct {
		name, role string
		data       []byte
		want       string
	}{
		{"a service's result from the load generator", RoleLoadgen, files[RoleBackend], "no client series"},
		{"no series", RoleBackend, files[RoleProxy], "no series"},
		{"no stats", RoleProxy, files[RoleBackend], "no stats"},
		{"short series", RoleLoadgen, edit(RoleLoadgen, func(m map[string]any) {
			c := m["client"].(map[string]any)
			c["bins"] = c["bins"].([]any)[:1]
		}), "1 bins, not 2"},
		{"outcomes that do not add up", RoleLoadgen, edit(RoleLoadgen, func(m map[string]any) {
			m["outcomes"].(map[string]any)["sent"] = 31
		}), "31 requests sent"},
		{"negative lag", RoleLoadgen, edit(RoleLoadgen, func(m map[string]any) { m["max_lag_ns"] = -1 }), "negative"},
		{"negative host figure", RoleProxy, edit(RoleProxy, func(m map[string]any) {
			m["host"].(map[string]any)["timer_late_p99_ns"] = -1
		}), "negative"},
		{"unknown field", RoleProxy, edit(RoleProxy, func(m map[string]any) { m["bogus"] = true }), "unknown field"},
		{"truncated", RoleBackend, files[RoleBackend][:len(files[RoleBackend])/2], "unexpected EOF"},
	}
	for _, tt := range tests {
		_, err := parseResult(tt.role, tt.data, resultBins)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: parseResult(%s) = %v, want an error with %q", tt.name, tt.role, err, tt.want)
		}
	}
}
