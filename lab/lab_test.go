package lab

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/scenario"
)

// shortScale shrinks the default scenario's time line for `go test`: a
// 15 s run with a 3 s hold instead of 25 s and 5 s (the rates, timeouts and
// service times stay as they are). STORMGUARD_LAB_FULL=1 runs the default
// as shipped.
func shortScale() float64 {
	if os.Getenv("STORMGUARD_LAB_FULL") == "1" {
		return 1
	}
	return 0.6
}

// Acceptance bounds of the default lab (issue 7), with the tolerance of
// the comparison with the simulator.
const (
	// naive: after the outage, goodput stays below 10 % of demand.
	naiveMaxAfter = 0.10
	// stormguard: recovers within a few seconds, then goodput ≥ 90 %.
	stormguardMaxRecoveryS = 5.0
	stormguardMinAfter     = 0.90
	// The lab's goodput after the trigger, as a share of demand, is within
	// 10 points of the simulator's.
	afterTolerance = 0.10
	// ciTries bounds the runs of one scenario under CI=true while its
	// host is starved (each about 17 s).
	ciTries = 3
)

// TestDefaultLab runs the default lab, both runs, with real processes and
// checks every point of the issue: the storm outlives its trigger with
// naive retries and ends with stormguard's defenses; every request ends
// in exactly one outcome and the counts add up; the simulator agrees
// within DefaultTolerance (Σ|lab − sim| ≤ 15 % of demand, in 1 s windows)
// and the same verdict; no process or port is left behind.
//
// A run the lab finds inconclusive (its host was starved, see Host) is
// not judged: its accounting and cleanup are still checked, the rest is
// skipped with the figures. On a machine where the lab is not starved,
// a disagreement fails. Under CI=true an inconclusive run is run again,
// up to ciTries times in all, since a runner's neighbours come and go;
// if every try was starved the test skips with the figures of each (the
// CI log shows them on a line of its own), unless STORMGUARD_BUSY_HOST=1
// says the host is kept busy on purpose (scripts/stress-test): then it
// skips after the first try. A starved host is a fact about the machine,
// not a defect of the lab: failing on it would make CI's colour depend
// on its neighbours (it did: CI failed with timers 21–27 ms late at p99,
// a hair over StarvedTimerLate, where an idle machine measures 1–3 ms).
func TestDefaultLab(t *testing.T) {
	bin := stormguardBinary(t)
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 2 || f.Runs[0].Name != "naive" || f.Runs[1].Name != "stormguard" {
		t.Fatalf("the default has runs %v, want naive and stormguard", f.Runs)
	}
	ci, busy := os.Getenv("CI") == "true", os.Getenv("STORMGUARD_BUSY_HOST") == "1"
	var out Output
	for _, r := range f.Runs {
		sc := ScaleTime(r.Scenario, shortScale())
		run := func() RunResult {
			rr, err := RunScenario(t.Context(), sc, r.Name, Options{Executable: bin})
			checkGone(t, rr.Procs)
			if err != nil {
				t.Fatalf("run %s: %v", r.Name, err)
			}
			if len(rr.Procs) != 4 {
				t.Errorf("run %s: %d processes, want loadgen, app, proxy and backend: %+v", r.Name, len(rr.Procs), rr.Procs)
			}
			checkAccounting(t, rr)
			t.Logf("%s: %s", r.Name, rr.Host.Reason)
			for _, h := range rr.Host.Roles {
				t.Logf("  %s: timers %v late at p99 (max %v), service %.3f× nominal, runnable %v at p99, CPU %v",
					h.Role, h.TimerLateP99, h.TimerLateMax, h.ServiceRatio(), h.SchedLateP99, h.CPU)
			}
			return rr
		}
		rr := run()
		for try := 2; rr.Host.Starved && ci && !busy && try <= ciTries; try++ {
			t.Logf("%s: inconclusive under CI: try %d of %d", r.Name, try, ciTries)
			rr = run()
		}
		sr, err := sim.Run(t.Context(), Normalize(sc), r.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		out.Add(rr, sr)
	}
	var skipped []string
	conclusive := func(i int) bool {
		o := out.Outcomes[i]
		if !o.Host.Starved {
			return true
		}
		if ci && !busy {
			t.Logf("WARNING: %s: inconclusive in all %d tries under CI (last: %s): this runner could not give the lab its cores", o.Run, ciTries, o.Host.Reason)
		}
		skipped = append(skipped, o.Run+": "+o.Host.Reason)
		return false
	}
	naive, sg := out.Runs[0], out.Runs[1]
	if _, after := AfterTrigger(naive); conclusive(0) && (naive.Verdict != "metastable" || after >= naiveMaxAfter) {
		t.Errorf("naive: %s, goodput after the trigger %.1f%% of demand; want metastable and < %.0f%%", naive.Verdict, 100*after, 100*naiveMaxAfter)
	}
	// The recovery time is what the run measured of the system, not a
	// bound on the test's own time: a starved host makes the run
	// inconclusive instead.
	after := AfterRecovery(sg)
	if conclusive(1) && (sg.Verdict != "recovered" || *sg.RecoveryS > stormguardMaxRecoveryS || !(after >= stormguardMinAfter)) {
		t.Errorf("stormguard: %s in %v s, goodput after %.1f%% of demand; want recovered within %.0f s, then ≥ %.0f%%",
			sg.Verdict, deref(sg.RecoveryS), 100*after, stormguardMaxRecoveryS, 100*stormguardMinAfter)
	}
	for _, c := range out.Comparisons {
		t.Logf("%s", c)
		t.Logf("  goodput per %v s: lab %.0f", c.WindowS, c.Lab)
		t.Logf("  goodput per %v s: sim %.0f", c.WindowS, c.Sim)
		if c.Inconclusive {
			continue
		}
		if !c.Within {
			t.Errorf("%s: the lab and the simulator disagree beyond the tolerance", c.Run)
		}
		if d := math.Abs(c.LabAfter - c.SimAfter); d > afterTolerance {
			t.Errorf("%s: goodput after the trigger: lab %.0f%%, sim %.0f%%: more than %.0f points apart", c.Run, 100*c.LabAfter, 100*c.SimAfter, 100*afterTolerance)
		}
	}
	for i, o := range out.Outcomes {
		t.Logf("%s: %s; verdict %s, recovery %v s; wall %.1f s; proxy %+v", o.Run, o.Outcomes, out.Runs[i].Verdict, deref(out.Runs[i].RecoveryS), o.WallS, o.Proxy)
	}
	if dir := os.Getenv("STORMGUARD_LAB_REPORT"); dir != "" {
		out.Scenario = f.Base.Name
		if err := WriteReport(dir, out, nil); err != nil {
			t.Error(err)
		}
	}
	if len(skipped) > 0 {
		t.Skipf("inconclusive, not judged nor compared with the simulator: %s", strings.Join(skipped, "; "))
	}
}

func deref(p *float64) any {
	if p == nil {
		return "never"
	}
	return *p
}

// checkAccounting: every request the generator sent ended in exactly one
// outcome, and the outcomes, the client's totals and its time series
// agree.
func checkAccounting(t *testing.T, rr RunResult) {
	t.Helper()
	o, r := rr.Outcomes, rr.Result
	name := r.Name
	if err := o.Check(); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if o.InFlight != 0 {
		t.Errorf("%s: %d requests without an outcome", name, o.InFlight)
	}
	if o.Sent == 0 {
		t.Fatalf("%s: nothing was sent", name)
	}
	ct := r.Clients[0].Total
	if ct.Requests != o.Sent || ct.Succeeded != o.Succeeded || ct.Failed != o.Failed() {
		t.Errorf("%s: totals %+v disagree with outcomes %s", name, ct, o)
	}
	if g := ct.GaveUp.Sum(); int64(g) != ct.Failed {
		t.Errorf("%s: %v give-ups for %d failures", name, g, ct.Failed)
	}
	var demand float64
	for _, b := range r.Clients[0].Bins {
		demand += b.Demand * r.BinS
	}
	if int64(math.Round(demand)) != o.Sent {
		t.Errorf("%s: the demand series adds up to %.0f requests, %d were sent", name, demand, o.Sent)
	}
	// The services' books: arrived = completed + shed + expired + in system.
	for _, v := range r.Services {
		tt := v.Total
		if tt.Arrived != tt.Completed+tt.Shed+tt.Expired+tt.InSystem {
			t.Errorf("%s: service %s: %+v does not add up", name, v.Name, tt)
		}
	}
}

// TestCancelMidRun cancels a run once every role runs, as Ctrl-C does:
// the run returns the context's error and leaves no process or port.
func TestCancelMidRun(t *testing.T) {
	bin := stormguardBinary(t)
	sc := quickScenario(10*time.Second, "hold")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var started []Proc
	opts := Options{Executable: bin, OnStart: func(p Proc) {
		mu.Lock()
		started = append(started, p)
		if p.Role == RoleLoadgen { // the last to start
			time.AfterFunc(1500*time.Millisecond, cancel)
		}
		mu.Unlock()
	}}
	begin := time.Now()
	rr, err := RunScenario(ctx, sc, "cancelled", opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(begin); took > hostspeed.Scale(8*time.Second) {
		t.Errorf("the cancelled run took %v to return", took)
	}
	if len(rr.Procs) != 3 {
		t.Errorf("procs = %+v, want loadgen, proxy and backend", rr.Procs)
	}
	checkGone(t, started)
}

// TestRoleDiesMidRun kills the backend during a run: the run fails,
// naming it, and the other roles are stopped.
func TestRoleDiesMidRun(t *testing.T) {
	bin := stormguardBinary(t)
	sc := quickScenario(10*time.Second, "")
	var mu sync.Mutex
	var started []Proc
	opts := Options{Executable: bin, OnStart: func(p Proc) {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, p)
		if p.Role == RoleBackend {
			pid := p.PID
			time.AfterFunc(2*time.Second, func() {
				if proc, err := os.FindProcess(pid); err == nil {
					proc.Kill()
				}
			})
		}
	}}
	_, err := RunScenario(t.Context(), sc, "killed", opts)
	if err == nil || !strings.Contains(err.Error(), "backend exited during the run") {
		t.Fatalf("err = %v, want the backend's early exit", err)
	}
	checkGone(t, started)
}

// TestNotStormguard starts the roles with a binary that is not
// stormguard: the run fails at once and nothing is left.
func TestNotStormguard(t *testing.T) {
	var started []Proc
	_, err := RunScenario(t.Context(), quickScenario(time.Second, ""), "bad", Options{Executable: "/bin/true",
		OnStart: func(p Proc) { started = append(started, p) }})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("err = %v", err)
	}
	checkGone(t, started)
}

// quickScenario is a small system (a client calls the backend directly)
// that the lab runs for d, with an outage in mode (none if "") from d/4
// for d/4.
func quickScenario(d time.Duration, mode string) scenario.Scenario {
	sc := scenario.Scenario{
		Name:     "quick",
		Duration: d,
		Clients: []scenario.Client{{Name: "users", Target: "db", Arrivals: scenario.Arrivals{Kind: "poisson", Rate: 100},
			Timeout: 500 * time.Millisecond}},
		Services: []scenario.Service{{Name: "db", Workers: 4, ServiceTime: scenario.Dist{Kind: "constant", Mean: 10 * time.Millisecond}}},
	}
	if mode != "" {
		sc.Triggers = []scenario.Trigger{{Kind: "outage", Target: "db", At: d / 4, Duration: d / 4, Mode: mode}}
	}
	return sc
}
