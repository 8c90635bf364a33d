package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/sim/result"
)

// synthetic builds a run by hand: demand 100/s, goodput that drops during
// the trigger [3, 5) s and comes back after recoverAt (never if < 0).
func synthetic(name, verdict string, recoverAt float64) result.Result {
	const bins = 10
	r := result.Result{Name: name, Judgement: result.Judgement{Verdict: verdict, Why: "made up for the test"}, Seed: 1, BinS: 1, DurationS: bins,
		TriggerS: [][2]float64{{3, 5}}}
	if recoverAt >= 0 {
		rec := recoverAt - 5
		r.RecoveryS, r.RecoveryFrom = &rec, "trigger"
	}
	c := result.ClientSeries{Name: "app"}
	v := result.ServiceSeries{Name: "db"}
	for i := range bins {
		t := float64(i)
		good := 100.0
		if t >= 3 && (recoverAt < 0 || t < recoverAt) {
			good = 0
		}
		c.Bins = append(c.Bins, result.ClientBin{T: t, Demand: 100, Goodput: good, LatencyP50: 0.05, LatencyP99: 0.2, Budget: -1,
			GaveUp: result.GiveUps{Attempts: 100 - good}})
		v.Bins = append(v.Bins, result.ServiceBin{T: t, OfferedFirst: 100, OfferedRetries: 200 - 2*good, Throughput: 150,
			Goodput: good, Wasted: 150 - good, Queue: 300 - 3*good, Shed: 1})
	}
	c.Total = result.ClientTotal{Requests: 1000, Succeeded: 600, Failed: 400, Attempts: 2000, Retries: 1000,
		GaveUp: result.GiveUps{Attempts: 300, Budget: 100}}
	v.Total = result.ServiceTotal{Arrived: 2000, Completed: 1500, Goodput: 600, Wasted: 900, Shed: 500}
	r.Clients = []result.ClientSeries{c}
	r.Services = []result.ServiceSeries{v}
	return r
}

func TestWriteSim(t *testing.T) {
	dir := t.TempDir()
	out := result.Output{Scenario: "toy", Runs: []result.Result{
		synthetic("naive/rate=100", "metastable", -1),
		synthetic("stormguard/rate=100", "recovered", 7),
	}}
	if err := WriteSim(dir, out); err != nil {
		t.Fatal(err)
	}
	var back result.Output
	readJSON(t, filepath.Join(dir, "summary.json"), &back)
	if back.Scenario != "toy" || len(back.Runs) != 2 || back.Runs[1].Verdict != "recovered" {
		t.Errorf("summary.json = %+v", back)
	}
	for _, stem := range []string{"naive_rate=100", "stormguard_rate=100"} {
		checkCSV(t, filepath.Join(dir, stem+".csv"))
		checkPNG(t, filepath.Join(dir, stem+".png"))
		svg := readFile(t, filepath.Join(dir, stem+".svg"))
		if !bytes.HasPrefix(svg, []byte("<?xml")) && !bytes.HasPrefix(svg, []byte("<svg")) {
			t.Errorf("%s.svg starts with %q", stem, svg[:min(len(svg), 20)])
		}
	}
	checkHTML(t, readFile(t, filepath.Join(dir, "index.html")), 2)
}

func checkCSV(t *testing.T, path string) {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(readFile(t, path))).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	want := []string{"t", "app.demand", "app.goodput", "app.gave_up", "app.latency_p50", "app.latency_p99", "app.budget",
		"db.offered_first", "db.offered_retries", "db.throughput", "db.goodput", "db.wasted", "db.shed",
		"db.expired_dropped", "db.queue", "db.limit"}
	if !slices.Equal(rows[0], want) {
		t.Errorf("%s header = %q\nwant %q", path, rows[0], want)
	}
	if len(rows) != 11 {
		t.Errorf("%s has %d rows, want a header and 10 bins", path, len(rows))
	}
	if got := rows[4][:4]; !slices.Equal(got, []string{"3", "100", "0", "100"}) {
		t.Errorf("%s row of t=3 starts %q", path, got)
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
		t.Errorf("%s is only %v", path, b)
	}
}

