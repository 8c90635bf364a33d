package lab

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// TestGoodputOneMeaning drives one scenario through the lab's roles, in
// this process, and through the simulator, and holds the three ways of
// counting goodput together (issue 26 point 5): an answer is goodput only
// when it is a success its caller was still waiting for, at every tier.
// Users call an app (max_attempts 1) whose one call to a database fails 30 %
// of the time (error_rate), so the app answers 502 to 30 % of its users: no
// goodput at the app, though its work completed while its caller waited.
// For each tier: the lab's goodput equals, to a request or two (the lab
// counts as the handler finishes, the gate when it releases), what the
// metrics package exported from the defended servers (Prometheus, from
// admit.Stats), and is within 10 % of the simulator's; the app's goodput
// is its users' successes, and below its completed work.
func TestGoodputOneMeaning(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of real traffic on loopback")
	}
	leakcheck.Check(t)
	naive, _ := retry.Preset("naive")
	naive.MaxAttempts = 1
	sc := scenario.Scenario{
		Name: "goodput", Duration: 2 * time.Second, Bin: 100 * time.Millisecond, Seed: 3,
		Clients: []scenario.Client{{Name: "users", Target: "app", Arrivals: scenario.Arrivals{Kind: "poisson", Rate: 150},
			Timeout: 2 * time.Second, Policy: scenario.PolicySpec{Policy: naive}}},
		Services: []scenario.Service{
			{Name: "app", Workers: 64, Calls: []scenario.Call{{Service: "db", Timeout: time.Second, Policy: scenario.PolicySpec{Policy: naive}}}},
			{Name: "db", Workers: 8, ServiceTime: scenario.Dist{Kind: "constant", Mean: 2 * time.Millisecond}, ErrorRate: 0.3},
		},
	}
	for _, defended := range []bool{false, true} {
		t.Run(fmt.Sprintf("defended %v", defended), func(t *testing.T) {
			s := sc
			s.Services = append([]scenario.Service(nil), sc.Services...)
			s.Clients = append([]scenario.Client(nil), sc.Clients...)
			if defended {
				s.Clients[0].PropagateDeadline = true
				s.Services[0].Defenses, s.Services[1].Defenses = "stormguard", "stormguard"
				s.Services[0].Calls = append([]scenario.Call(nil), s.Services[0].Calls...)
				s.Services[0].Calls[0].PropagateDeadline = true
			}
			p, err := NewPlan(s)
			if err != nil {
				t.Fatal(err)
			}
			lab, exported, users := goodputInProcess(t, p)
			simRun, err := sim.Run(t.Context(), p.Scenario, "sim", nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"app", "db"} {
				l, m := lab[name], simRun.Services[i].Total
				t.Logf("%s: lab arrived %d completed %d goodput %d failed %d wasted %d; exported goodput %v; sim arrived %d goodput %d failed %d",
					name, l.Arrived, l.Completed, l.Goodput, l.Failed, l.Wasted, exported[name], m.Arrived, m.Goodput, m.Failed)
				if l.Arrived < 200 {
					t.Fatalf("%s: %d arrivals in the lab: too few to compare", name, l.Arrived)
				}
				if defended {
					if e, ok := exported[name]; !ok || math.Abs(e-float64(l.Goodput)) > 2 {
						t.Errorf("%s: lab goodput %d, metrics exported %v (present %v); want them equal", name, l.Goodput, e, ok)
					}
				}
				if d := math.Abs(float64(l.Goodput-m.Goodput)) / float64(m.Goodput); d > 0.10 {
					t.Errorf("%s: lab goodput %d, simulator %d: %.0f %% apart, want ≤ 10 %%", name, l.Goodput, m.Goodput, 100*d)
				}
				if l.Completed != l.Goodput+l.Failed+l.Wasted || m.Completed != m.Goodput+m.Failed+m.Wasted {
					t.Errorf("%s: books: lab %+v, sim %+v", name, l, m)
				}
			}
			app := lab["app"]
			if d := app.Goodput - users.Succeeded; d < -2 || d > 2 {
				t.Errorf("app goodput %d, its users' successes %d: want them equal", app.Goodput, users.Succeeded)
			}
			if float64(app.Goodput) > 0.85*float64(app.Completed) {
				t.Errorf("app goodput %d of %d completed: its 502s (30 %% of the database's answers) counted as goodput", app.Goodput, app.Completed)
			}
		})
	}
}

// goodputInProcess runs plan p's roles in this process: the database, the
// app calling it directly (no fault proxy: the scenario has no fault) and
// the load generator. It returns each service's totals as the lab counts
// them, the goodput the metrics package exported for the defended ones
// (stormguard_server_requests_total{outcome="goodput"}), and the users'.
func goodputInProcess(t *testing.T, p Plan) (map[string]result.ServiceTotal, map[string]float64, result.ClientTotal) {
	t.Helper()
	start := time.Now().Add(100 * time.Millisecond)
	clk := newClock(start, p.Scenario.Bin, p.Scenario.Duration)
	reg := prometheus.NewRegistry()
	var servers []*http.Server
	var services []*service
	serve := func(cfg ServiceConfig) string {
		s, err := newService(cfg, clk)
		if err != nil {
			t.Fatal(err)
		}
		if s.hs != nil {
			if err := metrics.RegisterServer(reg, metrics.Labels{Target: cfg.Name}, s.hs.Stats); err != nil {
				t.Fatal(err)
			}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: s, ReadHeaderTimeout: time.Minute, ErrorLog: discardLog()}
		go srv.Serve(ln)
		servers, services = append(servers, srv), append(services, s)
		return ln.Addr().String()
	}
	app := *p.App
	call := *app.Call
	call.Upstream = serve(p.Backend)
	app.Call = &call
	lg := p.Loadgen
	lg.Target = serve(app)
	g, err := newLoadgen(lg, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), p.Scenario.Duration+30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { g.run(ctx) })
	wg.Wait()
	for _, srv := range servers {
		srv.Close()
	}
	for _, s := range services {
		if s.client != nil {
			s.client.CloseIdleConnections()
		}
	}
	g.client.CloseIdleConnections()
	totals := map[string]result.ServiceTotal{}
	for _, s := range services {
		totals[s.cfg.Name] = s.counts.series(s.cfg.Name, s.inSystem.Load()).Total
	}
	exported := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "stormguard_server_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var target, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "target":
					target = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if outcome == "goodput" {
				exported[target] = m.GetCounter().GetValue()
			}
		}
	}
	users, _ := g.result()
	return totals, exported, users.Total
}
