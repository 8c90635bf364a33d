package schema_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/retry"
)

var update = flag.Bool("update", false, "rewrite the generated table of docs/metrics.md")

// The names follow the schema's rules: a prefix per side, _total on
// counters and only there, the unit's suffix, unique names, and labels that
// start with target and mean one thing.
func TestNames(t *testing.T) {
	seen := map[string]bool{}
	valid := regexp.MustCompile(`^stormguard_[a-z_]+[a-z]$`)
	suffix := map[string]string{"s": "_seconds", "{token}": "_tokens"}
	for _, m := range schema.All() {
		t.Run(m.Name, func(t *testing.T) {
			if seen[m.Name] {
				t.Error("name used twice")
			}
			seen[m.Name] = true
			if !valid.MatchString(m.Name) {
				t.Errorf("not a valid name: want %v", valid)
			}
			prefix := "stormguard_" + string(m.Side) + "_"
			if !m.External && !strings.HasPrefix(m.Name, prefix) {
				t.Errorf("want the prefix %s of its side", prefix)
			}
			if got := strings.HasSuffix(m.Name, "_total"); got != (m.Kind == schema.Counter) {
				t.Errorf("kind %v, ends in _total: %v; want _total on counters only", m.Kind, got)
			}
			base := strings.TrimSuffix(m.Name, "_total")
			if s, ok := suffix[m.Unit]; ok && !strings.HasSuffix(base, s) {
				t.Errorf("unit %s: want the suffix %s", m.Unit, s)
			}
			if m.Kind == schema.Gauge && m.Unit == "{request}" && !strings.HasSuffix(m.Name, "_requests") {
				t.Errorf("a gauge of requests: want the suffix _requests")
			}
			if m.Unit == "" || m.Help == "" {
				t.Error("no unit or no help")
			}
			if len(m.Labels) == 0 || m.Labels[0] != schema.LabelTarget {
				t.Errorf("labels %v; want target first", m.Labels)
			}
			if (m.Kind == schema.Histogram) != (len(m.Buckets) > 0) || !slices.IsSorted(m.Buckets) {
				t.Errorf("buckets %v for a %v", m.Buckets, m.Kind)
			}
			if got, ok := schema.Lookup(m.Name); !ok || got.Name != m.Name {
				t.Error("Lookup does not find it")
			}
		})
	}
	if _, ok := schema.Lookup("stormguard_goodput_total"); ok {
		t.Error("Lookup found a name that is not in the schema")
	}
}

// AttemptIndex and RequestIndex index their series lists one to one.
func TestSeriesIndexes(t *testing.T) {
	series := schema.AttemptSeries()
	if len(series) != schema.NumAttemptSeries {
		t.Fatalf("%d attempt series; want %d", len(series), schema.NumAttemptSeries)
	}
	hit := map[int]bool{}
	for _, attempt := range []int{1, 2, 7} {
		for _, c := range schema.Classes {
			i, ok := schema.AttemptIndex(attempt, c)
			if !ok || series[i][0] != schema.Try(attempt) || series[i][1] != c.String() {
				t.Errorf("attempt %d, %v: index %d (%v) → %v", attempt, c, i, ok, series[i])
			}
			hit[i] = true
		}
	}
	if len(hit) != len(series) {
		t.Errorf("%d of %d attempt series reachable", len(hit), len(series))
	}
	if _, ok := schema.AttemptIndex(1, retry.Class(200)); ok {
		t.Error("an unknown class has a series")
	}

	requests := schema.RequestSeries()
	if len(requests) != schema.NumRequestSeries {
		t.Fatalf("%d request series; want %d", len(requests), schema.NumRequestSeries)
	}
	tests := []struct {
		reason              error
		outcome, wantReason string
	}{
		{nil, "success", ""},
		{retry.ErrAttemptsExhausted, "gave-up", "attempts-exhausted"},
		{retry.ErrBudgetExhausted, "gave-up", "budget-exhausted"},
		{retry.ErrDeadline, "gave-up", "deadline"},
		{retry.ErrNotRetryable, "gave-up", "not-retryable"},
		{retry.ErrServerSaidStop, "gave-up", "server-said-stop"},
		{retry.ErrRetriesDisabled, "gave-up", "retries-disabled"},
		{retry.ErrCanceled, "gave-up", "canceled"},
		{retry.ErrRetryDeclined, "gave-up", "retry-declined"},
		{fmt.Errorf("wrapped: %w", retry.ErrBudgetExhausted), "gave-up", "budget-exhausted"},
		{errors.New("something else"), "gave-up", "other"},
	}
	for _, tt := range tests {
		got := requests[schema.RequestIndex(tt.reason)]
		if got[0] != tt.outcome || got[1] != tt.wantReason {
			t.Errorf("%v: %v; want %s, %s", tt.reason, got, tt.outcome, tt.wantReason)
		}
	}
}