// checkHTML checks that the page is well-formed (every tag we emit is
// closed, in order), self-contained and shows every run.
func checkHTML(t *testing.T, page []byte, runs int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	var stack []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("index.html is not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed elements: %q", stack)
	}
	text := string(page)
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(text); m != "" {
		t.Errorf("index.html loads from the network: %q", m)
	}
	if strings.Contains(text, "<script") || strings.Contains(text, "<link") {
		t.Error("index.html has a script or a link element")
	}
	imgs := regexp.MustCompile(`<img [^>]*src="([^"]*)"`).FindAllStringSubmatch(text, -1)
	if len(imgs) != runs {
		t.Errorf("index.html has %d images, want %d", len(imgs), runs)
	}
	for _, m := range imgs {
		if !strings.HasPrefix(m[1], "data:image/png;base64,") {
			t.Errorf("an image is not inline: %.60q", m[1])
		}
	}
	for _, want := range []string{"What to change", `class="badge metastable"`, `class="badge recovered"`, "stormguard/rate=100"} {
		if !strings.Contains(text, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(synthetic("x", "recovered", 7))
	if s.AfterS != 5 {
		t.Errorf("AfterS = %v, want 5 (the end of the trigger)", s.AfterS)
	}
	// Bins 5..9: goodput 0, 0, 100, 100, 100.
	if s.Demand != 100 || s.Goodput != 60 {
		t.Errorf("demand, goodput after = %v, %v, want 100, 60", s.Demand, s.Goodput)
	}
	if s.RetriesPct != 50 || s.WastedPct != 60 {
		t.Errorf("retries, wasted = %v%%, %v%%, want 50%%, 60%%", s.RetriesPct, s.WastedPct)
	}
	if s.GaveUp != 400 || s.TopReason != "attempts" || s.GaveUpText() != "400 (attempts)" {
		t.Errorf("gave up = %v %q %q", s.GaveUp, s.TopReason, s.GaveUpText())
	}
	if s.RecoveryText() != "2.0 s after the trigger" {
		t.Errorf("recovery = %q", s.RecoveryText())
	}
	if m := Summarize(synthetic("m", "metastable", -1)); m.RecoveryText() != "never" || m.Healthy() {
		t.Errorf("metastable summary: %+v", m)
	}
}

// RETRIES is the share at the hop where it is highest: when the clients
// never retry but a middle tier does (the lab's app), the retries show at
// the service they arrive at instead of reading 0 %.
func TestSummarizeRetriesAtEveryHop(t *testing.T) {
	tests := []struct {
		name                 string
		clientAttempts       int64
		clientRetries        int64
		serviceFirst, retrys float64 // attempts/s arriving at the service, per bin
		want                 float64
	}{
		{"clients retry, service sees the same", 200, 100, 10, 10, 50},
		{"only the middle tier retries", 100, 0, 10, 30, 75},
		{"nobody retries", 100, 0, 10, 0, 0},
		{"clients retry more than the service sees", 200, 100, 30, 10, 50},
	}
	for _, tt := range tests {
		r := result.Result{Name: tt.name, Judgement: result.Judgement{Verdict: "stable"},
			Clients:  []result.ClientSeries{{Name: "users", Total: result.ClientTotal{Attempts: tt.clientAttempts, Retries: tt.clientRetries}}},
			Services: []result.ServiceSeries{{Name: "backend", Bins: []result.ServiceBin{{OfferedFirst: tt.serviceFirst, OfferedRetries: tt.retrys}, {OfferedFirst: tt.serviceFirst, OfferedRetries: tt.retrys}}}}}
		if got := Summarize(r).RetriesPct; got != tt.want {
			t.Errorf("%s: RETRIES %v%%, want %v%%", tt.name, got, tt.want)
		}
	}
}

func TestAdvice(t *testing.T) {
	meta, rec := Summarize(synthetic("naive", "metastable", -1)), Summarize(synthetic("stormguard", "recovered", 7))
	changes := map[string][]string{"stormguard": {"clients.app.policy: stormguard", "services.db.defenses: stormguard"}}
	// Two runbooks back at the same moment, the first listed relapsed on
	// the way (DynamoDB 2015's resume-too-early): the other is advised.
	early, right := rec, rec
	early.Name, early.Relapsed, right.Name = "resume-too-early", true, "pause-capacity-resume"
	runbooks := map[string][]string{"resume-too-early": {"actions: [resume, capacity]"}, "pause-capacity-resume": {"actions: [capacity, resume]"}}
	fine, degraded := Summarize(synthetic("p=0", "stable", 0)), Summarize(synthetic("p=0.6", "degraded", -1))
	faults := map[string][]string{"p=0": {"services.t1.error_rate: 0"}, "p=0.6": {"services.t1.error_rate: 0.6"}}
	warm := fine
	warm.Name = "warm"
	cache := map[string][]string{"warm": {"triggers: []"}, "stormguard": {"clients.app.policy: stormguard"}}
	inconclusive, unjudged := meta, meta
	inconclusive.Name, inconclusive.Verdict, unjudged.Name, unjudged.Verdict = "lab", "inconclusive", "hour", "not judged"
	tests := []struct {
		name    string
		runs    []Summary
		changes map[string][]string
		want    []string
	}{
		{"one fixes it", []Summary{meta, rec}, changes,
			[]string{"naive stayed metastable", "stormguard recovered 2.0 s after the trigger", "clients.app.policy: stormguard, services.db.defenses: stormguard"}},
		{"no changes known", []Summary{meta, rec}, nil, []string{"what differs between the two runs"}},
		{"a relapse is not advised", []Summary{meta, early, right}, runbooks,
			[]string{"while pause-capacity-resume recovered", "ship what it changes: actions: [capacity, resume]"}},
		{"all metastable", []Summary{meta}, nil, []string{"Every run stayed metastable", "retries are 58%" /* at the service: 200 − 2 × goodput retries per 100 first tries */, "retry budget", "60% of the services' work"}},
		{"all fine", []Summary{rec}, nil, []string{"Every run came through", "retries were 50%"}},
		{"none", nil, nil, []string{"no runs"}},
		// What a run does to the system is not advice: Paper 08's Sim A
		// (error rates), hotos-cache (its warm run has no trigger).
		{"only fault rates differ", []Summary{fine, degraded}, faults,
			[]string{"p=0 stayed stable", "p=0.6 was degraded", "differ only in what the scenario does to the system (p=0.6: services.t1.error_rate: 0.6)", "Of the runs that ended down: retries are"}},
		{"a trigger removed is not shipped", []Summary{warm, meta, rec}, cache,
			[]string{"while stormguard recovered", "ship what it changes: clients.app.policy: stormguard."}},
		{"runs not judged are named, not advised from", []Summary{rec, inconclusive, unjudged}, nil,
			[]string{"Every run came through", "Not judged: lab (inconclusive), hour (not judged)", "run it again on a quieter one"}},
	}
	for _, tt := range tests {
		got := Advice(tt.runs, tt.changes)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: advice %q lacks %q", tt.name, got, w)
			}
		}
	}
}

