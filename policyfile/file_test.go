package policyfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

const example = "../examples/policy/checkout.yaml"

func mustLoad(t *testing.T, path string) *File {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustClient(t *testing.T, f *File, dep string) *Client {
	t.Helper()
	c, err := f.Client(dep)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadExample(t *testing.T) {
	f := mustLoad(t, example)
	db, pay, search := mustClient(t, f, "db"), mustClient(t, f, "payments"), mustClient(t, f, "search")
	sg, _ := retry.Preset("stormguard")
	aws, _ := retry.Preset("aws-2026")
	tests := []struct {
		name      string
		got, want any
	}{
		{"service", f.Service, "checkout"},
		{"dependencies in file order", []string{f.Clients[0].Dependency, f.Clients[1].Dependency, f.Clients[2].Dependency}, []string{"db", "payments", "search"}},
		{"db preset", db.Preset, "stormguard"},
		{"db max_attempts (overrides the preset's 3)", db.Policy.MaxAttempts, 2},
		{"db attempt_timeout", db.Policy.AttemptTimeout, 300 * time.Millisecond},
		{"db budget (the preset's)", db.Policy.Budget, sg.Budget},
		{"db learn_attempt_time (the preset's)", db.Policy.LearnAttemptTime, true},
		{"db breaker preset", db.BreakerPreset, "stormguard"},
		{"db breaker failures", db.Breaker.Failures, 5},
		{"payments budget (the preset's)", pay.Policy.Budget, aws.Budget},
		{"payments pushback.max_extra", pay.Policy.Pushback.MaxExtra, 10 * time.Second},
		{"payments keeps the preset's ignore_signals", pay.Policy.IgnoreSignals, true},
		{"payments has no breaker", pay.Breaker == nil, true},
		{"search preset", search.Preset, ""},
		{"search hedge", *search.Policy.Hedge, retry.HedgePolicy{MaxAttempts: 2, Delay: 50 * time.Millisecond}},
		{"search budget", search.Policy.Budget, budget.Spec{Kind: budget.KindWindow, Window: 10 * time.Second, Ratio: 0.1}},
		{"search backoff", search.Policy.Backoff, backoff.Policy{Kind: backoff.FullJitter, Base: 20 * time.Millisecond, Cap: time.Second}},
		{"server max_timeout", f.Server.MaxTimeout, 5 * time.Second},
		{"server min_remaining", f.Server.MinRemaining, 20 * time.Millisecond},
		{"server limit", f.Server.Limit, limit.Spec{Kind: limit.KindGradient2, Gradient2: limit.Gradient2Config{Min: 10, Max: 200}}},
		{"server queue", f.Server.Queue, shed.Config{Capacity: 500, Order: shed.AdaptiveLIFO}},
	}
	for _, tt := range tests {
		if !equal(tt.got, tt.want) {
			t.Errorf("%s = %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

func equal(a, b any) bool {
	switch a := a.(type) {
	case []string:
		b := b.([]string)
		return strings.Join(a, ",") == strings.Join(b, ",")
	}
	return a == b
}

// TestJSONIsTheSameFile: the JSON example is the YAML example written in
// JSON; both read to the same effective policy.
func TestJSONIsTheSameFile(t *testing.T) {
	y, j := mustLoad(t, example), mustLoad(t, "../examples/policy/checkout.json")
	got, err := j.EffectiveYAML()
	if err != nil {
		t.Fatal(err)
	}
	want, err := y.EffectiveYAML()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("checkout.json reads differently from checkout.yaml:\n%s\nwant\n%s", got, want)
	}
}

// TestParseErrors: every problem, at its line, with its path.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // one substring per error line, in order
	}{
		{"empty", "", []string{"p.yaml: the file is empty"}},
		{"nothing", "service: x\n", []string{"p.yaml:1: the file configures nothing"}},
		{"syntax", "clients:\n  db: {max_attempts: 2\n", []string{"p.yaml:"}},
		{"two documents", "service: a\n---\nservice: b\n", []string{"p.yaml:2: a second YAML document"}},
		{"not a mapping", "- a\n", []string{"p.yaml:1: a policy file is a mapping"}},
		{"unknown top-level field", "service: x\nclient:\n  db: naive\n", []string{
			"p.yaml:2: client: unknown field (want one of service, description, clients, server)"}},
		{"unknown field", "clients:\n  db:\n    max_atempts: 2\n", []string{
			"p.yaml:3: clients.db.max_atempts: unknown field (want one of preset, breaker, max_attempts,"}},
		{"unknown nested field", "clients:\n  db:\n    backoff: {kind: full-jitter, bse: 1s}\n", []string{
			"p.yaml:3: clients.db.backoff.bse: unknown field (want one of kind, base, cap, multiplier, jitter)"}},
		{"every problem", "clients:\n  db:\n    max_attempts: two\n    attempt_timeout: 100\n  web:\n    backoff: {kind: quadratic}\n", []string{
			`p.yaml:3: clients.db.max_attempts: "two" is not a whole number`,
			`p.yaml:4: clients.db.attempt_timeout: 100 is not a duration: write durations as strings such as "1s" or "50ms"`,
			`p.yaml:6: clients.web.backoff.kind: backoff: unknown kind "quadratic"`}},
		{"bad duration", "clients:\n  db: {attempt_timeout: soon}\n", []string{
			`p.yaml:2: clients.db.attempt_timeout: "soon" is not a duration`}},
		{"unknown preset", "clients:\n  db: stormguardd\n  web: {preset: aws}\n", []string{
			`p.yaml:2: clients.db: unknown retry preset "stormguardd" (a retry preset is a name, one of aws-2026,`,
			`p.yaml:3: clients.web.preset: unknown retry preset "aws"`}},
		{"unknown breaker preset", "clients:\n  db:\n    breaker: hystrix\n", []string{
			`p.yaml:3: clients.db.breaker: unknown breaker preset "hystrix"`}},
		{"empty client", "clients:\n  db:\n", []string{"p.yaml:2: clients.db: has no policy"}},
		{"empty clients", "clients: {}\n", []string{"p.yaml:1: clients: is empty"}},
		{"dependency with a dot", "clients:\n  db.main: naive\n", []string{"p.yaml:2: clients.db.main: a dependency's name has no dots"}},
		{"given twice", "clients:\n  db:\n    max_attempts: 2\n    max_attempts: 3\n", []string{
			"p.yaml:4: clients.db.max_attempts: is given twice"}},
		{"null value", "clients:\n  db:\n    budget:\n", []string{
			"p.yaml:3: clients.db.budget: has no value: leave the field out for its default"}},
		{"NaN", "clients:\n  db:\n    retry_probability: .nan\n", []string{
			"p.yaml:3: clients.db.retry_probability: .nan is not a finite number"}},
		{"a list for a mapping", "clients:\n  db:\n    backoff: [1, 2]\n", []string{
			"p.yaml:3: clients.db.backoff: want a mapping (kind, base, cap, multiplier, jitter), not a list"}},
		{"too large", "clients:\n  db:\n    max_attempts: 99999999999999999999\n", []string{
			`p.yaml:3: clients.db.max_attempts: "99999999999999999999" is not a whole number`}},
		// Value errors: the validators of retry, breaker and admit, at
		// the line of the field they name.
		{"retry validator", "clients:\n  db:\n    preset: sre\n    hedge:\n      max_attempts: 9\n", []string{
			"p.yaml:5: clients.db: hedge.max_attempts 9 is outside [1, 5]"}},
		{"backoff, not throttle_backoff", "clients:\n  db:\n    throttle_backoff: {kind: constant, base: 1s}\n    backoff:\n      kind: constant\n      base: -1s\n", []string{
			"p.yaml:6: clients.db: backoff: base -1s is negative"}},
		{"budget validator", "clients:\n  db:\n    budget:\n      kind: token-ratio\n      max_tokens: 5000\n", []string{
			"p.yaml:5: clients.db: budget: max_tokens must be in (0, 1000]"}},
		{"breaker validator", "clients:\n  db:\n    breaker:\n      mode: rate\n      failure_rate: 2\n      buckets: 5000\n", []string{
			"p.yaml:5: clients.db.breaker: failure_rate 2 is outside (0, 1]",
			"p.yaml:6: clients.db.breaker: buckets 5000 is outside [1, 1000]"}},
		{"breaker stops", "clients:\n  db:\n    breaker: {preset: rate, stops: first-tries}\n", []string{
			`p.yaml:3: clients.db.breaker: stops "first-tries" is unknown (want calls or retries)`}},
		{"server validator", "server:\n  max_timeout: 1s\n  min_remaining: 2s\n", []string{
			"p.yaml:3: server: min_remaining 2s is not below max_timeout 1s"}},
		{"server queue", "server:\n  queue:\n    codel_target: 1s\n", []string{
			"p.yaml:3: server: queue: codel_target 1s exceeds codel_interval 100ms"}},
		{"server queue order", "server:\n  queue: {order: sideways}\n", []string{
			`p.yaml:2: server.queue.order: order "sideways" is unknown (want fifo, lifo or adaptive-lifo)`}},
		{"server criticality", "server:\n  max_criticality: urgent\n", []string{"p.yaml:2: server.max_criticality:"}},
		{"runtime fields are not configuration", "server:\n  limiter: {}\n", []string{
			"p.yaml:2: server.limiter: unknown field (want one of max_timeout, min_remaining, retry_after, limit, queue, max_criticality"}},
		{"alias bomb", bomb(), []string{"p.yaml:1: the file expands to more than 100000 nodes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.text))
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("%d error lines, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
			var le *LineError
			if !errors.As(err, &le) || le.File != "p.yaml" {
				t.Errorf("the error holds no *LineError of p.yaml: %#v", err)
			}
		})
	}
}

// bomb is a billion-laughs file: each level refers to the one above ten
// times.
func bomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		prev := "*a" + string(rune('0'+i-1))
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(prev)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// TestExplicitZero: a zero that would silently become a default is an
// error; a zero that is the default, or that a pointer field holds, is a
// value.
func TestExplicitZero(t *testing.T) {
	tests := []struct {
		field string // a client's field, in flow YAML
		ok    bool
	}{
		{"max_attempts: 0", false},
		{"backoff: {kind: exponential, base: 0s}", false},
		{"backoff: {kind: exponential, cap: 0s}", false},
		{"backoff: {kind: exponential, multiplier: 0}", false},
		{"backoff: {kind: proportional, jitter: 0}", false}, // would be 0.2
		{"pushback: {max_extra: 0s}", false},
		{"pushback: {max: 0s}", false},
		{"budget: {kind: token-bucket, capacity: 0}", false},
		{"budget: {kind: token-bucket, success_reward: 0}", false},
		{"budget: {kind: concurrency, percent: 0}", false},
		{"budget: {kind: window, window: 0s, floor: 1}", false},
		{"hedge: {max_attempts: 0}", false},
		{"breaker: {failures: 0}", false},
		{"breaker: {delay: 0s}", false},
		{"backoff: {kind: \"\"}", false},
		{"attempt_timeout: 0s", true}, // 0: only the caller's deadline, the default
		{"min_attempt_time: 0s", true},
		{"retry_probability: 0", true}, // a pointer: never retry
		{"hedge: {delay: 0s}", true},   // every copy at once, the default
		{"budget: {kind: window, ratio: 0, floor: 1}", true},
		{"breaker: {jitter: 0}", true}, // a pointer: no jitter
		{"backoff: {kind: none}", true},
		{"ignore_signals: false", true},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("clients:\n  db: {"+tt.field+"}\n"))
			if got := err == nil; got != tt.ok {
				t.Errorf("ok = %v, want %v (%v)", got, tt.ok, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "p.yaml:2: clients.db.") {
				t.Errorf("error %q is not at the field's line and path", err)
			}
		})
	}
	server := []struct {
		field string
		ok    bool
	}{
		{"max_timeout: 0s", false},
		{"retry_after: 0s", false},
		{"queue: {capacity: 0}", false},
		{"limit: {kind: vegas, vegas: {max: 0}}", false},
		{"min_remaining: 0s", true},
		{"queue: {min_remaining: 0s}", true},
		{"max_criticality: critical", true}, // the zero Criticality, by name
	}
	for _, tt := range server {
		t.Run(tt.field, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("server: {"+tt.field+"}\n"))
			if got := err == nil; got != tt.ok {
				t.Errorf("ok = %v, want %v (%v)", got, tt.ok, err)
			}
		})
	}
}

