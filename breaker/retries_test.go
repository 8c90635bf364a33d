package breaker

import (
	"sync"
	"testing"
	"time"
)

// rstep is one event of a script for a breaker that stops retries: a first
// try (AllowFirstAt) or a retry (AllowAt) at `at`, whose result, if
// allowed, is recorded at the same instant.
type rstep struct {
	at      int  // ms after t0
	first   bool // a first try; else a retry
	outcome Outcome
	allowed bool  // want
	state   State // want, after the step
}

func runRetries(t *testing.T, b *Breaker, rsteps []rstep) {
	t.Helper()
	steps, first := make([]step, len(rsteps)), make([]bool, len(rsteps))
	for i, s := range rsteps {
		steps[i], first[i] = step{s.at, s.outcome, s.allowed, s.state}, s.first
	}
	runFirst(t, b, steps, first)
}

const firstTry, aRetry = true, false

func TestStopsRetriesConsecutive(t *testing.T) {
	b := MustNew(Spec{Stops: StopsRetries, Failures: 3, Delay: time.Second, Jitter: noJitter(), Successes: 2})
	runRetries(t, b, []rstep{
		{0, firstTry, Failure, true, Closed},
		{1, aRetry, Failure, true, Closed},      // retries count as calls do
		{2, firstTry, Failure, true, Open},      // third in a row
		{3, aRetry, Success, false, Open},       // a retry is refused
		{4, firstTry, Success, true, Open},      // a first try goes through: 1 in a row
		{5, firstTry, Success, true, Open},      // 2 in a row, but the period runs to 1002
		{1002, aRetry, Success, false, Open},    // never half-open
		{1002, firstTry, Failure, true, Open},   // resets the successes in a row
		{1003, firstTry, Success, true, Open},   // 1
		{1004, firstTry, Ignore, true, Open},    // counts nothing
		{1005, firstTry, Success, true, Closed}, // 2 in a row after the period
		{1006, aRetry, Failure, true, Closed},
		{1007, firstTry, Failure, true, Closed}, // the count started from 0: 2
	})
	st := b.Stats()
	if st.Opens != 1 || st.HalfOpens != 0 || st.Closes != 1 || st.Refused != 2 {
		t.Errorf("stats = %+v, want 1 open, 0 half-opens, 1 close, 2 refused", st)
	}
}

func TestStopsRetriesRate(t *testing.T) {
	// Window 1 s of 10 buckets of 100 ms; opens at ≥ 50 % of ≥ 4 calls.
	b := MustNew(Spec{Mode: Rate, Stops: StopsRetries, FailureRate: 0.5, MinCalls: 4, Window: time.Second, Buckets: 10,
		Delay: time.Second, Jitter: noJitter()})
	runRetries(t, b, []rstep{
		{0, firstTry, Success, true, Closed},
		{1, firstTry, Failure, true, Closed},
		{2, firstTry, Success, true, Closed},
		{3, aRetry, Failure, true, Open}, // 2 of 4; open until 1003
		{10, aRetry, Success, false, Open},
		// The window was cleared: the first tries since it opened count.
		{100, firstTry, Failure, true, Open},
		{200, firstTry, Failure, true, Open},
		{300, firstTry, Success, true, Open},
		{400, firstTry, Success, true, Open},
		{500, firstTry, Success, true, Open},
		{600, firstTry, Success, true, Open}, // 2 of 6 failed, but the period runs on
		{1002, aRetry, Success, false, Open},
		{1003, firstTry, Success, true, Closed}, // 2 of 7 < 50 %, the period over
		// Closing cleared the window: 4 failures in a row open it again.
		{1100, firstTry, Failure, true, Closed},
		{1101, aRetry, Failure, true, Closed},
		{1102, firstTry, Failure, true, Closed},
		{1103, aRetry, Failure, true, Open}, // open until 2103
		{1200, firstTry, Failure, true, Open},
		{1300, firstTry, Failure, true, Open},
		{2103, firstTry, Success, true, Open}, // 3 calls, below min_calls
		{2104, firstTry, Success, true, Open}, // 2 of 4 failed: not below 50 %
		{2105, firstTry, Success, true, Closed},
	})
	if st := b.Stats(); st.Opens != 2 || st.Closes != 2 || st.HalfOpens != 0 || st.Refused != 2 {
		t.Errorf("stats = %+v, want 2 opens, 2 closes, no half-open, 2 refused", st)
	}
}

