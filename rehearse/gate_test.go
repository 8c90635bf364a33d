package rehearse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/result"
)

// gateConfig is a service that sheds only at admission: stormguard's
// httpx.Server whose gate runs Workers requests at once (a fixed
// concurrency limit) and queues the others in its own queue (first in,
// first out, no priority, room for Capacity), with a kill-switch admin
// endpoint (bearer Token) and a /metrics page. Its handler works
// ServiceTime whether its caller still waits or not. Unlike the demo
// shop, nothing sheds after admission: the kill switch's shed fraction
// refuses arrivals at the gate (admit's step 1), and the requests already
// queued stay queued until a worker takes them or their caller leaves
// (the gate then drops them as canceled).
type gateConfig struct {
	Workers     int
	ServiceTime time.Duration
	Capacity    int
	Token       string
}

// gateService is a running gateConfig; its URLs as shopURLs.
type gateService struct {
	shopURLs
	Dials *killswitch.Dials
	srvs  []*http.Server
	wg    sync.WaitGroup
}

func startGate(cfg gateConfig) (*gateService, error) {
	s := &gateService{Dials: &killswitch.Dials{}}
	sg, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{Dials: s.Dials,
		Limit: limit.Spec{Kind: limit.KindFixed, Limit: cfg.Workers},
		Queue: shed.Config{Capacity: cfg.Capacity, Order: shed.FIFO, Priority: shed.NoPriority}}})
	if err != nil {
		return nil, err
	}
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(cfg.ServiceTime) // like a database: whether its caller still waits or not
		w.Write([]byte("ok\n"))
	})
	admin, err := killswitch.NewAdmin(s.Dials, cfg.Token)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterServer(reg, metrics.Labels{Target: "gate"}, sg.Stats); err != nil {
		return nil, err
	}
	mux, mm := http.NewServeMux(), http.NewServeMux()
	mux.Handle("/buy", sg.Wrap(work))
	mm.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	for _, x := range []struct {
		h    http.Handler
		url  *string
		path string
	}{{mux, &s.URL, "/buy"}, {admin, &s.Admin, "/"}, {mm, &s.Metrics, "/metrics"}} {
		ln, err := killswitch.ListenAdmin("127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		srv := &http.Server{Handler: x.h, ReadHeaderTimeout: 10 * time.Second}
		s.srvs = append(s.srvs, srv)
		*x.url = "http://" + ln.Addr().String() + x.path
		s.wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ln.Close()
			}
		})
	}
	return s, nil
}

func (s *gateService) close() {
	for _, srv := range s.srvs {
		srv.Close()
	}
	s.wg.Wait()
}

// serveGate is the gate role: REHEARSE_TEST_GATE holds its gateConfig as
// JSON; it prints its URLs as JSON and serves until stdin ends.
func serveGate() int {
	var cfg gateConfig
	if err := json.Unmarshal([]byte(os.Getenv("REHEARSE_TEST_GATE")), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := startGate(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	u, _ := url.Parse(s.URL)
	line, _ := json.Marshal(map[string]string{"addr": u.Host, "url": s.URL, "admin": s.Admin, "metrics": s.Metrics})
	fmt.Printf("%s\n", line)
	io.Copy(io.Discard, os.Stdin)
	s.close()
	return 0
}

// startGateProc starts a gateConfig service in a process of its own.
func startGateProc(t testing.TB, cfg gateConfig) shopURLs {
	t.Helper()
	data, _ := json.Marshal(cfg)
	p := startProc(t, "gate", "REHEARSE_TEST_GATE="+string(data))
	var u struct{ URL, Admin, Metrics string }
	if err := json.Unmarshal([]byte(p.line), &u); err != nil {
		t.Fatal(err)
	}
	return shopURLs(u)
}

// adminState reads the dials of the admin endpoint at url.
func adminState(t testing.TB, adminURL, token string) killswitch.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, adminURL, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st killswitch.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("%s: %s: %v", adminURL, resp.Status, err)
	}
	return st
}

// gateStorm: 200 requests/s to a gateConfig service of 5 workers × 20 ms
// (250/s), the network held for 2 s; naive clients, 250 ms timeout. The
// runbook of run "shed": shed everything at the gate from 8 s to 10 s,
// through its admin endpoint with the token from a file.
const gateStorm = `
name: gate-storm
duration: 14s
seed: 1
clients:
  - name: users
    target: gate
    arrivals: {kind: poisson, rate: 200}
    timeout: 250ms
    policy: {preset: naive, max_attempts: 3}
services:
  - name: gate
    target: %s
    admin: {url: "%s", token_file: admin.token}
    metrics: {scrape: "%s"}
triggers:
  - {kind: outage, target: gate, at: 2s, duration: 2s, mode: hold}
runs:
  - name: shed
    set:
      actions:
        - {at: 8s, kind: shed, target: gate, value: 1}
        - {at: 10s, kind: shed, target: gate, value: 0}
  - name: none
`