// ServerValues puts every request that ended in exactly one series, and
// first tries and retries add up to the arrivals.
func TestServerValues(t *testing.T) {
	st := admit.Stats{
		Arrived: 100, Retries: 30, InFlight: 2, Limit: 8, Queued: 3,
		Goodput: 40, Failed: 5, Wasted: 9, WastedLate: 4,
		Shed:    [admit.NumShedReasons]uint64{1, 2, 3, 4, 5, 6},
		Expired: 7, ExpiredQueued: 6, Canceled: 4, Superseded: 3, Joined: 2,
	}
	s := schema.ServerValues(st)
	want := map[[2]string]uint64{
		{"goodput", ""}: 40, {"failed", ""}: 5, {"wasted", "deadline"}: 4, {"wasted", "caller-left"}: 5,
		{"shed", "queue-full"}: 1, {"shed", "evicted"}: 2, {"shed", "queue-timeout"}: 3, {"shed", "kill-switch"}: 4, {"shed", "throttled"}: 5, {"shed", "key-busy"}: 6,
		{"expired", "on-arrival"}: 1, {"expired", "in-queue"}: 6, {"canceled", ""}: 4,
		{"superseded", "replaced"}: 3, {"superseded", "joined"}: 2,
	}
	outcomes := schema.ServerOutcomes()
	if len(outcomes) != schema.NumServerOutcomes || len(want) != schema.NumServerOutcomes {
		t.Fatalf("%d outcomes, %d expected; want %d", len(outcomes), len(want), schema.NumServerOutcomes)
	}
	var sum uint64
	for i, o := range outcomes {
		if got := s.Requests[i]; got != want[[2]string{o[0], o[1]}] {
			t.Errorf("%v = %d; want %d", o, got, want[[2]string{o[0], o[1]}])
		}
		sum += s.Requests[i]
	}
	if ended := st.Goodput + st.Failed + st.Wasted + st.ShedTotal() + st.Expired + st.Canceled + st.Superseded + st.Joined; sum != ended {
		t.Errorf("the outcomes add up to %d; want the %d requests that ended", sum, ended)
	}
	if s.Offered != [2]uint64{70, 30} || s.Limit != 8 || s.InFlight != 2 || s.Queued != 3 {
		t.Errorf("offered %v, limit %d, in flight %d, queued %d; want [70 30], 8, 2, 3", s.Offered, s.Limit, s.InFlight, s.Queued)
	}
}