// A breaker that stops calls refuses first tries too: AllowFirstAt is
// AllowAt.
func TestAllowFirstAtStopsCalls(t *testing.T) {
	b := MustNew(Spec{Failures: 1, Delay: time.Second, Jitter: noJitter(), Successes: 2})
	runRetries(t, b, []rstep{
		{0, firstTry, Failure, true, Open},
		{1, firstTry, Success, false, Open},
		{1000, firstTry, Success, true, HalfOpen},
		{1000, firstTry, Success, true, Closed},
	})
}

// A first try allowed before the breaker opened says nothing about the
// dependency as it is: its result is ignored, as for calls.
func TestStopsRetriesStaleIgnored(t *testing.T) {
	b := MustNew(Spec{Stops: StopsRetries, Failures: 1, Delay: time.Second, Jitter: noJitter(), Successes: 1})
	old, _ := b.AllowFirstAt(t0)
	p, _ := b.AllowFirstAt(t0)
	b.EndAt(t0, p, Failure)
	b.EndAt(t0.Add(2*time.Second), old, Success)
	if b.State() != Open {
		t.Fatalf("a stale success closed the breaker: %v", b.State())
	}
	p, _ = b.AllowFirstAt(t0.Add(2 * time.Second))
	b.EndAt(t0.Add(2*time.Second), p, Success)
	if b.State() != Closed {
		t.Fatalf("state = %v, want closed", b.State())
	}
}

// Open and without the time, a breaker that stops retries cannot tell
// that its period ended: it stays open, and says it needs the clock.
func TestStopsRetriesZeroTime(t *testing.T) {
	b := MustNew(Spec{Stops: StopsRetries, Failures: 1, Delay: time.Second, Successes: 1})
	if b.NeedsClock() {
		t.Fatal("closed consecutive: needs the clock")
	}
	p, _ := b.AllowFirstAt(time.Time{})
	b.EndAt(t0, p, Failure)
	if !b.NeedsClock() {
		t.Fatal("open: does not need the clock")
	}
	p, ok := b.AllowFirstAt(time.Time{})
	if !ok {
		t.Fatal("open: a first try refused")
	}
	b.EndAt(time.Time{}, p, Success)
	if b.State() != Open {
		t.Fatalf("closed without a time: %v", b.State())
	}
}

// Goroutines share one breaker that stops retries (run with -race): no
// retry is granted while it is open, it never goes half-open, and it
// closes once the first tries succeed.
func TestStopsRetriesConcurrent(t *testing.T) {
	for _, mode := range []Mode{Consecutive, Rate} {
		var mu sync.Mutex
		var bad []string
		b := MustNew(Spec{Mode: mode, Stops: StopsRetries, Failures: 3, MinCalls: 5, Window: time.Second,
			Delay: time.Millisecond, Successes: 2}, WithOnStateChange(func(from, to State, _ time.Time) {
			if to == HalfOpen {
				mu.Lock()
				bad = append(bad, from.String()+"→"+to.String())
				mu.Unlock()
			}
		}))
		var wg sync.WaitGroup
		var firstRefused, retries int
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 {
					now := t0.Add(time.Duration(i) * time.Millisecond)
					o := Success
					if i < 1000 && (i+g)%4 != 0 {
						o = Failure
					}
					p, ok := b.AllowFirstAt(now)
					if !ok {
						mu.Lock()
						firstRefused++
						mu.Unlock()
						continue
					}
					b.EndAt(now, p, o)
					if o == Failure {
						if p, ok := b.AllowAt(now); ok {
							mu.Lock()
							retries++
							mu.Unlock()
							b.EndAt(now, p, o)
						}
					}
				}
			}()
		}
		wg.Wait()
		if firstRefused != 0 || len(bad) != 0 {
			t.Errorf("%s: %d first tries refused, transitions %v; want none", mode, firstRefused, bad)
		}
		st := b.Stats()
		if st.Opens == 0 || st.Refused == 0 {
			t.Errorf("%s: stats %+v under 75 %% failures, want opens and refused retries", mode, st)
		}
		for i := range 10 {
			now := t0.Add(time.Hour + time.Duration(i)*time.Millisecond)
			p, _ := b.AllowFirstAt(now)
			b.EndAt(now, p, Success)
		}
		if b.State() != Closed {
			t.Errorf("%s: state %v once healthy, want closed", mode, b.State())
		}
	}
}
