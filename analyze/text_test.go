package analyze

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestThreeTier checks the figures docs/analyze.md explains for
// examples/three-tier.yaml.
func TestThreeTier(t *testing.T) {
	r, err := File(loadExample(t, "three-tier.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Analyses) != 2 || r.Analyses[0].Run != "naive" || r.Analyses[1].Run != "stormguard" {
		t.Fatalf("analyses %d", len(r.Analyses))
	}
	naive, sg := r.Analyses[0], r.Analyses[1]
	if p := pathTo(t, naive, "users → web → api → db"); p.Worst != 27 || p.Budgeted != 27 {
		t.Errorf("naive path to db: %+v", p)
	}
	db := service(t, naive, "db")
	if db.Capacity != 250 || db.Clients[0].Rate != 150 || db.Clients[0].Worst != 27 || db.Clients[0].VulnerableAbove != 250.0/27 {
		t.Errorf("naive db: %+v", db)
	}
	rules := map[string]int{}
	for _, f := range naive.Findings {
		rules[f.Rule+"/"+f.Severity.String()]++
	}
	want := map[string]int{"vulnerable/error": 1, "layered-retries/error": 1, "timeout-exceeds-caller/error": 2,
		"retries-unretryable/warning": 2, "missing-budget/warning": 3, "missing-jitter/warning": 3, "no-off-switch/warning": 1}
	for k, n := range want {
		if rules[k] != n {
			t.Errorf("naive: %d × %s, want %d (all: %v)", rules[k], k, n, rules)
		}
	}
	if len(rules) != len(want) {
		t.Errorf("naive: findings %v, want %v", rules, want)
	}
	if p := pathTo(t, sg, "users → web → api → db"); p.Worst != 3 || p.Budgeted < 1.0999 || p.Budgeted > 1.1001 {
		t.Errorf("stormguard path to db: %+v", p)
	}
	if x := service(t, sg, "db").Clients[0]; x.Effective != 1 || x.VulnerableAbove != 250 {
		t.Errorf("stormguard db exposure: %+v", x)
	}
	// The fixed design's one warning: it rehearses no off switch.
	if len(sg.Findings) != 1 || sg.Findings[0].Rule != "no-off-switch" {
		t.Errorf("stormguard run: %+v", sg.Findings)
	}
	for _, f := range naive.Findings {
		if f.Rule == "layered-retries" && f.Fix != "Let api→db own the retries (it is closest to db) and make users→web and web→api fail fast (max_attempts: 1)." {
			t.Errorf("layered-retries fix: %q", f.Fix)
		}
	}
	if r.Errors != 4 || r.Warnings != 10 || r.Notes != 0 {
		t.Errorf("totals %d/%d/%d", r.Errors, r.Warnings, r.Notes)
	}

	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{
		"users → web → api → db  3 × 3 × 3  27×",
		"db       250         users   150     27×            9.26                ← you run above it",
		"users runs at 150/s; db becomes vulnerable above 9.26/s",
		"→ Let api→db own the retries (it is closest to db)",
		"db       250         users   150     3× (1×: first tries first)  250",
		"FAIL: 4 errors, 10 warnings, 0 notes over 2 runs.",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the text lacks %q:\n%s", s, out)
		}
	}
}

func TestReportJSON(t *testing.T) {
	r, err := File(loadExample(t, "hotos-toy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Errors != r.Errors || len(back.Analyses) != 2 || back.Analyses[0].Findings[0].Severity != Error {
		t.Errorf("round trip: %+v", back)
	}
	var raw map[string]any
	json.Unmarshal(data, &raw)
	a := raw["analyses"].([]any)[0].(map[string]any)
	f := a["findings"].([]any)[0].(map[string]any)
	for _, k := range []string{"rule", "severity", "where", "message", "fix", "numbers"} {
		if _, ok := f[k]; !ok {
			t.Errorf("a finding lacks %q: %v", k, f)
		}
	}
	if f["severity"] != "error" {
		t.Errorf("severity %v", f["severity"])
	}
	s := a["services"].([]any)[0].(map[string]any)
	if s["fluid"].(map[string]any)["region"] != "vulnerable" {
		t.Errorf("fluid region: %v", s["fluid"])
	}
}

// TestBaseAnalysed: a file whose every run changes the base gets the base
// analysed too.
func TestBaseAnalysed(t *testing.T) {
	f := loadExample(t, "paper08-sim-c.yaml")
	r, err := File(f)
	if err != nil {
		t.Fatal(err)
	}
	base := true
	for _, run := range f.Runs {
		base = base && len(run.Changes) > 0
	}
	if got := r.Analyses[0].Run == "(base)"; got != base || len(r.Analyses) != len(f.Runs)+map[bool]int{true: 1}[base] {
		t.Errorf("runs %d, analyses %d, first %q", len(f.Runs), len(r.Analyses), r.Analyses[0].Run)
	}
}

func TestSeverityText(t *testing.T) {
	for _, s := range []Severity{Info, Warning, Error} {
		b, _ := s.MarshalText()
		var back Severity
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%v: %v %v", s, back, err)
		}
	}
	var s Severity
	if s.UnmarshalText([]byte("fatal")) == nil {
		t.Error("fatal is a severity")
	}
}

func TestAndList(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a and b"}, {[]string{"a", "b", "c"}, "a, b and c"}} {
		if got := andList(c.in); got != c.want {
			t.Errorf("andList(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc ddd", 9, "  ")
	if got != "  aaa bbb\n  ccc ddd" {
		t.Errorf("%q", got)
	}
}