// between returns goodput / demand of r's clients over the bins that
// start in [from, to).
func between(r result.Result, from, to float64) float64 {
	var g, d float64
	for _, c := range r.Clients {
		for _, b := range c.Bins {
			if b.T >= from-1e-9 && b.T < to-1e-9 {
				g += b.Goodput
				d += b.Demand
			}
		}
	}
	if d == 0 {
		return 0
	}
	return g / d
}

// The kill switch of a service that sheds only at admission: stormguard's
// gate with its own queue (gateConfig), not the demo shop, whose handler
// also refuses queued work while it sheds. A naive storm outlives the
// hold with the gate's queue full of work nobody waits for; the shed dial,
// turned through the admin endpoint, refuses arrivals only — and yet the
// backlog drains within the second it is turned: every request in the
// gate's queue is bound to its caller, whose 250 ms timeout ends it, and
// the gate drops a request whose caller left (canceled) instead of
// running it. With nothing new admitted the queue is empty when the
// shedding ends, and the service serves again. With
// STORMGUARD_REHEARSE_LONG=1, run "none" (no runbook) shows the storm
// outliving the run without the off switch.
func TestKillSwitchAdmissionOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	const workers = 5
	tok := strings.Repeat("g", 24)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var g shopURLs
	var ps []Plan
	fresh := func() { // a fresh service: a naive one stays busy with the last storm
		g = startGateProc(t, gateConfig{Workers: workers, ServiceTime: 20 * time.Millisecond, Capacity: 100000, Token: tok})
		ps = rehearseFile(t, fmt.Sprintf(gateStorm, g.URL, g.Admin, g.Metrics), dir, Limits{})
	}
	fresh()
	r := rehearseConclusive(t, ps[0], fresh)
	t.Log(summary(r))
	svc := r.Result.Services[0]
	queue := func(from, to float64) (most, least float64) {
		least = -1
		for _, b := range svc.Bins {
			if b.T >= from-1e-9 && b.T < to-1e-9 {
				most = max(most, b.Queue)
				if least < 0 || b.Queue < least {
					least = b.Queue
				}
			}
		}
		return most, least
	}
	stormQ, _ := queue(5, 8)
	_, shedQ := queue(8, 10)
	// From 5 s to 8 s: queued requests dropped, their callers gone; work
	// done, and done for callers who had left.
	var dropped, done, wasted float64
	for _, b := range svc.Bins {
		if b.T >= 5-1e-9 && b.T < 8-1e-9 {
			dropped += b.Expired * r.Result.BinS
			done += b.Throughput * r.Result.BinS
			wasted += b.Wasted * r.Result.BinS
		}
	}
	t.Logf("goodput/demand: %.0f%% from 5 s to 8 s (before the step), %.0f%% from 11 s; the gate's queue: up to %.0f before the step, down to %.0f while shedding; from 5 s to 8 s %.0f dropped from the queue (callers gone), %.0f of %.0f served wasted; shed %d at admission",
		100*between(r.Result, 5, 8), 100*after(r.Result, 11), stormQ, shedQ, dropped, wasted, done, svc.Total.Shed)
	for _, s := range r.Steps {
		t.Logf("step %s at %.1f s: done at %.2f s (%.0f ms) %s %s", s.Label, s.At, s.DoneS, 1000*s.TookS, s.Via, s.Err)
		if s.Err != "" || s.TookS > 1 || !strings.Contains(s.Via, filepath.Join(dir, "admin.token")) {
			t.Errorf("step %s via %s: took %.2f s, error %q; want it done through the admin endpoint with the token file", s.Label, s.Via, s.TookS, s.Err)
		}
	}
	if len(r.Steps) != 2 || !r.Services[0].Measured {
		t.Fatalf("%d steps, service measured %v", len(r.Steps), r.Services[0].Measured)
	}
	// Before the step: the storm outlived the hold, the backlog in the
	// gate's own queue.
	if a := between(r.Result, 5, 8); a > 0.1 || stormQ < 5*workers || dropped == 0 || wasted < 0.9*done {
		t.Errorf("from 5 s to 8 s: goodput %.0f%% of demand, the gate's queue at most %.0f, %.0f dropped from it, %.0f of %.0f served wasted; want a storm (< 10%%) with its backlog queued at the gate (≥ %d), which drops the requests whose callers left and serves the others too late (≥ 90%% wasted)",
			100*a, stormQ, dropped, wasted, done, 5*workers)
	}
	// The shed dial sheds arrivals only, and the queue drains anyway.
	if svc.Total.Shed == 0 || shedQ > workers {
		t.Errorf("while shedding: %d shed, the gate's queue down to %.0f; want arrivals shed and the queue drained (≤ %d)", svc.Total.Shed, shedQ, workers)
	}
	if v := r.Result.Verdict; v != "recovered" {
		t.Errorf("verdict %s, want recovered once the runbook acted: %s", v, r.Result.Why)
	}
	if a := after(r.Result, 11); a < 0.9 {
		t.Errorf("goodput from 11 s on %.0f%% of demand, want ≥ 90%%", 100*a)
	}
	if st := adminState(t, g.Admin, tok); st != (killswitch.State{}) || !strings.HasPrefix(r.Restored, "set back") {
		t.Errorf("after the run the dials are %+v (%s), want them set back to none", st, r.Restored)
	}
	if !long {
		t.Log("run none (no runbook: metastable when measured, 548 of 2,893 requests ok) runs with STORMGUARD_REHEARSE_LONG=1")
		return
	}
	none := rehearseConclusive(t, ps[1], fresh)
	t.Log(summary(none))
	if v := none.Result.Verdict; v != "metastable" {
		t.Errorf("none: %s, want metastable without the off switch: %s", v, none.Result.Why)
	}
}

