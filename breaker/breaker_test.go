package breaker

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// step is one event of a script: a call that starts at `at` (ms after t0),
// whose result, if allowed, is recorded at the same instant.
type step struct {
	at      int     // ms after t0
	outcome Outcome // recorded if allowed
	allowed bool    // want
	state   State   // want, after the step
}

func run(t *testing.T, b *Breaker, steps []step) {
	t.Helper()
	runFirst(t, b, steps, nil)
}

// runFirst is run where first[i] says that step i is a request's first try
// (AllowFirstAt), not a retry (AllowAt); nil: every step is AllowAt's.
func runFirst(t *testing.T, b *Breaker, steps []step, first []bool) {
	t.Helper()
	for i, s := range steps {
		now := t0.Add(ms(s.at))
		allow := b.AllowAt
		if first != nil && first[i] {
			allow = b.AllowFirstAt
		}
		p, ok := allow(now)
		if ok != s.allowed {
			t.Fatalf("step %d (t=%dms): allowed = %v, want %v (state %v)", i, s.at, ok, s.allowed, b.State())
		}
		if ok {
			b.EndAt(now, p, s.outcome)
		}
		if got := b.State(); got != s.state {
			t.Fatalf("step %d (t=%dms): state = %v, want %v", i, s.at, got, s.state)
		}
	}
}

func noJitter() *float64 { j := 0.0; return &j }

func TestConsecutive(t *testing.T) {
	b := MustNew(Spec{Failures: 3, Delay: time.Second, Jitter: noJitter(), Probes: 1, Successes: 2})
	run(t, b, []step{
		{0, Failure, true, Closed},
		{1, Failure, true, Closed},
		{2, Success, true, Closed}, // resets the count
		{3, Failure, true, Closed},
		{4, Ignore, true, Closed}, // changes nothing
		{5, Failure, true, Closed},
		{6, Failure, true, Open}, // third in a row
		{7, Success, false, Open},
		{1005, Success, false, Open},    // 1 s after 6 ms: 1006
		{1006, Success, true, HalfOpen}, // a probe, 1 of 2
		{1007, Failure, true, Open},     // a failed probe reopens
		{2006, Success, false, Open},
		{2007, Success, true, HalfOpen},
		{2008, Ignore, true, HalfOpen}, // frees its place, counts nothing
		{2009, Success, true, Closed},  // the second success
		{2010, Success, true, Closed},
		{2011, Failure, true, Closed}, // the count starts from 0
		{2012, Failure, true, Closed},
	})
	st := b.Stats()
	if st.Opens != 2 || st.HalfOpens != 2 || st.Closes != 1 || st.Refused != 3 {
		t.Errorf("stats = %+v, want 2 opens, 2 half-opens, 1 close, 3 refused", st)
	}
}

func TestHalfOpenProbesAtATime(t *testing.T) {
	b := MustNew(Spec{Failures: 1, Delay: time.Second, Jitter: noJitter(), Probes: 2, Successes: 3})
	p, _ := b.AllowAt(t0)
	b.EndAt(t0, p, Failure)
	later := t0.Add(time.Second)
	p1, ok1 := b.AllowAt(later)
	p2, ok2 := b.AllowAt(later)
	_, ok3 := b.AllowAt(later)
	if !ok1 || !ok2 || ok3 || !p1.Probe() || !p2.Probe() {
		t.Fatalf("half-open with 2 probes: allowed %v %v %v, want true true false", ok1, ok2, ok3)
	}
	b.EndAt(later, p1, Success) // 1 of 3; a place is free
	p3, ok := b.AllowAt(later)
	if !ok {
		t.Fatal("a probe that ended did not free its place")
	}
	b.EndAt(later, p2, Success)
	if b.State() != HalfOpen {
		t.Fatalf("state = %v after 2 of 3 successes, want half-open", b.State())
	}
	b.EndAt(later, p3, Success)
	if b.State() != Closed {
		t.Fatalf("state = %v after 3 successes, want closed", b.State())
	}
}

