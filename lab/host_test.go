package lab

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

func TestJudgeHost(t *testing.T) {
	ms := time.Millisecond
	role := func(name string, p99 time.Duration, nominal, measured time.Duration) RoleHost {
		return RoleHost{Role: name, HostStats: HostStats{TimerSamples: 100, TimerLateP99: p99, TimerLateMax: 2 * p99, Works: 10,
			ServiceNominal: nominal, ServiceMeasured: measured}}
	}
	stalled := role(RoleProxy, ms, 0, 0)
	stalled.TimerLateMax = 600 * ms
	atStall := role(RoleProxy, ms, 0, 0)
	atStall.TimerLateMax = StarvedStall
	tests := []struct {
		name    string
		roles   []RoleHost
		starved bool
		reason  string
	}{
		{"idle", []RoleHost{role(RoleBackend, 600*time.Microsecond, 500*ms, 501*ms), role(RoleLoadgen, 800*time.Microsecond, 0, 0)},
			false, "host ok: timers 0.8 ms late at p99, service time 1.00× nominal"},
		{"late timers", []RoleHost{role(RoleBackend, 2*ms, 500*ms, 500*ms), role(RoleApp, 38*ms, 0, 0)},
			true, "host starved: timers 38 ms late at p99, service time 1.00× nominal"},
		{"slow service", []RoleHost{role(RoleBackend, 2*ms, 500*ms, 1050*ms)},
			true, "host starved: timers 2.0 ms late at p99, service time 2.10× nominal"},
		{"both", []RoleHost{role(RoleBackend, 38*ms, 500*ms, 1050*ms)},
			true, "host starved: timers 38 ms late at p99, service time 2.10× nominal"},
		{"at the thresholds", []RoleHost{role(RoleBackend, StarvedTimerLate, 1000*ms, time.Duration(StarvedServiceRatio*1000)*ms)},
			false, "host ok: timers 20 ms late at p99, service time 1.05× nominal"},
		{"no service time", []RoleHost{role(RoleProxy, ms, 0, 0)}, false, "host ok: timers 1.0 ms late at p99, service time 1.00× nominal"},
		{"a stall", []RoleHost{role(RoleBackend, 2*ms, 500*ms, 501*ms), stalled},
			true, "host starved: timers 2.0 ms late at p99, service time 1.00× nominal, the proxy stalled for 600 ms"},
		{"a stall at the threshold", []RoleHost{atStall}, false, "host ok: timers 1.0 ms late at p99, service time 1.00× nominal"},
	}
	for _, tt := range tests {
		h := judgeHost(tt.roles)
		if h.Starved != tt.starved || h.Reason != tt.reason {
			t.Errorf("%s: starved %v, %q; want %v, %q", tt.name, h.Starved, h.Reason, tt.starved, tt.reason)
		}
	}
	h := judgeHost([]RoleHost{role(RoleBackend, 2*ms, 500*ms, 600*ms), role(RoleApp, 5*ms, 100*ms, 110*ms)})
	if h.TimerRole != RoleApp || h.ServiceRole != RoleBackend || h.ServiceRatio != 1.2 || h.StallRole != RoleApp || h.StallS != 0.01 {
		t.Errorf("worst timer role %s, service role %s at %v, stall %s %v s; want app, backend at 1.2, app 0.01 s",
			h.TimerRole, h.ServiceRole, h.ServiceRatio, h.StallRole, h.StallS)
	}
}

