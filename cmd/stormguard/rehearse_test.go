package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/killswitch"
)

// The help tells the truth about the limits: the defaults and ceilings
// it states are the package's.
func TestRehearseHelp(t *testing.T) {
	code, out, _ := runCmd(t, t.Context(), "help", "rehearse")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"--dry-run", "--max-rate R", "(default 500, at most 3000)", "(default 2m, at most 10m)", "--allow-remote HOST", "--shard I/N", "rehearse merge", "130 interrupted"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if _, out, _ := runCmd(t, t.Context(), "--help"); !strings.Contains(out, "stormguard rehearse FILE") {
		t.Error("the main help does not list rehearse")
	}
}

func TestRehearseRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	os.WriteFile(file, []byte(`
name: r
duration: 5s
clients: [{name: c, target: s, arrivals: {kind: poisson, rate: 10}}]
services: [{name: s, target: "http://192.0.2.7:80/"}]
`), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rehearse", file, "--dry-run"}, 2, "--allow-remote 192.0.2.7"},
		{[]string{"rehearse", file, "--max-rate", "5000"}, 2, "not within (0, 3000]"},
		{[]string{"rehearse", file, "--max-duration", "11m"}, 2, "not within (0, 10m0s]"},
		{[]string{"rehearse", file, "--shard", "1/2"}, 2, "--shard writes its part with --out DIR"},
		{[]string{"rehearse"}, 2, "rehearse takes one FILE"},
		{[]string{"sim", file}, 2, "run this file with stormguard rehearse"},
		{[]string{"rehearse", "merge"}, 2, "needs the parts"},
	} {
		code, _, errs := runCmd(t, t.Context(), c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	code, out, errs := runCmd(t, t.Context(), "rehearse", file, "--dry-run", "--allow-remote", "192.0.2.7")
	if code != 0 || !strings.Contains(out, "nothing sent") || !strings.Contains(out, "sends to loopback and 192.0.2.7 only") {
		t.Errorf("allowed: exit %d, %s %s", code, out, errs)
	}
}

// A whole rehearsal through the command, with its report; then as two
// shards and their merge.
func TestRehearseCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: r
duration: 2s
clients: [{name: c, target: s, arrivals: {kind: poisson, rate: 50}, policy: stormguard}]
services: [{name: s, target: "%s/"}]
`, srv.URL)), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, errs := runCmd(t, t.Context(), "rehearse", file, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"r: 1 runs of 2 s against the real service", "stable", "client c: sent", "(adds up)", "the machine:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"index.html", "summary.json", "rehearse.json", "r.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	page, _ := os.ReadFile(filepath.Join(out, "index.html"))
	if !strings.Contains(string(page), "The rehearsal") {
		t.Error("the page has no rehearsal section")
	}
	parts := filepath.Join(dir, "parts")
	at := strconv.FormatFloat(float64(time.Now().Add(2*time.Second).UnixNano())/1e9, 'f', 3, 64)
	var wg sync.WaitGroup
	for _, s := range []string{"1/2", "2/2"} {
		wg.Go(func() {
			if code, _, errs := runCmd(t, t.Context(), "rehearse", file, "--shard", s, "--start-at", at, "--out", parts); code != 0 {
				t.Errorf("shard %s: exit %d: %s", s, code, errs)
			}
		})
	}
	wg.Wait()
	code, stdout, errs = runCmd(t, t.Context(), "rehearse", "merge", parts)
	if code != 0 || !strings.Contains(stdout, "client c: sent") {
		t.Errorf("merge: exit %d: %s %s", code, stdout, errs)
	}
}

// slowServer serves with workers handlers at once, each for serviceTime
// (the others wait), in the test's process on 127.0.0.1.
func slowServer(t *testing.T, workers int, serviceTime time.Duration) *httptest.Server {
	t.Helper()
	slots := make(chan struct{}, workers)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slots <- struct{}{}
		time.Sleep(serviceTime)
		<-slots
	}))
	t.Cleanup(srv.Close)
	return srv
}

// --predict through the command: the calm phase fits the service, the
// simulator runs the fitted model, and the report holds both sides —
// compare.csv (measured and model goodput per 1 s window), the "(model)"
// runs beside the rehearsal's, the comparison in the output and the fits
// in rehearse.json.
func TestRehearsePredict(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time with a calm phase: not in -short")
	}
	srv := slowServer(t, 4, 10*time.Millisecond) // 400/s
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: p
duration: 3s
seed: 1
rehearse: {calm: 2s}
clients:
  - {name: c, target: s, arrivals: {kind: poisson, rate: 50}, timeout: 250ms, policy: {preset: naive, max_attempts: 2}}
services: [{name: s, target: "%s/"}]
triggers: [{kind: outage, target: s, at: 1s, duration: 500ms, mode: hold}]
runs: [{name: naive}]
`, srv.URL)), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, errs := runCmd(t, t.Context(), "rehearse", file, "--predict", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	t.Log(stdout)
	if !strings.Contains(stdout, "Prediction against the rehearsal") {
		t.Error("the output has no prediction")
	}
	// compare.csv: the header, then one row a 1 s window of the run, with
	// both sides measured.
	data, err := os.ReadFile(filepath.Join(out, "compare.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || strings.Join(rows[0], ",") != "run,t,demand,measured_goodput,model_goodput,diff" {
		t.Fatalf("compare.csv:\n%s", data)
	}
	for _, row := range rows[1:] {
		demand, _ := strconv.ParseFloat(row[2], 64)
		measured, _ := strconv.ParseFloat(row[3], 64)
		model, _ := strconv.ParseFloat(row[4], 64)
		if row[0] != "naive" || demand <= 0 || measured <= 0 || model <= 0 {
			t.Errorf("compare.csv row %v: want run naive, demand and both goodputs > 0", row)
		}
	}
	// The report's runs: the rehearsal's and the model's.
	var sum struct {
		Runs []struct{ Name, Verdict string }
	}
	data, _ = os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range sum.Runs {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "naive,naive (model)" {
		t.Errorf("summary.json runs %v, want naive and naive (model)", names)
	}
	page, _ := os.ReadFile(filepath.Join(out, "index.html"))
	for _, want := range []string{"naive (model)", "Prediction against the rehearsal"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	var rj struct {
		Fits [][]struct {
			Endpoint     string  `json:"endpoint"`
			ServiceTimeS float64 `json:"service_time_s"`
			Workers      int     `json:"workers"`
		} `json:"fits"`
		Sim []struct{ Name string } `json:"sim"`
	}
	data, _ = os.ReadFile(filepath.Join(out, "rehearse.json"))
	if err := json.Unmarshal(data, &rj); err != nil {
		t.Fatal(err)
	}
	if len(rj.Fits) != 1 || len(rj.Fits[0]) != 1 || len(rj.Sim) != 1 {
		t.Fatalf("rehearse.json: fits %+v, sim %+v", rj.Fits, rj.Sim)
	}
	if f := rj.Fits[0][0]; f.Endpoint != "s" || f.ServiceTimeS < 0.009 || f.ServiceTimeS > 0.02 || f.Workers < 1 {
		t.Errorf("fit %+v: want service s, a service time of 10 ms (≤ 20 ms), ≥ 1 worker", f)
	}
}

// Interrupted before it starts (the context already cancelled, as
// TestInterrupted does for sim): exit status 130, and what was measured
// (nothing) is still printed.
func TestRehearseInterrupted(t *testing.T) {
	srv := slowServer(t, 1, 0)
	file := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: r
duration: 5s
clients: [{name: c, target: s, arrivals: {kind: poisson, rate: 10}}]
services: [{name: s, target: "%s/"}]
`, srv.URL)), 0o644)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	code, stdout, errs := runCmd(t, ctx, "rehearse", file)
	if code != exitInterrupted || !strings.Contains(errs, "interrupted") || !strings.Contains(stdout, "interrupted: measured until") {
		t.Errorf("exit %d, stderr %q, stdout %q; want %d, interrupted, and the run printed", code, errs, stdout, exitInterrupted)
	}
}

// Ctrl-C to the command: SIGINT to a built binary in the middle of a
// rehearsal whose runbook has turned a service's shed dial (through its
// admin endpoint, the token from the environment). The load stops, the
// dial is set back, what was measured is printed and written, and the
// command exits 130 with one line on stderr.
func TestRehearseSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and sends real load")
	}
	bin := stormguardBinary(t)
	dials := &killswitch.Dials{}
	sg, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{Dials: dials}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last time.Time
	srv := httptest.NewServer(sg.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.UserAgent(), "stormguard-rehearse (client ") {
			mu.Lock()
			last = time.Now()
			mu.Unlock()
		}
	})))
	defer srv.Close()
	tok := strings.Repeat("s", 20)
	admin, err := killswitch.NewAdmin(dials, tok)
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(admin)
	defer adm.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: r
duration: 20s
clients: [{name: c, target: s, arrivals: {kind: poisson, rate: 50}, timeout: 250ms, policy: {preset: naive, max_attempts: 1}}]
services: [{name: s, target: "%s/", admin: {url: "%s/", token_env: REHEARSE_TEST_TOKEN}}]
actions: [{at: 500ms, kind: shed, target: s, value: 0.5}]
`, srv.URL, adm.URL)), 0o644)
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "rehearse", file, "--out", out)
	cmd.Env = append(os.Environ(), "REHEARSE_TEST_TOKEN="+tok)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Wait for the step (the preflight, the run's start, then 0.5 s).
	deadline := time.Now().Add(hostspeed.Scale(15 * time.Second))
	for dials.ShedFraction() != 0.5 {
		select {
		case err := <-exited:
			t.Fatalf("the run ended before the signal: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the step did not turn the shed dial within 15 s: %s", stderr.String())
		}
	}
	time.Sleep(time.Second)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(hostspeed.Scale(20 * time.Second)):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("still running 20 s after SIGINT: %s", stderr.String())
	}
	took := time.Since(sent)
	mu.Lock()
	lastAfter := last.Sub(sent)
	mu.Unlock()
	t.Logf("exited %v after SIGINT, the last request reached the service %v after it\n%s", took.Round(time.Millisecond), lastAfter.Round(time.Millisecond), stdout.String())
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit %d, want %d", code, exitInterrupted)
	}
	// One line; the signal's own words (Go's signal.NotifyContext gives
	// its cause) may come between.
	if got := stderr.String(); !strings.HasPrefix(got, "stormguard: interrupted: ") || !strings.HasSuffix(got, "context canceled\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr = %q, want one line saying interrupted", got)
	}
	if bound := hostspeed.Scale(3 * time.Second); took > bound {
		t.Errorf("exited %v after SIGINT, want within %v", took, bound)
	}
	if lastAfter > hostspeed.Scale(200*time.Millisecond) {
		t.Errorf("a request reached the service %v after SIGINT", lastAfter)
	}
	if f := dials.ShedFraction(); f != 0 {
		t.Errorf("the shed dial is %v after the command ended, want it set back to 0", f)
	}
	for _, want := range []string{"interrupted: measured until", "client c: sent", "step", "set back to what they were before the run"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	var rj struct {
		Rehearsals []struct {
			Interrupted bool    `json:"interrupted"`
			StoppedS    float64 `json:"stopped_s"`
		} `json:"rehearsals"`
	}
	data, err := os.ReadFile(filepath.Join(out, "rehearse.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rj); err != nil {
		t.Fatal(err)
	}
	if len(rj.Rehearsals) != 1 || !rj.Rehearsals[0].Interrupted || rj.Rehearsals[0].StoppedS <= 0 || rj.Rehearsals[0].StoppedS > 10 {
		t.Errorf("rehearse.json: %+v, want the run interrupted within its first 10 s", rj.Rehearsals)
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); err != nil {
		t.Error(err)
	}
}
