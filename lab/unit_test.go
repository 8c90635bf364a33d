package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

func TestOutcomesCheck(t *testing.T) {
	ok := Outcomes{Sent: 10, Succeeded: 5, TimedOut: 2, Shed: 1, Errors: map[string]int64{"http 502": 2}}
	if err := ok.Check(); err != nil {
		t.Errorf("%v", err)
	}
	if ok.Ended() != 10 || ok.Failed() != 5 {
		t.Errorf("ended %d failed %d", ok.Ended(), ok.Failed())
	}
	lost := ok
	lost.Sent = 11
	if err := lost.Check(); err == nil {
		t.Error("a request without an outcome passed")
	}
	inFlight := lost
	inFlight.InFlight = 1
	if err := inFlight.Check(); err != nil {
		t.Errorf("in flight: %v", err)
	}
	twice := ok
	twice.Succeeded = 6
	if err := twice.Check(); err == nil {
		t.Error("a request counted twice passed")
	}
	if s := ok.String(); s != "sent 10: 5 ok, 2 timed out, 1 shed, 2 http 502" {
		t.Errorf("String() = %q", s)
	}
}

func TestClassify(t *testing.T) {
	give := func(last error) error {
		return &retry.GiveUpError{Reason: retry.ErrAttemptsExhausted, Last: last, Attempts: 1}
	}
	sig := func(code int, overload bool) error {
		return &retry.SignalError{Err: &statusError{code: code, overload: overload}}
	}
	tests := []struct {
		err      error
		deadline bool
		want     outcome
	}{
		{nil, false, outcome{kind: outcomeSuccess}},
		{give(sig(503, true)), false, outcome{kind: outcomeShed}},
		{give(sig(429, false)), false, outcome{kind: outcomeShed}},
		{give(sig(503, false)), false, outcome{kind: outcomeError, err: "http 503"}},
		{give(sig(502, false)), false, outcome{kind: outcomeError, err: "http 502"}},
		{give(fmt.Errorf("get: %w", context.DeadlineExceeded)), false, outcome{kind: outcomeTimeout}},
		{give(errors.New("whatever")), true, outcome{kind: outcomeTimeout}},
		{give(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), false, outcome{kind: outcomeError, err: "connection refused"}},
		{give(&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), false, outcome{kind: outcomeError, err: "connection reset"}},
		{give(io.ErrUnexpectedEOF), false, outcome{kind: outcomeError, err: "connection closed"}},
		{give(context.Canceled), false, outcome{kind: outcomeError, err: "canceled"}},
		{give(errors.New("whatever")), false, outcome{kind: outcomeError, err: "other"}},
	}
	for _, tt := range tests {
		if got := classify(tt.err, tt.deadline); got != tt.want {
			t.Errorf("classify(%v, %v) = %+v, want %+v", tt.err, tt.deadline, got, tt.want)
		}
	}
}

func TestNewPlanDefault(t *testing.T) {
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Runs {
		p, err := NewPlan(r.Scenario)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if p.App == nil || p.App.Call == nil || p.Backend.Name != "db" || p.Loadgen.Name != "users" {
			t.Fatalf("%s: plan %+v", r.Name, p)
		}
		if p.Scenario.Bin != DefaultBin && r.Scenario.Bin == 0 {
			t.Errorf("%s: bin %v", r.Name, p.Scenario.Bin)
		}
		if len(p.Proxy.Faults) != 1 || p.Proxy.Faults[0].Mode != "hold" {
			t.Errorf("%s: faults %+v", r.Name, p.Proxy.Faults)
		}
		if p.App.Call.Policy.AttemptTimeout != time.Second || p.Loadgen.Policy.AttemptTimeout != p.Loadgen.Timeout {
			t.Errorf("%s: attempt timeouts %v and %v", r.Name, p.App.Call.Policy.AttemptTimeout, p.Loadgen.Policy.AttemptTimeout)
		}
		defended := r.Name == "stormguard"
		if p.Backend.Defended != defended || p.App.Defended != defended || p.App.Call.PropagateDeadline != defended {
			t.Errorf("%s: defended backend %v, app %v, propagate %v", r.Name, p.Backend.Defended, p.App.Defended, p.App.Call.PropagateDeadline)
		}
	}
}