// A result from a call allowed before the last change of state is ignored.
func TestStaleResultsIgnored(t *testing.T) {
	b := MustNew(Spec{Failures: 2, Delay: time.Second, Jitter: noJitter()})
	old, _ := b.AllowAt(t0) // a slow call, allowed while closed
	for range 2 {
		p, _ := b.AllowAt(t0)
		b.EndAt(t0, p, Failure)
	}
	later := t0.Add(time.Second)
	probe, ok := b.AllowAt(later)
	if !ok || b.State() != HalfOpen {
		t.Fatal("no probe after the open period")
	}
	b.EndAt(later, old, Failure) // the slow call fails: it must not reopen
	if b.State() != HalfOpen {
		t.Fatalf("a stale failure moved the breaker to %v", b.State())
	}
	b.EndAt(later, probe, Success)
	if b.State() != Closed {
		t.Fatalf("state = %v, want closed", b.State())
	}
	b.EndAt(later, Permit{}, Failure) // the zero Permit counts for nothing
	b.EndAt(later, Permit{}, Failure)
	if b.State() != Closed {
		t.Fatal("the zero Permit counted")
	}
}

func TestRate(t *testing.T) {
	// Window 1 s of 10 buckets of 100 ms; opens at ≥ 50 % of ≥ 4 calls.
	b := MustNew(Spec{Mode: Rate, FailureRate: 0.5, MinCalls: 4, Window: time.Second, Buckets: 10,
		Delay: time.Second, Jitter: noJitter()})
	run(t, b, []step{
		{0, Failure, true, Closed},  // 1/1, below min calls
		{10, Failure, true, Closed}, // 2/2
		{20, Success, true, Closed}, // 2/3
		{30, Success, true, Closed}, // 2/4: 50 % but a success never opens
		{40, Success, true, Closed}, // 2/5
		{50, Failure, true, Open},   // 3/6 = 50 %
	})
	// Calls older than the window stop counting.
	b = MustNew(Spec{Mode: Rate, FailureRate: 0.5, MinCalls: 4, Window: time.Second, Buckets: 10,
		Delay: time.Second, Jitter: noJitter()})
	run(t, b, []step{
		{0, Failure, true, Closed},
		{0, Failure, true, Closed},
		{0, Failure, true, Closed}, // 3/3 in bucket 0
		{999, Success, true, Closed},
		{1000, Failure, true, Closed}, // bucket 0 has left the window: 1/2
		{1001, Failure, true, Closed}, // 2/3
		{1002, Failure, true, Open},   // 3/4
	})
}

func TestRateMinCallsAndIgnore(t *testing.T) {
	b := MustNew(Spec{Mode: Rate, FailureRate: 0.1, MinCalls: 10, Window: time.Second, Jitter: noJitter()})
	for i := range 9 {
		p, _ := b.AllowAt(t0)
		b.EndAt(t0, p, Failure)
		if b.State() != Closed {
			t.Fatalf("opened after %d calls, below min_calls 10", i+1)
		}
	}
	for range 5 {
		p, _ := b.AllowAt(t0)
		b.EndAt(t0, p, Ignore)
	}
	if b.State() != Closed {
		t.Fatal("ignored calls counted")
	}
	p, _ := b.AllowAt(t0)
	b.EndAt(t0, p, Failure)
	if b.State() != Open {
		t.Fatal("10 failures of 10 did not open")
	}
}

// A partial failure: 10 % of calls fail, spread evenly. A breaker that
// opens at 10 % refuses the 90 % that would succeed; one at 50 % never opens.
func TestRatePartialFailure(t *testing.T) {
	for _, tc := range []struct {
		rate     float64
		wantOpen bool
	}{{0.1, true}, {0.5, false}} {
		b := MustNew(Spec{Mode: Rate, FailureRate: tc.rate, MinCalls: 20, Window: 10 * time.Second, Delay: time.Second})
		opened := false
		for i := range 1000 {
			now := t0.Add(ms(10 * i))
			p, ok := b.AllowAt(now)
			if !ok {
				opened = true
				continue
			}
			o := Success
			if i%10 == 9 {
				o = Failure
			}
			b.EndAt(now, p, o)
		}
		if opened != tc.wantOpen {
			t.Errorf("failure_rate %v under 10 %% failures: opened = %v, want %v", tc.rate, opened, tc.wantOpen)
		}
	}
}