// TestMarkInconclusive: a starved run's verdict becomes inconclusive,
// keeping what was measured; its comparison is not made.
func TestMarkInconclusive(t *testing.T) {
	rec := 1.5
	r := RunResult{Result: result.Result{Name: "sg", Judgement: result.Judgement{Verdict: "metastable", Why: "goodput was still below 90% of demand at the end."}},
		Host: Host{Starved: true, Reason: "host starved: timers 38 ms late at p99, service time 2.10× nominal"}}
	r.MarkInconclusive()
	if r.Result.Verdict != VerdictInconclusive || r.Host.MeasuredVerdict != "metastable" {
		t.Errorf("verdict %q, measured %q; want inconclusive, metastable", r.Result.Verdict, r.Host.MeasuredVerdict)
	}
	if want := "inconclusive (host starved: timers 38 ms late at p99, service time 2.10× nominal); the lab measured metastable: goodput was still below 90% of demand at the end"; r.Result.Why != want {
		t.Errorf("why = %q, want %q", r.Result.Why, want)
	}
	ok := RunResult{Result: result.Result{Name: "sg", Judgement: result.Judgement{Verdict: "recovered", RecoveryS: &rec}}, Host: Host{Reason: "host ok: …"}}
	ok.MarkInconclusive()
	if ok.Result.Verdict != "recovered" || ok.Host.MeasuredVerdict != "" {
		t.Errorf("a run on a healthy host became %q", ok.Result.Verdict)
	}

	var out Output
	out.Add(r, result.Result{Name: "sg", Judgement: result.Judgement{Verdict: "metastable"}})
	c := out.Comparisons[0]
	if !c.Inconclusive || c.Within || c.Reason != r.Host.Reason {
		t.Errorf("comparison: inconclusive %v, within %v, reason %q", c.Inconclusive, c.Within, c.Reason)
	}
	if s := c.String(); !strings.Contains(s, "lab inconclusive (host starved: timers 38 ms") || !strings.Contains(s, "not compared") {
		t.Errorf("comparison line %q", s)
	}
	if out.Outcomes[0].Host.Reason != r.Host.Reason {
		t.Error("the outcomes do not carry the host's figures")
	}
}

// TestTimerProbe: the probe wakes every 10 ms from its start to its end;
// with every core kept busy by spinning goroutines, its wake-ups come
// later than on an idle host.
func TestTimerProbe(t *testing.T) {
	start := time.Now().Add(50 * time.Millisecond)
	late := timerProbe(t.Context(), start, start.Add(300*time.Millisecond))
	if time.Now().Before(start.Add(300 * time.Millisecond)) {
		t.Error("the probe ended before its end")
	}
	// 30 wake-ups on an idle host, fewer when they come late.
	if n := len(late); n < 3 || n > 31 {
		t.Errorf("%d wake-ups in 300 ms, want at most 31", n)
	}
	var h HostStats
	timerStats(&h, late)
	if h.TimerSamples != len(late) || h.TimerLateP50 > h.TimerLateP99 || h.TimerLateP99 > h.TimerLateMax || h.TimerLateP50 < 0 {
		t.Errorf("stats %+v", h)
	}
	if h.TimerLateP50 > hostspeed.Scale(5*time.Millisecond) {
		t.Errorf("the probe's wake-ups are %v late at the median", h.TimerLateP50)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got := timerProbe(ctx, time.Now(), time.Now().Add(time.Hour)); len(got) != 0 {
		t.Errorf("a cancelled probe took %d samples", len(got))
	}
}

// TestServiceClockMeasures: a service's work is timed as it took, beside
// the time drawn; a sleep never takes less than asked.
func TestServiceClockMeasures(t *testing.T) {
	clk := newClock(time.Now(), 100*time.Millisecond, time.Second)
	s, err := newService(ServiceConfig{Common: Common{Role: RoleBackend, Name: "db", Seed: 1, Bin: 100 * time.Millisecond, Duration: time.Second},
		Workers: 4, ServiceTime: scenario.Dist{Kind: "constant", Mean: 5 * time.Millisecond}, Queue: scenario.QueueSpec{Discipline: "fifo"}.ShedConfig(0)}, clk)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { s.work(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) })
	}
	wg.Wait()
	var h HostStats
	s.svc.stats(&h)
	if h.Works != 8 || h.ServiceNominal != 40*time.Millisecond || h.ServiceRatio() < 1 {
		t.Errorf("stats %+v (ratio %v), want 8 works of 5ms, ratio ≥ 1", h, h.ServiceRatio())
	}
}