func TestNewPlanRejects(t *testing.T) {
	base := func() scenario.Scenario { return quickScenario(10*time.Second, "hold") }
	tests := []struct {
		name   string
		change func(*scenario.Scenario)
		want   string
	}{
		{"two clients", func(s *scenario.Scenario) {
			s.Clients = append(s.Clients, scenario.Client{Name: "more", Target: "db", Arrivals: scenario.Arrivals{Rate: 1}})
		}, "one client"},
		{"closed loop", func(s *scenario.Scenario) {
			s.Clients[0].Arrivals = scenario.Arrivals{Kind: "closed", Users: 3, Think: scenario.Dist{Mean: time.Second}}
		}, "poisson or constant"},
		{"too fast", func(s *scenario.Scenario) { s.Clients[0].Arrivals.Rate = 1e5 }, "more than the lab sends"},
		{"pause", func(s *scenario.Scenario) {
			s.Triggers = append(s.Triggers, scenario.Trigger{Kind: "pause", Target: "db", At: time.Second, Duration: time.Second})
		}, "cannot pause"},
		{"three tiers", func(s *scenario.Scenario) {
			s.Services = []scenario.Service{
				{Name: "db", Workers: 2, Calls: []scenario.Call{{Service: "x"}}},
				{Name: "x", Workers: 2, Calls: []scenario.Call{{Service: "y"}}},
				{Name: "y", Workers: 2},
			}
			s.Triggers = nil
		}, "makes no calls"},
		{"too long", func(s *scenario.Scenario) { s.Duration = time.Hour }, "longer than the lab runs"},
		{"fleet budget", func(s *scenario.Scenario) {
			s.Clients[0].Policy = scenario.PolicySpec{Preset: "stormguard", Policy: must(retry.Preset("stormguard"))}
			s.Clients[0].Processes = 2
			s.Clients[0].Fleet = &scenario.FleetSpec{}
		}, "fleet"},
		{"tick capacity", func(s *scenario.Scenario) {
			s.Services[0].Capacity = &scenario.TickCapacity{PerTick: 1, Tick: time.Second}
		}, "capacity per tick"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.change(&s)
			err := Check(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check = %v, want an error with %q", err, tt.want)
			}
		})
	}
	if err := Check(base()); err != nil {
		t.Errorf("the quick scenario: %v", err)
	}
}

// TestArrivalsAreTheSimulators: the load generator draws the very
// arrivals the simulator draws for the same client, so the lab's demand
// and the simulated demand are the same, bin by bin.
func TestArrivalsAreTheSimulators(t *testing.T) {
	sc := quickScenario(20*time.Second, "")
	sc.Clients[0].Arrivals.Schedule = []scenario.RatePoint{{At: 5 * time.Second, Rate: 300}, {At: 10 * time.Second, Rate: 0},
		{At: 12 * time.Second, Rate: 200, Ramp: true}, {At: 15 * time.Second, Rate: 50}}
	sc.Triggers = []scenario.Trigger{{Kind: "load", At: 16 * time.Second, Duration: 2 * time.Second, Factor: 3}}
	for _, kind := range []string{"poisson", "constant"} {
		sc.Clients[0].Arrivals.Kind = kind
		p, err := NewPlan(sc)
		if err != nil {
			t.Fatal(err)
		}
		simRun, err := sim.Run(t.Context(), p.Scenario, "sim", nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Unix(0, 0)
		g, err := newLoadgen(p.Loadgen, newClock(start, p.Scenario.Bin, p.Scenario.Duration))
		if err != nil {
			t.Fatal(err)
		}
		rng := streamFor(p.Loadgen)
		counts := make([]int, len(simRun.Clients[0].Bins))
		for at, ok := g.next(0, &rng); ok; at, ok = g.next(at, &rng) {
			counts[int(at/p.Scenario.Bin)]++
		}
		for b, bin := range simRun.Clients[0].Bins {
			if want := int(bin.Demand*simRun.BinS + 0.5); counts[b] != want {
				t.Fatalf("%s: bin %d: %d arrivals, the simulator has %d", kind, b, counts[b], want)
			}
		}
	}
}

// TestRolesInProcess runs a backend and an app with RoleMain in this
// process (under the race detector when it is on): the protocol, the
// accounting and the result files.
func TestRolesInProcess(t *testing.T) {
	dir := t.TempDir()
	const n = 40
	for _, defended := range []bool{false, true} {
		t.Run(fmt.Sprintf("defended=%v", defended), func(t *testing.T) {
			common := func(role string) Common {
				return Common{Role: role, Name: role, Seed: 1, Bin: 100 * time.Millisecond, Duration: 2 * time.Second,
					Result: filepath.Join(dir, fmt.Sprintf("%s-%v.json", role, defended))}
			}
			back := ServiceConfig{Common: common(RoleBackend), Workers: 2, Defended: defended,
				ServiceTime: scenario.Dist{Kind: "constant", Mean: 5 * time.Millisecond}, Queue: scenario.QueueSpec{Discipline: "fifo"}.ShedConfig(0)}
			br := startRole(t, RoleBackend, back, dir)
			naive, _ := retry.Preset("naive")
			naive.AttemptTimeout = hostspeed.Scale(time.Second)
			app := ServiceConfig{Common: common(RoleApp), Workers: 100, Defended: defended,
				Call: &CallConfig{Upstream: br.addr, Policy: naive, Timeout: naive.AttemptTimeout, PropagateDeadline: defended, OnFailure: "fail"}}
			ar := startRole(t, RoleApp, app, dir)
			start := time.Now()
			br.start(start)
			ar.start(start)
			for i := range n {
				resp, err := http.Get("http://" + ar.addr + "/")
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %s", i, resp.Status)
				}
			}
			for _, r := range []*roleProc{ar, br} {
				res := r.stop(t)
				tt := res.Service.Total
				if tt.Arrived != n || tt.Completed != n || tt.Goodput != n || tt.InSystem != 0 {
					t.Errorf("%s: totals %+v, want %d arrived and served", r.role, tt, n)
				}
				// Every role measures its scheduling; the backend times
				// its n works of 5 ms, the app has no service time.
				h := res.Host
				if h == nil || h.TimerSamples == 0 {
					t.Fatalf("%s: no timer figures in the result: %+v", r.role, h)
				}
				if wantWorks := map[string]int64{RoleBackend: n, RoleApp: 0}[r.role]; h.Works != wantWorks ||
					h.ServiceNominal != time.Duration(wantWorks)*5*time.Millisecond || h.ServiceMeasured < h.ServiceNominal {
					t.Errorf("%s: %d works, nominal %v, measured %v; want %d works of 5ms, measured ≥ nominal",
						r.role, h.Works, h.ServiceNominal, h.ServiceMeasured, wantWorks)
				}
			}
		})
	}
}