// A refusal's outcome and reason are those of the series it is counted in.
func TestRefusal(t *testing.T) {
	tests := []struct {
		d                      admit.Decision
		outcome, reason, event string
	}{
		{admit.Decision{Answer: admit.InstanceOverloaded, Reason: admit.ShedQueueFull}, "shed", "queue-full", schema.SpanShed},
		{admit.Decision{Answer: admit.ServiceOverloaded, Reason: admit.ShedKillSwitch}, "shed", "kill-switch", schema.SpanShed},
		{admit.Decision{Answer: admit.Throttled, Reason: admit.ShedThrottled}, "shed", "throttled", schema.SpanShed},
		{admit.Decision{Answer: admit.Expired}, "expired", "", schema.SpanExpired},
		{admit.Decision{Answer: admit.Canceled}, "canceled", "", schema.SpanCanceled},
		{admit.Decision{Answer: admit.Throttled, Reason: admit.ShedKeyBusy}, "shed", "key-busy", schema.SpanShed},
		{admit.Decision{Answer: admit.Superseded}, "superseded", "replaced", schema.SpanSuperseded},
		{admit.Decision{Answer: admit.Joined, Result: "r"}, "superseded", "joined", schema.SpanSuperseded},
	}
	for _, tt := range tests {
		o, r, e := schema.Refusal(tt.d)
		if o != tt.outcome || r != tt.reason || e != tt.event {
			t.Errorf("%+v: %s, %s, %s; want %s, %s, %s", tt.d, o, r, e, tt.outcome, tt.reason, tt.event)
		}
	}
}

// A recorder's hooks move one attempt series per attempt and one request
// series per request, with the request's duration.
func TestClientRecorder(t *testing.T) {
	type move struct {
		kind    string
		i       int
		seconds float64
	}
	var got []move
	rec := schema.ClientRecorder{
		Attempt: func(_ context.Context, i int) { got = append(got, move{"attempt", i, 0}) },
		Request: func(_ context.Context, i int, s float64) { got = append(got, move{"request", i, s}) },
	}
	h := rec.Hooks()
	ctx := context.Background()
	for _, e := range []retry.Event{
		{Kind: retry.EventAttempt, Attempt: 1, Class: retry.Transient},
		{Kind: retry.EventRetry, Attempt: 1, Delay: time.Second},
		{Kind: retry.EventAttempt, Attempt: 2, Class: retry.Success},
		{Kind: retry.EventSucceeded, Attempt: 2, Took: 1500 * time.Millisecond},
		{Kind: retry.EventAttempt, Attempt: 1, Class: retry.NeverRetry},
		{Kind: retry.EventGaveUp, Attempt: 1, Reason: retry.ErrNotRetryable, Took: time.Second / 4},
	} {
		h.OnEvent(ctx, e)
	}
	idx := func(attempt int, c retry.Class) int { i, _ := schema.AttemptIndex(attempt, c); return i }
	want := []move{
		{"attempt", idx(1, retry.Transient), 0},
		{"attempt", idx(2, retry.Success), 0},
		{"request", 0, 1.5},
		{"attempt", idx(1, retry.NeverRetry), 0},
		{"request", schema.RequestIndex(retry.ErrNotRetryable), 0.25},
	}
	if !slices.Equal(got, want) {
		t.Errorf("moves %v; want %v", got, want)
	}
}

type fleetLike struct {
	budget.Unlimited
}

func (fleetLike) Fallback() bool { return true }

func TestBudgetReaders(t *testing.T) {
	bucket, err := budget.Spec{Kind: budget.KindTokenBucket, Capacity: 50, RetryCost: 5, SuccessReward: 1}.New()
	if err != nil {
		t.Fatal(err)
	}
	ratio, err := budget.Spec{Kind: budget.KindTokenRatio, MaxTokens: 10, TokenRatio: 0.1}.New()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                string
		b                   budget.Budget
		level, capacity     float64 // -1: no reader
		hasFallback         bool
		wantFallbackReading bool
	}{
		{"token bucket", bucket, 50, 50, false, false},
		{"token ratio", ratio, 10, 10, false, false},
		{"unlimited", budget.Unlimited{}, -1, -1, false, false},
		{"a fleet's", fleetLike{}, -1, -1, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			level, capacity, fallback := schema.BudgetReaders(tt.b)
			read := func(f func() float64) float64 {
				if f == nil {
					return -1
				}
				return f()
			}
			if got := read(level); got != tt.level {
				t.Errorf("level %v; want %v", got, tt.level)
			}
			if got := read(capacity); got != tt.capacity {
				t.Errorf("capacity %v; want %v", got, tt.capacity)
			}
			if (fallback != nil) != tt.hasFallback || fallback != nil && fallback() != tt.wantFallbackReading {
				t.Errorf("fallback reader %v; want %v", fallback != nil, tt.hasFallback)
			}
		})
	}
}

