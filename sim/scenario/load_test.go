package scenario

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/retry"
)

func TestLoadGoodFiles(t *testing.T) {
	tests := []struct {
		file string
		runs []string
	}{
		{"minimal.yaml", []string{"minimal"}},
		{"runs-sweep.yaml", []string{
			"naive/rate=100", "naive/rate=150", "naive/rate=200",
			"tuned/rate=100", "tuned/rate=150", "tuned/rate=200"}},
		{"anchors.yaml", []string{"base", "two-attempts"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := Load(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range f.Runs {
				names = append(names, r.Name)
				if err := r.Scenario.Validate(); err != nil {
					t.Errorf("run %s does not validate: %v", r.Name, err)
				}
			}
			if !slices.Equal(names, tt.runs) {
				t.Errorf("runs = %q, want %q", names, tt.runs)
			}
		})
	}
}

func TestLoadBadFiles(t *testing.T) {
	tests := []struct {
		file string
		want []string // one substring per error line, in order
	}{
		{"bad-unknown-field.yaml", []string{
			"testdata/bad-unknown-field.yaml:5: clients.app.timout: unknown field (want one of name, target, arrivals, policy, timeout,"}},
		{"bad-duration.yaml", []string{
			`bad-duration.yaml:5: clients.app.timeout: 1000 is not a duration: write durations as strings such as "1s" or "50ms"`,
			`bad-duration.yaml:8: services.db.service_time.mean: "fast" is not a duration`}},
		{"bad-preset.yaml", []string{
			`bad-preset.yaml:5: clients.app.policy.preset: unknown policy preset "aws-2027" (want one of`,
			`bad-preset.yaml:8: clients.cron.policy: unknown policy preset "retry-forever"`}},
		{"bad-set-path.yaml", []string{
			`bad-set-path.yaml:10: run a: set clients.app.polcy: scenario.Client has no field "polcy"`,
			`bad-set-path.yaml:13: run b: set clients.web.policy: clients has no element "web" (have app)`,
			`bad-set-path.yaml:16: run c: set clients.app.timeout.seconds: "seconds" is inside a time.Duration`,
			`bad-set-path.yaml:19: run d: set triggers.0.at: triggers has no element "0" (the list is empty)`}},
		{"bad-validate.yaml", []string{
			`bad-validate.yaml:4: clients.app.target: "dbx" is not a service (have db)`,
			`bad-validate.yaml:5: clients.app.arrivals.count: a burst needs count > 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tt.file))
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d error lines, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q\nwant it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

// TestParseErrors covers problems that need no file of their own. Every
// error line must name the file and, where the problem has one, the line.
func TestParseErrors(t *testing.T) {
	const head = "name: x\nclients:\n  - {name: app, target: db}\nservices:\n  - name: db\n"
	tests := []struct{ name, src, want string }{
		{"empty", "", "f.yaml: the file is empty"},
		{"not a mapping", "- a\n- b\n", "f.yaml:1: a scenario file is a mapping"},
		{"two documents", head + "---\nname: y\n", "f.yaml:6: a second YAML document starts here"},
		{"only comments", "# nothing\n", "f.yaml: the file is empty"},
		{"syntax", "name: [x\n", "f.yaml:1: did not find expected"},
		{"alias bomb", "a: &a [*a, *a]\n", "f.yaml:1: the file expands to more than"},
		{"unknown top field", head + "durration: 5s\n", "f.yaml:6: durration: unknown field (want one of name, description, duration, bin,"},
		{"kind name", head + "    limiter: {kind: bogus}\n", `f.yaml:6: services.db.limiter.kind: limit: invalid config: kind "bogus"`},
		{"backoff kind in policy", "name: x\nclients:\n  - name: app\n    target: db\n    policy: {preset: sre, backoff: {kind: fancy}}\nservices: [{name: db}]\n",
			`f.yaml:5: clients.app.policy.backoff.kind: backoff: unknown kind "fancy"`},
		{"unknown policy field", "name: x\nclients:\n  - name: app\n    target: db\n    policy:\n      preset: sre\n      max_attemps: 2\nservices: [{name: db}]\n",
			"f.yaml:7: clients.app.policy.max_attemps: unknown field (want one of preset, max_attempts,"},
		{"duplicate policy key", "name: x\nclients:\n  - name: app\n    target: db\n    policy:\n      max_attempts: 2\n      max_attempts: 3\nservices: [{name: db}]\n",
			"f.yaml:7: clients.app.policy.max_attempts: is given twice (first at line 6)"},
		{"policy not a name", head + "runs: [{name: a, set: {clients.app.policy: 3}}]\n", "f.yaml:6: run a: clients.app.policy: a policy preset is a name"},
		{"run without name", head + "runs: [{set: {clients.app.timeout: 2s}}]\n", "f.yaml:6: a run needs a name"},
		{"run field", head + "runs: [{name: a, sett: {}}]\n", "f.yaml:6: field sett not found in a run"},
		{"duplicate run", head + "runs: [{name: a}, {name: a}]\n", `f.yaml:6: run name "a" is used twice`},
		{"set twice", head + "runs:\n  - name: a\n    set:\n      clients.app.timeout: 1s\n      clients.app.timeout: 2s\n",
			"f.yaml:10: set clients.app.timeout is already set at line 9"},
		{"set not a mapping", head + "runs: [{name: a, set: [x]}]\n", "f.yaml:6: set is a mapping"},
		{"sweep without values", head + "sweep: {set: clients.app.arrivals.rate}\n", "f.yaml:6: sweep needs set and values"},
		{"sweep bad path", head + "sweep: {set: clients.app.arivals.rate, values: [1]}\n",
			`f.yaml:6: run x/rate=1: set clients.app.arivals.rate: scenario.Client has no field "arivals"`},
		{"sweep bad value", head + "sweep:\n  set: clients.app.timeout\n  values: [1s, 2]\n",
			`f.yaml:8: run x/timeout=2: clients.app.timeout: 2 is not a duration`},
		{"sweep duplicate", head + "sweep: {set: clients.app.arrivals.rate, values: [1, 1]}\n", "f.yaml:6: sweep value 1 is listed twice"},
		{"empty path element", head + "runs: [{name: a, set: {clients..x: 1}}]\n", "f.yaml:6: run a: set clients..x: the path has an empty element"},
		// Value errors carry the line of the value and its path.
		{"negative rate", "name: x\nclients:\n  - name: app\n    target: db\n    arrivals:\n      rate: -5\nservices: [{name: db}]\n",
			"f.yaml:6: clients.app.arrivals.rate: -5 is not a finite non-negative number"},
		{"knee without drop", head + "    capacity_law: {kind: processor-sharing, knee: 10}\n",
			"f.yaml:6: services.db.capacity_law.drop: 0 must be in (0, 1) with a knee"},
		{"law kind", head + "    capacity_law:\n      kind: quantum\n", `f.yaml:7: services.db.capacity_law.kind: "quantum" is not one of fixed, processor-sharing, linear`},
		{"cache size", head + "    cache: {keys: 10, size: 20}\n", "f.yaml:6: services.db.cache.size: 20 is outside [1, keys = 10]"},
		{"crash restart", head + "    crash: {queue: 5}\n", "f.yaml:6: services.db.crash.restart: must be > 0"},
		{"hang probability", head + "    hang:\n      probability: 2\n", "f.yaml:7: services.db.hang.probability: 2 is outside [0, 1]"},
		{"mixture weight", head + "    service_time:\n      kind: mixture\n      of:\n        - {weight: 0, mean: 1ms}\n",
			"f.yaml:9: services.db.service_time.of.0.weight: 0 must be > 0"},
		{"failure cost", head + "    failure_cost: {refuse: -1ms}\n", "f.yaml:6: services.db.failure_cost.refuse: -1ms is negative"},
		{"replicas", head + "    replicas: -2\n", "f.yaml:6: services.db.replicas: -2 is outside [1, 10000]"},
		{"balancer", head + "    balancer: random\n", `f.yaml:6: services.db.balancer: "random" is not round-robin or least-outstanding`},
		{"flush without cache", head + "triggers:\n  - kind: cache-flush\n    target: db\n", `f.yaml:8: triggers.0.target: service "db" has no cache`},
		{"hang trigger factor", head + "triggers: [{kind: hang, target: db, factor: 0}]\n", "f.yaml:6: triggers.0.factor: 0: the probability that an attempt hangs must be in (0, 1]"},
		{"retry probability", "name: x\nclients:\n  - name: app\n    target: db\n    policy: {preset: naive, retry_probability: 1.5}\nservices: [{name: db}]\n",
			"f.yaml:5: clients.app.policy: retry: retry_probability 1.5 is outside [0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, tt.want)
			}
			for _, l := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(l, "f.yaml:") {
					t.Errorf("error line %q does not start with the file name", l)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "no-such-file.yaml"))
	if !os.IsNotExist(err) {
		t.Fatalf("err = %v, want a not-exist error", err)
	}
}

// policyOf decodes one client policy written in YAML.
func policyOf(t *testing.T, src string) PolicySpec {
	t.Helper()
	doc := "name: p\nclients:\n  - name: app\n    target: db\n    policy: " + src + "\nservices: [{name: db}]\n"
	f, err := Parse("p.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return f.Runs[0].Scenario.Clients[0].Policy
}

func mustPreset(t *testing.T, name string) retry.Policy {
	t.Helper()
	p, err := retry.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyPresetOverrides(t *testing.T) {
	aws := mustPreset(t, "aws-2026")
	got := policyOf(t, "{preset: aws-2026, max_attempts: 2}")
	want := aws
	want.MaxAttempts = 2
	if got.Preset != "aws-2026" || !reflect.DeepEqual(got.Policy, want) {
		t.Errorf("override max_attempts:\n got %+v\nwant %+v", got, want)
	}
	if got.Budget != aws.Budget || got.Budget.Kind == budget.KindNone {
		t.Errorf("the aws-2026 budget was not kept: %+v", got.Budget)
	}

	// A nested mapping overrides field by field.
	got = policyOf(t, "{preset: stormguard, backoff: {base: 10ms}}")
	sg := mustPreset(t, "stormguard")
	if got.Backoff.Base != 10*time.Millisecond || got.Backoff.Kind != sg.Backoff.Kind || got.Backoff.Cap != sg.Backoff.Cap {
		t.Errorf("backoff override: got %+v, want the stormguard backoff with base 10ms", got.Backoff)
	}

	// A scalar is the preset itself.
	if got := policyOf(t, "envoy"); got.Preset != "envoy" || !reflect.DeepEqual(got.Policy, mustPreset(t, "envoy")) {
		t.Errorf("scalar preset: got %+v", got)
	}

	// Without a preset, a mapping starts from the zero Policy.
	got = policyOf(t, "{max_attempts: 4, backoff: {kind: full-jitter}}")
	want = retry.Policy{MaxAttempts: 4, Backoff: backoff.Policy{Kind: backoff.FullJitter}}
	if got.Preset != "" || !reflect.DeepEqual(got.Policy, want) {
		t.Errorf("no preset: got %+v, want %+v", got, want)
	}
}

func TestPolicyMarshalRoundTrip(t *testing.T) {
	var specs []PolicySpec
	for _, name := range retry.Presets() {
		p := mustPreset(t, name)
		specs = append(specs, PolicySpec{Preset: name, Policy: p})
		q := p
		q.MaxAttempts = 7
		q.IgnoreSignals = !q.IgnoreSignals
		q.Backoff.Cap = 0
		q.ThrottleBackoff = nil
		q.Pushback = retry.Pushback{}
		specs = append(specs, PolicySpec{Preset: name, Policy: q})
		r := p
		r.ThrottleBackoff = &backoff.Policy{Kind: backoff.Constant, Base: time.Second}
		r.Budget = budget.Spec{}
		specs = append(specs, PolicySpec{Preset: name, Policy: r})
	}
	specs = append(specs, PolicySpec{}, PolicySpec{Policy: retry.Policy{MaxAttempts: 2, AttemptTimeout: time.Second}})
	for _, s := range specs {
		text, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		var back PolicySpec
		if err := yaml.Unmarshal(text, &back); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Errorf("round trip through\n%s got  %+v\nwant %+v", text, back, s)
		}
	}
	if text, _ := yaml.Marshal(PolicySpec{Preset: "sre", Policy: mustPreset(t, "sre")}); string(text) != "sre\n" {
		t.Errorf("an unchanged preset marshals as %q, want %q", text, "sre\n")
	}
}

func TestRunsAndSweep(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "runs-sweep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Base.Clients[0].Policy.Preset != "aws-2026" || f.Base.Clients[0].Arrivals.Rate != 100 {
		t.Errorf("base changed: %+v", f.Base.Clients[0])
	}
	rates := []float64{100, 150, 200}
	for i, r := range f.Runs {
		c, db := r.Scenario.Clients[0], r.Scenario.Services[0]
		if c.Arrivals.Rate != rates[i%3] {
			t.Errorf("%s: rate %v, want %v", r.Name, c.Arrivals.Rate, rates[i%3])
		}
		if i < 3 {
			if c.Policy.Preset != "naive" || !reflect.DeepEqual(c.Policy.Policy, mustPreset(t, "naive")) {
				t.Errorf("%s: policy %+v, want naive", r.Name, c.Policy)
			}
			if db.Limiter != nil || r.Scenario.Triggers[1].Factor != 2 {
				t.Errorf("%s: the tuned run's changes leaked", r.Name)
			}
			continue
		}
		aws := mustPreset(t, "aws-2026")
		if c.Policy.MaxAttempts != 3 || c.Policy.Backoff.Base != 10*time.Millisecond ||
			c.Policy.Backoff.Kind != aws.Backoff.Kind || c.Policy.Budget != aws.Budget {
			t.Errorf("%s: policy %+v", r.Name, c.Policy)
		}
		if db.Queue.Discipline != "first-tries-first" || db.Queue.Capacity != 100 || db.Limiter == nil || db.Limiter.Kind != "aimd" {
			t.Errorf("%s: service %+v", r.Name, db)
		}
		if r.Scenario.Triggers[1].Factor != 1.5 {
			t.Errorf("%s: trigger factor %v, want 1.5", r.Name, r.Scenario.Triggers[1].Factor)
		}
	}
	want := []string{"clients.app.policy: naive", "clients.app.arrivals.rate: 150"}
	if got := f.Runs[1].Changes; !slices.Equal(got, want) {
		t.Errorf("changes = %q, want %q", got, want)
	}
	if got := f.Runs[3].Changes[1]; got != "clients.app.policy.backoff: {base: 10ms}" {
		t.Errorf("a mapping value is described as %q", got)
	}
}

func TestAnchorsAndPresetPaths(t *testing.T) {
	f, err := Load(filepath.Join("testdata", "anchors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base, two := f.Runs[0].Scenario, f.Runs[1].Scenario
	if base.Clients[1].Policy.Preset != "stormguard" || base.Clients[1].Network.Latency.Max != 3*time.Millisecond {
		t.Errorf("aliases not expanded: %+v", base.Clients[1])
	}
	b := two.Clients[1].Policy
	if b.Preset != "stormguard" || b.MaxAttempts != 2 || b.Budget != mustPreset(t, "stormguard").Budget {
		t.Errorf("batch policy = %+v, want stormguard with 2 attempts", b)
	}
	if two.Clients[0].Policy.MaxAttempts != 3 {
		t.Errorf("the alias shares state: web has %d attempts", two.Clients[0].Policy.MaxAttempts)
	}
	if p := two.Services[0].Calls[0].Policy; p.Preset != "envoy" {
		t.Errorf("call policy = %+v, want envoy (calls are addressed by service)", p)
	}
}

// TestExamplesLoad checks every shipped scenario.
func TestExamplesLoad(t *testing.T) {
	names, err := fs.Glob(examples.Scenarios, "*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, n := range names {
		data, _ := examples.Scenarios.ReadFile(n)
		f, err := Parse(n, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(f.Runs) == 0 {
			t.Errorf("%s has no runs", n)
		}
	}
	f, err := Parse(examples.DefaultName, examples.Default())
	if err != nil || len(f.Runs) < 2 {
		t.Fatalf("the default scenario: %d runs, %v", len(f.Runs), err)
	}
}

func FuzzParse(f *testing.F) {
	quickMinimize()
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(examples.Default())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		if err != nil {
			for _, l := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(l, "fuzz.yaml") || len(l) <= len("fuzz.yaml: ") {
					t.Fatalf("error line %q does not name the file and a problem", l)
				}
			}
			return
		}
		for _, r := range file.Runs {
			if r.Name == "" {
				t.Fatal("a run has no name")
			}
			if err := r.Scenario.Validate(); err != nil {
				t.Fatalf("run %s was returned but does not validate: %v", r.Name, err)
			}
		}
	})
}

// quickMinimize bounds, unless -fuzzminimizetime is given, how long the
// fuzzer spends minimizing each input that finds new coverage: 60 s by
// default, during which it fuzzes nothing else (0 execs/s). A scenario of
// a kilobyte takes a few hundred microseconds to parse and its
// minimization tries up to n²/2 cuts: it ran out the 60 s, again and
// again. Call it at the top of a Fuzz function.
func quickMinimize() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		flag.Set("test.fuzzminimizetime", "3s")
	}
}

// TestScenarioErrorsAsPolicyFiles: a scenario's errors name the key with
// the keys valid at that place (YAML names, never a Go type), a policy
// file given as a scenario is recognised and pointed at check, and a
// syntax error is reported at the line where the text goes wrong, not at
// the start of the construct yaml was reading.
func TestScenarioErrorsAsPolicyFiles(t *testing.T) {
	const head = "name: t\nclients:\n  - name: app\n    target: db\n"
	tests := []struct {
		name, text string
		want       []string
		notWant    string
	}{
		{"typo in a client", head + "    polcy: naive\nservices: [{name: db}]\n",
			[]string{"f.yaml:5: clients.app.polcy: unknown field (want one of name, target, arrivals, policy,"}, "scenario."},
		{"typo in a nested block", head + "services:\n  - name: db\n    queue: {capacty: 10}\n",
			[]string{"f.yaml:7: services.db.queue.capacty: unknown field (want one of capacity, discipline, codel_target, codel_interval)"}, "QueueSpec"},
		{"typo in a trigger", head + "services: [{name: db}]\ntriggers:\n  - {kind: outage, target: db, at: 1s, duration: 1s, mdoe: drop}\n",
			[]string{"f.yaml:7: triggers.0.mdoe: unknown field (want one of kind, at, duration, target, mode,"}, "scenario.Trigger"},
		{"a policy file", "service: checkout\nclients:\n  db: stormguard\nserver: {max_timeout: 5s}\n",
			[]string{"this is a policy file", "stormguard check f.yaml"}, "cannot unmarshal"},
		{"an unclosed flow mapping", head + "    arrivals: {rate: 10\nservices: [{name: db}]\n",
			[]string{"f.yaml:5: did not find expected ',' or '}'"}, ""},
		{"a key indented wrong", head + "   arrivals: {rate: 10}\nservices: [{name: db}]\n",
			[]string{"f.yaml:5: did not find expected '-' indicator"}, ""},
		{"a list where a mapping goes", head + "    arrivals: [10]\nservices: [{name: db}]\n",
			[]string{"f.yaml:5: clients.app.arrivals: want a mapping (kind, rate, schedule,"}, ""},
	}
	for _, tt := range tests {
		_, err := Parse("f.yaml", []byte(tt.text))
		if err == nil {
			t.Errorf("%s: loaded", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error\n%v\nwant it to contain %q", tt.name, err, w)
			}
		}
		if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
			t.Errorf("%s: error %v contains %q", tt.name, err, tt.notWant)
		}
	}
}
