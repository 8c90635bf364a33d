package lab

import (
	"cmp"
	"context"
	"fmt"
	"github.com/stormguard/stormguard/sim/result"
	"math"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// VerdictInconclusive replaces the verdict of a lab run whose host was
// starved (see Host): its measurements describe the machine, not the
// system under test.
const VerdictInconclusive = "inconclusive"

// The thresholds past which a lab run is inconclusive. Either suffices.
const (
	// StarvedTimerLate bounds how late a role's timers may fire at the
	// 99th percentile: a role whose timers are later than that does not
	// send, time out or serve on the scenario's schedule. It is a fifth
	// of the lab's default bin; on an idle 2-core machine the default
	// lab's worst role measures well under 1 ms (see docs/lab.md).
	StarvedTimerLate = 20 * time.Millisecond
	// StarvedServiceRatio bounds a service's measured service time over
	// the one it drew (the nominal): a backend whose 50 ms of work take
	// 55 ms serves a tenth less than the scenario says, and the default
	// scenario runs at 93 % of its capacity, so a few percent decide
	// between a recovery and a collapse. Idle, the default's backend
	// measures 1.00×.
	StarvedServiceRatio = 1.05
	// StarvedStall bounds the latest single wake-up of any role's probe:
	// a role frozen for more than two and a half bins leaves a hole in
	// the lab's series that the simulator has no cause for, and if it
	// falls on the release of an outage it decides the recovery. Idle,
	// the default lab's longest stall is 8–30 ms.
	StarvedStall = 250 * time.Millisecond
)

// probePeriod is how often a role's timer probe asks to be woken.
const probePeriod = 10 * time.Millisecond

// HostStats is what one role measured of its own scheduling during a run.
type HostStats struct {
	// TimerSamples counts the probe's wake-ups; TimerLateP50, TimerLateP99
	// and TimerLateMax are how much later than asked they came (the
	// probe asks every 10 ms, from the run's start to its end).
	TimerSamples int           `json:"timer_samples"`
	TimerLateP50 time.Duration `json:"timer_late_p50_ns"`
	TimerLateP99 time.Duration `json:"timer_late_p99_ns"`
	TimerLateMax time.Duration `json:"timer_late_max_ns"`
	// Works counts the service times a service waited (those > 0);
	// ServiceNominal is their sum as drawn from the scenario's
	// distribution (slowdown and capacity triggers included),
	// ServiceMeasured their sum as they took.
	Works           int64         `json:"works,omitempty"`
	ServiceNominal  time.Duration `json:"service_nominal_ns,omitempty"`
	ServiceMeasured time.Duration `json:"service_measured_ns,omitempty"`
	// SchedLateP99 is the 99th percentile of the time the role's
	// goroutines spent runnable before they ran, during the run (the Go
	// runtime's /sched/latencies:seconds, to the upper bound of its
	// bucket); SchedSamples counts them.
	SchedLateP99 time.Duration `json:"sched_late_p99_ns,omitempty"`
	SchedSamples uint64        `json:"sched_samples,omitempty"`
	// CPU is the CPU time the role's process used during the run;
	// RunQueueWait the time its threads were runnable but waited for a CPU
	// (Linux: /proc/self/task/*/schedstat).
	CPU          time.Duration `json:"cpu_ns,omitempty"`
	RunQueueWait time.Duration `json:"run_queue_wait_ns,omitempty"`
}

// ServiceRatio is ServiceMeasured / ServiceNominal, or 0 when the role
// waited no service time.
func (h HostStats) ServiceRatio() float64 {
	if h.ServiceNominal <= 0 {
		return 0
	}
	return float64(h.ServiceMeasured) / float64(h.ServiceNominal)
}

// RoleHost is one role's HostStats in a run's Host.
type RoleHost struct {
	Role string `json:"role"`
	HostStats
}

// Host is a lab run's account of its own machine: how late the roles'
// timers fired and how long the services' work took against what they
// drew. A run is Starved when the worst role's p99 timer lateness
// exceeds StarvedTimerLate, a service's ratio exceeds StarvedServiceRatio
// or a role stalled longer than StarvedStall; its verdict is then
// VerdictInconclusive.
type Host struct {
	// TimerLateP99S is the worst role's p99 timer lateness, seconds;
	// TimerRole names that role.
	TimerLateP99S float64 `json:"timer_late_p99_s"`
	TimerRole     string  `json:"timer_role"`
	// ServiceRatio is the highest measured / nominal service time of the
	// services (1 when none waited); ServiceRole names that service's role.
	ServiceRatio float64 `json:"service_ratio"`
	ServiceRole  string  `json:"service_role,omitempty"`
	// StallS is the longest single lateness of any role's probe, seconds;
	// StallRole names that role.
	StallS    float64 `json:"stall_s"`
	StallRole string  `json:"stall_role"`
	// Starved reports that a threshold was exceeded. Reason says so with
	// the figures: "host starved: timers 38 ms late at p99, service time
	// 2.10× nominal"; or "host ok: …" with the same figures.
	Starved bool   `json:"starved"`
	Reason  string `json:"reason"`
	// MeasuredVerdict is the verdict the lab's measurements gave before
	// the run was found inconclusive ("" when it was not).
	MeasuredVerdict string `json:"measured_verdict,omitempty"`
	// Roles lists each role's figures.
	Roles []RoleHost `json:"roles"`
}

// judgeHost builds a run's Host from its roles' figures.
func judgeHost(roles []RoleHost) Host {
	h := Host{ServiceRatio: 1, Roles: roles}
	for _, r := range roles {
		if s := r.TimerLateP99.Seconds(); s > h.TimerLateP99S || h.TimerRole == "" {
			h.TimerLateP99S, h.TimerRole = s, r.Role
		}
		if q := r.ServiceRatio(); q > 0 && (q > h.ServiceRatio || h.ServiceRole == "") {
			h.ServiceRatio, h.ServiceRole = q, r.Role
		}
		if s := r.TimerLateMax.Seconds(); s > h.StallS || h.StallRole == "" {
			h.StallS, h.StallRole = s, r.Role
		}
	}
	late, stall := time.Duration(h.TimerLateP99S*1e9), time.Duration(h.StallS*1e9)
	h.Starved = late > StarvedTimerLate || h.ServiceRatio > StarvedServiceRatio || stall > StarvedStall
	state := "host ok"
	if h.Starved {
		state = "host starved"
	}
	h.Reason = fmt.Sprintf("%s: timers %s late at p99, service time %.2f× nominal", state, ms(late), h.ServiceRatio)
	if stall > StarvedStall {
		h.Reason += fmt.Sprintf(", the %s stalled for %s", h.StallRole, ms(stall))
	}
	return h
}

// ms formats d in milliseconds, with a decimal below 10 ms.
func ms(d time.Duration) string {
	v := float64(d) / 1e6
	if v < 10 {
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// MarkInconclusive makes r's verdict, and its clients' and services',
// VerdictInconclusive when r.Host is starved (RunScenario does it to
// every run it measures), keeping what was measured in
// h.MeasuredVerdict and the whys; the recovery and collapse times, which
// describe the machine, are cleared, so no table or chart shows them.
func (r *RunResult) MarkInconclusive() {
	if !r.Host.Starved {
		return
	}
	res := &r.Result
	r.Host.MeasuredVerdict = res.Verdict
	mark := func(j result.Judgement) result.Judgement {
		why := strings.TrimSuffix(j.Why, ".")
		return result.Judgement{Verdict: VerdictInconclusive,
			Why: fmt.Sprintf("%s (%s); the lab measured %s: %s", VerdictInconclusive, r.Host.Reason, j.Verdict, why)}
	}
	res.Judgement = mark(res.Judgement)
	for i := range res.Clients {
		res.Clients[i].Judgement = mark(res.Clients[i].Judgement)
	}
	for i := range res.Services {
		res.Services[i].Judgement = mark(res.Services[i].Judgement)
	}
}

// timerProbe asks to be woken every probePeriod and records how late it
// was, from from until until or the end of ctx.
func timerProbe(ctx context.Context, from, until time.Time) []time.Duration {
	late := make([]time.Duration, 0, max(0, until.Sub(from)/probePeriod)+1)
	t := time.NewTimer(max(0, time.Until(from)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return late
	case <-t.C:
	}
	t.Reset(probePeriod)
	want := time.Now().Add(probePeriod)
	for {
		select {
		case <-ctx.Done():
			return late
		case <-t.C:
		}
		now := time.Now()
		late = append(late, max(0, now.Sub(want)))
		if !now.Before(until) {
			return late
		}
		want = now.Add(probePeriod)
		t.Reset(probePeriod)
	}
}

// probeHost measures this process's scheduling from t0 for d (or until
// ctx ends) beside a role's work: the timer probe, and the scheduler's
// latencies, the CPU time and the run-queue wait between its ends. The
// function it returns stops it and returns the figures.
func probeHost(ctx context.Context, t0 time.Time, d time.Duration) func() HostStats {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan HostStats, 1)
	go func() {
		var h HostStats
		defer func() { done <- h }()
		wait := time.NewTimer(max(0, time.Until(t0)))
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-ctx.Done():
			return
		}
		sched0, cpu0 := schedLatencies(), processCPU()
		wait0, _ := runQueueWait()
		late := timerProbe(ctx, t0, t0.Add(d))
		sched1, cpu1 := schedLatencies(), processCPU()
		wait1, _ := runQueueWait()
		timerStats(&h, late)
		h.SchedLateP99, h.SchedSamples = histQuantile(sched0, sched1, 0.99)
		h.CPU, h.RunQueueWait = max(0, cpu1-cpu0), max(0, wait1-wait0)
	}()
	return func() HostStats {
		cancel()
		return <-done
	}
}

// timerStats summarises a probe's lateness samples into h.
func timerStats(h *HostStats, late []time.Duration) {
	h.TimerSamples = len(late)
	if len(late) == 0 {
		return
	}
	s := slices.Clone(late)
	slices.SortFunc(s, cmp.Compare)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))] }
	h.TimerLateP50, h.TimerLateP99, h.TimerLateMax = q(0.50), q(0.99), s[len(s)-1]
}