// The open period is spread over Delay × [1 − Jitter, 1 + Jitter) by the
// injected sample.
func TestJitter(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 800 * time.Millisecond}, {0.5, time.Second}, {0.999, 1199600 * time.Microsecond}} {
		b := MustNew(Spec{Failures: 1, Delay: time.Second}, WithRand(func() float64 { return tc.u }))
		p, _ := b.AllowAt(t0)
		b.EndAt(t0, p, Failure)
		if _, ok := b.AllowAt(t0.Add(tc.want - time.Microsecond)); ok {
			t.Errorf("u=%v: allowed before %v", tc.u, tc.want)
		}
		if _, ok := b.AllowAt(t0.Add(tc.want)); !ok {
			t.Errorf("u=%v: refused at %v", tc.u, tc.want)
		}
	}
}

// A fleet of breakers that open together probe at different times.
func TestJitterSpreadsAFleet(t *testing.T) {
	seen := map[int64]bool{}
	u := 0.0
	for range 50 {
		u += 0.0199
		v := u
		b := MustNew(Spec{Failures: 1, Delay: time.Second}, WithRand(func() float64 { return v }))
		p, _ := b.AllowAt(t0)
		b.EndAt(t0, p, Failure)
		for d := 800; d < 1200; d++ {
			if _, ok := b.AllowAt(t0.Add(ms(d))); ok {
				seen[int64(d/20)] = true
				break
			}
		}
	}
	if len(seen) < 15 {
		t.Errorf("50 breakers probed in only %d distinct 20 ms slots, want them spread", len(seen))
	}
}

func TestZeroTime(t *testing.T) {
	b := MustNew(Spec{Failures: 1, Delay: time.Second})
	if b.NeedsClock() {
		t.Fatal("a closed consecutive breaker says it needs the clock")
	}
	p, ok := b.AllowAt(time.Time{})
	if !ok {
		t.Fatal("closed: refused without a time")
	}
	b.EndAt(time.Time{}, p, Success)
	p, _ = b.AllowAt(t0)
	b.EndAt(t0, p, Failure)
	if !b.NeedsClock() {
		t.Fatal("an open breaker says it does not need the clock")
	}
	if _, ok := b.AllowAt(time.Time{}); ok {
		t.Fatal("open: allowed without a time")
	}
	if !MustNew(Spec{Mode: Rate}).NeedsClock() {
		t.Fatal("a rate breaker says it does not need the clock")
	}
}

func TestStateChangeHook(t *testing.T) {
	var got []string
	b := MustNew(Spec{Failures: 1, Delay: time.Second, Jitter: noJitter()}, WithOnStateChange(func(from, to State, now time.Time) {
		got = append(got, from.String()+"→"+to.String()+"@"+now.Sub(t0).String())
	}))
	p, _ := b.AllowAt(t0)
	b.EndAt(t0, p, Failure)
	later := t0.Add(time.Second)
	p, _ = b.AllowAt(later)
	b.EndAt(later, p, Success)
	want := "closed→open@0s open→half-open@1s half-open→closed@1s"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("transitions = %q, want %q", s, want)
	}
}

func TestSpecValidate(t *testing.T) {
	bad := func(j float64) *float64 { return &j }
	for _, tc := range []struct {
		s    Spec
		want string // a field name in the error; "" for valid
	}{
		{Spec{}, ""},
		{Spec{Mode: "sometimes"}, "mode"},
		{Spec{Stops: StopsRetries}, ""},
		{Spec{Stops: "first-tries"}, "stops"},
		{Spec{Failures: -1}, "failures"},
		{Spec{Failures: 2_000_000}, "failures"},
		{Spec{FailureRate: 1.5}, "failure_rate"},
		{Spec{FailureRate: -0.1}, "failure_rate"},
		{Spec{MinCalls: -3}, "min_calls"},
		{Spec{Window: -time.Second}, "window"},
		{Spec{Window: 5, Buckets: 10}, "window"},
		{Spec{Buckets: 5000}, "buckets"},
		{Spec{Delay: -time.Second}, "delay"},
		{Spec{Jitter: bad(1)}, "jitter"},
		{Spec{Jitter: bad(-0.5)}, "jitter"},
		{Spec{Probes: -1}, "probes"},
		{Spec{Successes: -1}, "successes"},
	} {
		err := tc.s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.s, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidSpec)):
			t.Errorf("%+v: err = %v, want an ErrInvalidSpec naming %q", tc.s, err, tc.want)
		}
		if _, nerr := New(tc.s); (nerr == nil) != (tc.want == "") {
			t.Errorf("New(%+v) = %v, want the same verdict as Validate", tc.s, nerr)
		}
	}
}

