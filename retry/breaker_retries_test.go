package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
)

// A breaker that stops retries (Brooker 2022) lets every first try
// through, open or closed, and refuses the retries while open: the call
// gives up at the failure, with no wait (the backoff here is an hour) and
// no budget charge.
func TestDoBreakerStopsRetries(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Stops: breaker.StopsRetries, Failures: 1, Delay: time.Hour, Successes: 1})
	bk := budget.NewTokenBucket(100, 10, 10, 10, 1, true)
	r := MustNew(Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Hour}},
		WithBreaker(b), WithBudget(bk))
	for i, tc := range []struct {
		fail      bool
		wantCalls int
		want      error // nil: success
	}{
		{true, 1, ErrBreakerOpen}, // the failure opens it: its retry is refused
		{true, 1, ErrBreakerOpen}, // open: the first try is sent, its retry is not
		{false, 1, nil},           // open: a first try that succeeds is served
		{true, 1, ErrBreakerOpen}, // still open (the period is an hour)
	} {
		calls := 0
		start := time.Now()
		err := Do(context.Background(), r, func(context.Context) error {
			calls++
			if tc.fail {
				return statusErr(503)
			}
			return nil
		})
		if calls != tc.wantCalls || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Fatalf("call %d: %d attempts, err %v; want %d, %v", i, calls, err, tc.wantCalls, tc.want)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("call %d waited for a refused retry", i)
		}
		if err == nil {
			continue
		}
		var g *GiveUpError
		if !errors.As(err, &g) || g.Attempts != 1 || !errors.Is(err, statusErr(503)) || g.RetryClass() != RetriesExhausted {
			t.Fatalf("call %d: %#v, want a give-up after 1 attempt keeping the 503, retries exhausted above", i, err)
		}
		if b.State() != breaker.Open {
			t.Fatalf("call %d: breaker %v, want open", i, b.State())
		}
	}
	if got := bk.Level(); got != 100 {
		t.Errorf("budget level %v, want 100: no refused retry is charged", got)
	}
	if st := b.Stats(); st.Refused != 3 || st.HalfOpens != 0 {
		t.Errorf("breaker stats %+v, want 3 retries refused, never half-open", st)
	}
}

// The first tries close it once its period is over, and retries come back.
func TestDoBreakerStopsRetriesCloses(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Stops: breaker.StopsRetries, Failures: 2, Delay: 20 * time.Millisecond,
		Jitter: noJitter(), Successes: 2})
	r := MustNew(fast, WithBreaker(b))
	calls := 0
	fail := func(context.Context) error { calls++; return statusErr(503) }
	ok := func(context.Context) error { return nil }
	// Closed: a retry is made; its failure, the second, opens the breaker
	// and the third attempt is refused.
	if err := Do(context.Background(), r, fail); calls != 2 || !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("%d attempts, err %v; want 2, then the retry refused", calls, err)
	}
	time.Sleep(30 * time.Millisecond)
	for range 2 {
		if err := Do(context.Background(), r, ok); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != breaker.Closed {
		t.Fatalf("state %v after 2 successful first tries past the period, want closed", b.State())
	}
	calls = 0
	if err := Do(context.Background(), r, fail); calls != 2 || !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("closed again: %d attempts, err %v; want the retry made (2), then refused", calls, err)
	}
}

// A retry granted while the breaker was closed is asked again when it is
// sent: if the breaker opened during the wait, it is not sent and its
// charge is given back.
func TestBreakerStopsRetriesAskedAtSend(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Stops: breaker.StopsRetries, Failures: 2, Delay: time.Hour})
	bk := budget.NewTokenBucket(100, 10, 10, 10, 1, true)
	r := MustNew(Policy{MaxAttempts: 3}, WithBreaker(b), WithBudget(bk))
	c := r.StartAt(t0, time.Time{})
	if !r.AllowAt(t0, &c) {
		t.Fatal("first try refused")
	}
	if d := r.EndAt(t0, &c, Transient, Signal{}, 0.5); !d.Retry {
		t.Fatalf("decision %+v, want a retry (1 failure of 2)", d)
	}
	// Another call's failure opens the breaker during the wait.
	p, _ := b.AllowFirstAt(t0)
	b.EndAt(t0, p, breaker.Failure)
	r.NextAt(t0, &c)
	if r.AllowAt(t0, &c) {
		t.Fatal("a retry was sent through an open breaker")
	}
	if c.Attempt() != 1 || bk.Level() != 100 {
		t.Errorf("attempt %d, budget %v; want the retry taken back: 1, 100", c.Attempt(), bk.Level())
	}
}

// Hedging: the first attempt always goes, the hedges are retries.
func TestHedgeBreakerStopsRetries(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Stops: breaker.StopsRetries, Failures: 1, Delay: time.Hour})
	r := hedger(t, 3, 10*time.Millisecond, WithBreaker(b))
	p, _ := b.AllowFirstAt(at(0))
	b.EndAt(at(0), p, breaker.Failure) // open
	h, ok := r.HedgeStartAt(at(0), time.Time{})
	if !ok || h.Sent() != 1 {
		t.Fatal("an open breaker that stops retries refused a first attempt")
	}
	if n, d := r.HedgeAt(at(10), &h); n != 0 || d.Done || !errors.Is(h.stopped, ErrBreakerOpen) {
		t.Fatalf("hedge %d, %+v, stopped %v; want refused, the first still in flight", n, d, h.stopped)
	}
	if d := r.HedgeEndAt(at(11), &h, 1, Success, Signal{}); !d.Done || d.Reason != nil {
		t.Fatalf("%+v, want the first attempt's success", d)
	}
}