// The table of docs/metrics.md is the schema's: regenerate it with
// go test ./metrics/schema -update.
func TestDocsTable(t *testing.T) {
	const path = "../../docs/metrics.md"
	const begin, end = "<!-- schema table: generated by go test ./metrics/schema -update -->\n", "<!-- end of schema table -->\n"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s: no generated table between %q and %q", path, begin, end)
	}
	want := table()
	got := string(doc[i+len(begin) : j])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i+len(begin)]...), want...), doc[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the schema table is out of date; run go test ./metrics/schema -update\ngot:\n%s\nwant:\n%s", path, got, want)
}

// table renders the schema as Markdown.
func table() string {
	var b strings.Builder
	b.WriteString("| name | type | unit | side | labels | meaning |\n|---|---|---|---|---|---|\n")
	for _, m := range schema.All() {
		meaning := m.Help
		if m.Kind == schema.Histogram {
			meaning += fmt.Sprintf(" Buckets: %g to %g.", m.Buckets[0], m.Buckets[len(m.Buckets)-1])
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s | %s |\n", m.Name, m.Kind, m.Unit, m.Side, strings.Join(m.Labels, ", "), meaning)
	}
	b.WriteString("\nThe values of the labels:\n\n| metric | label values |\n|---|---|\n")
	values := func(name string, series []schema.Labels, labels ...string) {
		var vs []string
		for _, s := range series {
			var kv []string
			for i, l := range labels {
				if s[i] != "" {
					kv = append(kv, fmt.Sprintf("%s=%s", l, s[i]))
				}
			}
			vs = append(vs, "`"+strings.Join(kv, ",")+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.Join(vs, " "))
	}
	values(schema.ClientAttempts.Name, schema.AttemptSeries(), "try", "class")
	values(schema.ClientRequestDuration.Name, schema.RequestSeries(), "outcome", "reason")
	var tries []schema.Labels
	for _, try := range schema.Tries {
		tries = append(tries, schema.Labels{try})
	}
	values(schema.ServerOffered.Name, tries, "try")
	values(schema.ServerRequests.Name, schema.ServerOutcomes(), "outcome", "reason")
	var origins []schema.Labels
	for _, o := range schema.Origins {
		origins = append(origins, schema.Labels{o})
	}
	values(schema.DialsLastChange.Name, origins, "origin")
	values(schema.PolicyReloads.Name, []schema.Labels{{schema.ResultApplied}, {schema.ResultRefused}}, "result")
	return b.String()
}

// DialsValues reads each dial, and the last change's time and origin, whose
// names are killswitch.Origin's.
func TestDialsValues(t *testing.T) {
	d := new(killswitch.Dials)
	if got := schema.DialsValues(d); got != (schema.DialsSnapshot{Origin: "none"}) {
		t.Errorf("new dials: %+v", got)
	}
	d.SetRetriesDisabled(true)
	_ = d.SetShedFraction(0.25)
	_ = d.SetLimitOverride(12)
	at := time.Unix(1_800_000_000, 500_000_000)
	d.NoteChange(killswitch.Change{At: at, Origin: killswitch.OriginFleet})
	want := schema.DialsSnapshot{RetriesOff: 1, ShedRatio: 0.25, LimitOverride: 12, ChangedAt: 1_800_000_000.5, Origin: "fleet"}
	if got := schema.DialsValues(d); got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
	for i, name := range schema.Origins {
		if got := killswitch.Origin(i).String(); got != name {
			t.Errorf("origin %d: killswitch says %q, the schema %q", i, got, name)
		}
	}
}