func TestCompare(t *testing.T) {
	sc := quickScenario(10*time.Second, "hold")
	p, _ := NewPlan(sc)
	a, err := sim.Run(t.Context(), p.Scenario, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(a, a, 0)
	if c.Error != 0 || c.MeanAbsDiff != 0 || !c.Within || len(c.T) != 10 || c.WindowS != DefaultWindow {
		t.Errorf("a run against itself: %+v", c)
	}
	b := a
	b.Clients = []result.ClientSeries{a.Clients[0]}
	b.Clients[0].Bins = append([]result.ClientBin(nil), a.Clients[0].Bins...)
	for i := range b.Clients[0].Bins {
		b.Clients[0].Bins[i].Goodput = 0
	}
	if c := Compare(b, a, 0); c.Within || c.Error <= DefaultTolerance {
		t.Errorf("no goodput against the simulation: %+v", c)
	}
}

// TestWriteReport writes a report from simulated runs standing in for
// the lab's: the sim report's files, the figure and the comparison
// section.
func TestWriteReport(t *testing.T) {
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	out := Output{Scenario: f.Base.Name}
	for i, r := range f.Runs {
		s, err := sim.Run(t.Context(), Normalize(ScaleTime(r.Scenario, 0.3)), r.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		rr := RunResult{Result: s, Outcomes: Outcomes{Sent: 1, Succeeded: 1}, Host: Host{Reason: "host ok: timers 0.5 ms late at p99, service time 1.00× nominal"}}
		if i == 1 { // the second run's host was starved
			rr.Host = Host{Starved: true, Reason: "host starved: timers 38 ms late at p99, service time 2.10× nominal"}
			rr.MarkInconclusive()
		}
		out.Add(rr, s)
	}
	dir := t.TempDir()
	if err := WriteReport(dir, out, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"index.html", "summary.json", "naive.csv", "stormguard.png", "lab.png", "lab.svg", "lab.json", "compare.csv"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	if !strings.Contains(string(page), "Simulation against the lab") || !strings.Contains(string(page), "</html>") {
		t.Error("index.html lacks the comparison section")
	}
	for _, want := range []string{"The machine", "host ok: timers 0.5 ms late at p99", "host starved: timers 38 ms late at p99, service time 2.10× nominal",
		"not compared: the lab&#39;s run was inconclusive"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