func TestDefaults(t *testing.T) {
	s := Spec{Probes: 3}.WithDefaults()
	if s.Mode != Consecutive || s.Stops != StopsCalls || s.Failures != 5 || s.Delay != 5*time.Second || *s.Jitter != 0.2 || s.Successes != 3 ||
		s.FailureRate != 0.5 || s.MinCalls != 20 || s.Window != 10*time.Second || s.Buckets != 10 {
		t.Errorf("defaults = %+v", s)
	}
}

func TestPresets(t *testing.T) {
	if got, want := strings.Join(Presets(), ","), "failsafe,gobreaker,rate,stormguard"; got != want {
		t.Errorf("Presets() = %s, want %s", got, want)
	}
	for _, name := range Presets() {
		s, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
		// A preset survives a trip through its configuration format.
		data, _ := json.Marshal(s)
		var back Spec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if back.WithDefaults().Delay != s.WithDefaults().Delay || *back.WithDefaults().Jitter != *s.WithDefaults().Jitter {
			t.Errorf("preset %s: %s does not decode to itself", name, data)
		}
	}
	if _, err := Preset("hystrix"); err == nil || !strings.Contains(err.Error(), "stormguard") {
		t.Errorf("unknown preset: %v, want an error listing the presets", err)
	}
	// gobreaker opens on the 6th failure in a row, failsafe on the first.
	for name, want := range map[string]int{"gobreaker": 6, "failsafe": 1, "stormguard": 5} {
		s, _ := Preset(name)
		b := MustNew(s)
		n := 0
		for b.State() == Closed {
			p, _ := b.AllowAt(t0)
			b.EndAt(t0, p, Failure)
			n++
		}
		if n != want {
			t.Errorf("%s opened after %d failures, want %d", name, n, want)
		}
	}
}

// Many goroutines share one breaker (run with -race): every granted call
// ends, the probes never exceed their number, and the breaker ends closed
// once the dependency is healthy.
func TestConcurrent(t *testing.T) {
	for _, mode := range []Mode{Consecutive, Rate} {
		b := MustNew(Spec{Mode: mode, Failures: 3, MinCalls: 5, Window: time.Second, Delay: time.Millisecond, Probes: 2, Successes: 2})
		var mu sync.Mutex
		probes, maxProbes := 0, 0
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 {
					now := t0.Add(time.Duration(i) * time.Millisecond)
					p, ok := b.AllowAt(now)
					if !ok {
						continue
					}
					if p.Probe() {
						mu.Lock()
						probes++
						maxProbes = max(maxProbes, probes)
						mu.Unlock()
					}
					o := Success
					if i < 1000 && (i+g)%4 != 0 {
						o = Failure
					}
					if p.Probe() {
						mu.Lock()
						probes--
						mu.Unlock()
					}
					b.EndAt(now, p, o)
				}
			}()
		}
		wg.Wait()
		if maxProbes > 2 {
			t.Errorf("%s: %d probes at once, want at most 2", mode, maxProbes)
		}
		// Healthy from now on: a probe or two closes it.
		for i := range 10 {
			now := t0.Add(time.Hour + time.Duration(i)*time.Millisecond)
			if p, ok := b.AllowAt(now); ok {
				b.EndAt(now, p, Success)
			}
		}
		if b.State() != Closed {
			t.Errorf("%s: state %v once healthy, want closed", mode, b.State())
		}
		if b.Stats().Opens == 0 {
			t.Errorf("%s: never opened under 75 %% failures", mode)
		}
	}
}