// serviceClock sums a service's drawn and measured service times. It is
// safe for concurrent use.
type serviceClock struct {
	works, nominal, measured atomic.Int64
}

func (c *serviceClock) add(nominal, measured time.Duration) {
	c.works.Add(1)
	c.nominal.Add(int64(nominal))
	c.measured.Add(int64(measured))
}

func (c *serviceClock) stats(h *HostStats) {
	h.Works = c.works.Load()
	h.ServiceNominal = time.Duration(c.nominal.Load())
	h.ServiceMeasured = time.Duration(c.measured.Load())
}

// schedLatencies reads the runtime's histogram of the time goroutines
// spent runnable before they ran (/sched/latencies:seconds), cumulative
// since the process started.
func schedLatencies() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histQuantile returns the q-quantile of the counts of after less those of
// before (same buckets), as the upper bound of its bucket, and the number
// of samples.
func histQuantile(before, after *metrics.Float64Histogram, q float64) (time.Duration, uint64) {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0, 0
	}
	var total uint64
	for i := range after.Counts {
		total += after.Counts[i] - before.Counts[i]
	}
	if total == 0 {
		return 0, 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var n uint64
	for i := range after.Counts {
		n += after.Counts[i] - before.Counts[i]
		if n >= want {
			hi := after.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = after.Buckets[i]
			}
			return time.Duration(hi * 1e9), total
		}
	}
	return 0, total
}