// TestPresetMerge: a block's fields replace the preset's one by one, nested
// ones too, and never write through the preset.
func TestPresetMerge(t *testing.T) {
	f, err := Parse("p.yaml", []byte(`
clients:
  db:
    preset: stormguard
    backoff: {base: 10ms}
    throttle_backoff: {cap: 2s}
    breaker: {preset: rate, min_calls: 5, stops: retries}
  web:
    <<: {max_attempts: 4, attempt_timeout: 1s}
    max_attempts: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	sg, _ := retry.Preset("stormguard")
	db, web := mustClient(t, f, "db"), mustClient(t, f, "web")
	tests := []struct {
		name      string
		got, want any
	}{
		{"backoff keeps the preset's kind and cap", db.Policy.Backoff,
			backoff.Policy{Kind: backoff.FullJitter, Base: 10 * time.Millisecond, Cap: 10 * time.Second}},
		{"throttle_backoff merges into the preset's", *db.Policy.ThrottleBackoff,
			backoff.Policy{Kind: backoff.FullJitter, Base: time.Second, Cap: 2 * time.Second}},
		{"the preset is untouched", *sg.ThrottleBackoff, backoff.Policy{Kind: backoff.FullJitter, Base: time.Second, Cap: 10 * time.Second}},
		{"breaker mode from its preset", db.Breaker.Mode, breaker.Rate},
		{"breaker min_calls", db.Breaker.MinCalls, 5},
		{"breaker stops", db.Breaker.Stops, breaker.StopsRetries},
		{"merge key: own field wins", web.Policy.MaxAttempts, 2},
		{"merge key: merged field", web.Policy.AttemptTimeout, time.Second},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

// TestEffectiveReadsBack: the effective policy, in YAML and in JSON, is a
// policy file that reads to the same effective policy, and it fills what
// the retrier fills.
func TestEffectiveReadsBack(t *testing.T) {
	files := map[string][]byte{}
	for _, p := range []string{example, "../examples/policy/checkout.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	files["defaults.yaml"] = []byte("clients:\n  a: {}\n  b: naive\n  c: {breaker: {mode: rate}, budget: {kind: concurrency}}\nserver: {}\n")
	files["kinds.yaml"] = []byte("clients:\n  a: {backoff: {kind: proportional}, budget: {kind: token-ratio}, retry_probability: 0.5}\n" +
		"  b: {backoff: {kind: decorrelated-jitter}, breaker: {jitter: 0}, budget: {kind: window, floor: 2}}\n" +
		"server: {limit: {kind: aimd}, queue: {min_remaining: 5ms}}\n")
	for _, p := range retry.Presets() {
		files["preset-"+p+".yaml"] = []byte("clients:\n  d: " + p + "\n")
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			f, err := Parse(name, data)
			if err != nil {
				t.Fatal(err)
			}
			want, err := f.EffectiveYAML()
			if err != nil {
				t.Fatal(err)
			}
			for _, enc := range []string{"yaml", "json"} {
				out := want
				if enc == "json" {
					if out, err = f.EffectiveJSON(); err != nil {
						t.Fatal(err)
					}
				}
				back, err := Parse("effective."+enc, out)
				if err != nil {
					t.Fatalf("the effective %s does not read back: %v\n%s", enc, err, out)
				}
				got, _ := back.EffectiveYAML()
				if !bytes.Equal(stripComments(got), stripComments(want)) {
					t.Errorf("the effective %s reads back as\n%s\nwant\n%s", enc, got, want)
				}
			}
			for i := range f.Clients {
				c := &f.Clients[i]
				r, err := c.NewRetrier()
				if err != nil {
					t.Fatal(err)
				}
				if got, want := c.EffectivePolicy().WithDefaults(), r.Policy(); got.MaxAttempts != want.MaxAttempts ||
					got.Budget.Kind != want.Budget.Kind || got.Pushback != want.Pushback {
					t.Errorf("%s: effective %+v, the retrier applies %+v", c.Dependency, got, want)
				}
			}
		})
	}
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out
}

// TestNewRetrier: the retrier applies the file's policy, with its breaker;
// a breaker among the options replaces the file's.
func TestNewRetrier(t *testing.T) {
	f := mustLoad(t, example)
	db := mustClient(t, f, "db")
	r, err := db.NewRetrier()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Policy(), db.Policy.WithDefaults(); got.MaxAttempts != want.MaxAttempts || got.AttemptTimeout != want.AttemptTimeout || got.Budget != want.Budget {
		t.Errorf("retrier policy %+v, want %+v", got, want)
	}
	if r.Breaker() == nil || r.Breaker().Spec() != db.Breaker.WithDefaults() {
		t.Errorf("retrier breaker %v, want the file's %+v", r.Breaker(), db.Breaker)
	}
	mine := breaker.MustNew(breaker.Spec{Failures: 1})
	r, err = db.NewRetrier(retry.WithBreaker(mine))
	if err != nil {
		t.Fatal(err)
	}
	if r.Breaker() != mine {
		t.Error("retry.WithBreaker does not replace the file's breaker")
	}
	pay := mustClient(t, f, "payments")
	if r, err := pay.NewRetrier(); err != nil || r.Breaker() != nil {
		t.Errorf("payments: breaker %v, err %v; want none", r.Breaker(), err)
	}
	if b, err := pay.NewBreaker(); b != nil || err != nil {
		t.Errorf("NewBreaker without a breaker = %v, %v; want nil, nil", b, err)
	}
	if _, err := f.Client("cache"); err == nil || !strings.Contains(err.Error(), `no client policy for dependency "cache" (have db, payments, search)`) {
		t.Errorf("Client(cache) error = %v", err)
	}
}

// TestHTTPServer: the server block configures an httpx server.
func TestHTTPServer(t *testing.T) {
	f := mustLoad(t, example)
	c := f.HTTPServer()
	want := httpx.ServerConfig{
		Config: admit.Config{
			MaxTimeout:   5 * time.Second,
			MinRemaining: 20 * time.Millisecond,
			Limit:        f.Server.Limit,
			Queue:        f.Server.Queue,
		},
	}
	if c.MaxTimeout != want.MaxTimeout || c.MinRemaining != want.MinRemaining || c.Limit != want.Limit || c.Queue != want.Queue {
		t.Errorf("HTTPServer() = %+v, want %+v", c, want)
	}
	if _, err := httpx.NewServer(c); err != nil {
		t.Errorf("httpx.NewServer refuses the file's server: %v", err)
	}
	none, err := Parse("p.yaml", []byte("clients: {db: naive}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := none.HTTPServer(); got.MaxTimeout != 0 || got.Limit != (limit.Spec{}) {
		t.Errorf("without a server block HTTPServer() = %+v, want the zero config", got)
	}
}

func TestReadLimits(t *testing.T) {
	big := bytes.Repeat([]byte("#"), MaxFileSize+1)
	if _, err := Read("big.yaml", bytes.NewReader(big)); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("a file of %d bytes: %v, want ErrFileTooLarge", len(big), err)
	}
	if _, err := Load("testdata/none.yaml"); err == nil {
		t.Error("a missing file loads")
	}
}

// TestServerFieldsShared: the server block (admit.Config) is what
// httpx.ServerConfig embeds, so HTTPServer loses nothing, and the effective
// policy of a block that sets every field reads back.
func TestServerFieldsShared(t *testing.T) {
	f, err := Parse("p.yaml", []byte("server:\n  max_timeout: 2s\n  min_remaining: 5ms\n  retry_after: 3s\n"+
		"  limit: {kind: fixed, limit: 40}\n  queue: {capacity: 10}\n  max_criticality: sheddable-plus\n  supersede: {ttl: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.HTTPServer().Config; !reflect.DeepEqual(got, *f.Server) {
		t.Errorf("HTTPServer().Config = %+v, want the block %+v", got, *f.Server)
	}
	if names := fieldNames(reflect.TypeFor[admit.Config]()); len(names) < 7 {
		t.Errorf("admit.Config's configuration fields: %v", names)
	}
	if got := f.HTTPServer(); got.RetryAfter != 3*time.Second || got.MaxCriticality != wire.SheddablePlus || got.Supersede == nil || got.Supersede.TTL != 5*time.Second {
		t.Errorf("HTTPServer() = %+v", got)
	}
	out, err := f.EffectiveYAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("effective.yaml", out); err != nil {
		t.Errorf("the effective server does not read back: %v\n%s", err, out)
	}
}