func TestFileNames(t *testing.T) {
	runs := []result.Result{{Name: "a/b"}, {Name: "a_b"}, {Name: "../etc"}, {Name: ""}, {Name: "index"}, {Name: "x y=1"}}
	got := FileNames(runs)
	want := []string{"a_b", "a_b-2", "_etc", "run", "index-2", "x_y=1"}
	if !slices.Equal(got, want) {
		t.Errorf("FileNames = %q, want %q", got, want)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(readFile(t, path), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestChartMarksActionsAndReplicas: a run's runbook actions are vertical
// lines labelled on the top panel, in a colour of their own, listed on
// the page; the replicas serving are drawn on a service's panel when they
// are not always one, and only then.
func TestChartMarksActionsAndReplicas(t *testing.T) {
	r := synthetic("runbook", "recovered", 7)
	r.Actions = []result.ActionMark{{T: 4, Kind: "pause", Label: "pause membership requests"}, {T: 6, Kind: "replicas", Label: "add capacity"}}
	for i := range r.Services[0].Bins {
		r.Services[0].Bins[i].ReplicasUp = 2
		if i >= 6 {
			r.Services[0].Bins[i].ReplicasUp = 6
		}
	}
	_, svg, err := chart(r, layout{})
	if err != nil {
		t.Fatal(err)
	}
	action := palette["action"]
	for _, want := range []string{"pause membership requests", "add capacity", "runbook action", "replicas serving (right scale)",
		fmt.Sprintf("stroke:#%02X%02X%02X", action.R, action.G, action.B)} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if action == palette["trigger"] || action == palette["replicas"] {
		t.Error("the actions' colour is the trigger's or the replicas'")
	}
	// One replica throughout, no actions: neither is drawn.
	_, plain, err := chart(synthetic("plain", "recovered", 7), layout{})
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"runbook action", "replicas serving"} {
		if bytes.Contains(plain, []byte(absent)) {
			t.Errorf("a run without actions or replicas shows %q", absent)
		}
	}
	dir := t.TempDir()
	if err := WriteSim(dir, result.Output{Scenario: "toy", Runs: []result.Result{r}}); err != nil {
		t.Fatal(err)
	}
	if page := readFile(t, filepath.Join(dir, "index.html")); !bytes.Contains(page, []byte("<code>4 s: pause membership requests</code>")) {
		t.Error("index.html does not list the runbook's steps")
	}
}

func TestChartTitle(t *testing.T) {
	after := synthetic("a", "recovered", 7) // trigger [3, 5), collapse 3, recovery 2 s after its end
	after.CollapseS = ptrF(3)
	during := after
	during.Name = "b"
	during.TriggerS = [][2]float64{{3, 10}} // to the end: back while it lasted
	during.RecoveryFrom = "collapse"
	for _, c := range []struct {
		r    result.Result
		want string
	}{
		{after, "a: recovered 2.0 s after the trigger"},
		{during, "b: recovered 2.0 s after the collapse"},
	} {
		if got := title(c.r); got != c.want {
			t.Errorf("title %q, want %q", got, c.want)
		}
	}
}

func ptrF(v float64) *float64 { return &v }