// limitRun: 100 requests/s, evenly spaced, for 4 s to a gateConfig
// service of 10 workers × 20 ms (500/s); the runbook pins its
// concurrency limit to 1 (50/s) at 1.5 s, through the admin endpoint with
// the token from a file, and leaves it there: the rehearsal sets it back.
const limitRun = `
name: limit
duration: 4s
seed: 1
clients:
  - name: c
    target: gate
    arrivals: {kind: constant, rate: 100}
    timeout: 3s
    policy: {preset: naive, max_attempts: 1}
services:
  - name: gate
    target: %s
    admin: {url: "%s", token_file: %s}
    metrics: {scrape: "%s"}
actions:
  - {at: 1500ms, kind: limit, target: gate, value: 1}
`

// A limit step and the admin token from a file: the step pins the
// service's concurrency limit (its metrics show the limit fall from 10 to
// 1, its clients' latency rise as its queue grows), and the rehearsal
// sets it back after the run. A token file that is missing, empty or
// holds the wrong token stops the run before the storm's load, with the
// reason (the dials cannot be read).
func TestLimitStepTokenFile(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time: not in -short")
	}
	defer leakcheck.Check(t)
	tok := strings.Repeat("L", 20)
	g, err := startGate(gateConfig{Workers: 10, ServiceTime: 20 * time.Millisecond, Capacity: 10000, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	dir := t.TempDir()
	for _, c := range []struct {
		name, file string
		content    *string // nil: no such file
		wantErr    string
	}{
		{"missing", "none.token", nil, "none.token: no such file"},
		{"empty first line", "empty.token", ptr("\n" + tok + "\n"), "the first line of"},
		{"wrong token", "wrong.token", ptr(strings.Repeat("x", 20) + "\n"), "401"},
		{"right token", "admin.token", ptr("  " + tok + "  \nsecond line\n"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.content != nil {
				if err := os.WriteFile(filepath.Join(dir, c.file), []byte(*c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p := rehearseFile(t, fmt.Sprintf(limitRun, g.URL, g.Admin, c.file, g.Metrics), dir, Limits{})[0]
			if c.wantErr != "" {
				var sent int64
				r, err := Run(t.Context(), p, Options{})
				for _, o := range r.Clients {
					sent += o.Outcomes.Sent
				}
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "before the run") || sent != 0 {
					t.Errorf("err %v, %d requests sent; want the run refused before its load: %q", err, sent, c.wantErr)
				}
				if strings.Contains(fmt.Sprint(err), tok) {
					t.Error("the error prints the token")
				}
				return
			}
			r := rehearseConclusive(t, p, nil)
			t.Log(summary(r))
			if len(r.Steps) != 1 || r.Steps[0].Err != "" || r.Steps[0].TookS > 1 {
				t.Fatalf("steps %+v", r.Steps)
			}
			svc := r.Result.Services[0]
			limitAt := func(from, to float64) (lo, hi float64) {
				lo = -1
				for _, b := range svc.Bins {
					if b.T >= from-1e-9 && b.T < to-1e-9 {
						hi = max(hi, b.Limit)
						if lo < 0 || b.Limit < lo {
							lo = b.Limit
						}
					}
				}
				return lo, hi
			}
			lo1, hi1 := limitAt(0.5, 1.5)
			lo2, hi2 := limitAt(2.5, 4)
			before, during := windowOf(r.Result.Clients[0], 0.5, 1.5), windowOf(r.Result.Clients[0], 2.5, 4)
			t.Logf("the service's limit %.0f–%.0f before the step, %.0f–%.0f after it; clients before: %s; after: %s", lo1, hi1, lo2, hi2, before, during)
			for _, x := range []struct {
				name      string
				got, want float64
			}{{"limit before the step (least)", lo1, 10}, {"limit before the step (most)", hi1, 10},
				{"limit after the step (least)", lo2, 1}, {"limit after the step (most)", hi2, 1}} {
				if x.got != x.want {
					t.Errorf("%s: %.0f, want %.0f", x.name, x.got, x.want)
				}
			}
			// 100/s into 50/s: the queue grows by 50 a second, each
			// request waits about a second more per second.
			if during.p50 < 0.2 || during.p50 < 10*before.p50 {
				t.Errorf("median latency %.0f ms before, %.0f ms after the limit; want the queue to show (≥ 200 ms and ≥ 10×)", 1000*before.p50, 1000*during.p50)
			}
			if st := adminState(t, g.Admin, tok); st != (killswitch.State{}) || !strings.HasPrefix(r.Restored, "set back") {
				t.Errorf("after the run the dials are %+v (%s), want the limit set back to none", st, r.Restored)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
