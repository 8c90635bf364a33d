package retry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
)

func hedger(t *testing.T, maxAttempts int, delay time.Duration, opts ...Option) *Retrier {
	t.Helper()
	r, err := New(Policy{Hedge: &HedgePolicy{MaxAttempts: maxAttempts, Delay: delay}, Pushback: Pushback{MaxExtra: 200 * time.Millisecond}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// The A6 timeline: attempts due every Delay, the first success ends it.
func TestHedgeTimeline(t *testing.T) {
	var retries []int
	r := hedger(t, 3, 100*time.Millisecond, WithHooks(Hooks{OnRetry: func(n int, _ time.Duration) { retries = append(retries, n) }}))
	h, ok := r.HedgeStartAt(at(0), time.Time{})
	if !ok || h.Sent() != 1 {
		t.Fatal("first attempt not sent")
	}
	if next, ok := h.Next(); !ok || !next.Equal(at(100)) {
		t.Fatalf("next = %v %v, want 100ms", next.Sub(t0), ok)
	}
	if n, _ := r.HedgeAt(at(100), &h); n != 2 {
		t.Fatalf("hedge = %d, want 2", n)
	}
	if next, _ := h.Next(); !next.Equal(at(200)) {
		t.Fatalf("next = %v, want 200ms", next.Sub(t0))
	}
	d := r.HedgeEndAt(at(150), &h, 2, Success, Signal{})
	if !d.Done || d.Reason != nil || h.InFlight() != 1 || !h.Running(1) {
		t.Fatalf("decision %+v, in flight %d; want done, success, attempt 1 left to cancel", d, h.InFlight())
	}
	r.HedgeCancelAt(at(150), &h, 1)
	if h.InFlight() != 0 || len(retries) != 1 || retries[0] != 1 {
		t.Errorf("in flight %d, OnRetry %v; want 0 and [1]", h.InFlight(), retries)
	}
}

func TestHedgeDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cls      Class
		sig      Signal
		wantDone bool
		want     error
		wantNext int // ms, when not done
	}{
		{"non-fatal: next hedge at once", Transient, Signal{}, false, nil, 50},
		{"pushback: next hedge after it", Throttling, Signal{HasPushback: true, Pushback: 80 * time.Millisecond}, false, nil, 130},
		{"pushback clamped", Transient, Signal{HasPushback: true, Pushback: time.Hour}, false, nil, 250},
		{"fatal", NeverRetry, Signal{}, true, ErrNotRetryable, 0},
		{"service overloaded", ServiceOverloaded, Signal{}, true, ErrServerSaidStop, 0},
		{"caller cancelled", Canceled, Signal{}, true, ErrCanceled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hedger(t, 3, 100*time.Millisecond)
			h, _ := r.HedgeStartAt(at(0), time.Time{})
			d := r.HedgeEndAt(at(50), &h, 1, tc.cls, tc.sig)
			if d.Done != tc.wantDone || !errors.Is(d.Reason, tc.want) || (tc.want == nil) != (d.Reason == nil) {
				t.Fatalf("decision %+v, want done %v reason %v", d, tc.wantDone, tc.want)
			}
			if !tc.wantDone {
				if next, ok := h.Next(); !ok || !next.Equal(at(tc.wantNext)) {
					t.Errorf("next = %v (%v), want %dms", next.Sub(t0), ok, tc.wantNext)
				}
			}
		})
	}
}

// A pushback that says not to retry stops hedging; the call ends when the
// attempts in flight end.
func TestHedgeServerSaysStop(t *testing.T) {
	r := hedger(t, 3, 10*time.Millisecond)
	h, _ := r.HedgeStartAt(at(0), time.Time{})
	r.HedgeAt(at(10), &h)
	if d := r.HedgeEndAt(at(15), &h, 1, Transient, Signal{BadPushback: true}); d.Done {
		t.Fatal("done with attempt 2 in flight")
	}
	if _, ok := h.Next(); ok {
		t.Fatal("hedging goes on after the server said stop")
	}
	if n, _ := r.HedgeAt(at(20), &h); n != 0 {
		t.Fatalf("a hedge was sent after the server said stop")
	}
	d := r.HedgeEndAt(at(30), &h, 2, Transient, Signal{})
	if !d.Done || !errors.Is(d.Reason, ErrServerSaidStop) {
		t.Fatalf("decision %+v, want done, server said stop", d)
	}
}

func TestHedgeAllFail(t *testing.T) {
	r := hedger(t, 2, 0) // both at once
	h, _ := r.HedgeStartAt(at(0), time.Time{})
	if n, _ := r.HedgeAt(at(0), &h); n != 2 {
		t.Fatal("delay 0: the hedge is not sent at once")
	}
	if _, ok := h.Next(); ok {
		t.Fatal("more than max_attempts due")
	}
	r.HedgeEndAt(at(5), &h, 2, Transient, Signal{})
	d := r.HedgeEndAt(at(6), &h, 1, Timeout, Signal{})
	if !d.Done || !errors.Is(d.Reason, ErrAttemptsExhausted) {
		t.Fatalf("decision %+v, want attempts exhausted", d)
	}
	err := r.HedgeGiveUp(&h, d.Reason, errors.New("last"))
	var g *GiveUpError
	if !errors.As(err, &g) || g.Attempts != 2 {
		t.Errorf("give-up %v, want 2 attempts", err)
	}
}

// Hedges are charged to the retry budget: an empty budget stops them; a
// hedge cancelled because another attempt won keeps its charge; the first
// attempt cancelled costs nothing.
func TestHedgeBudget(t *testing.T) {
	bk := budget.NewTokenBucket(25, 10, 10, 10, 1, true)
	r := hedger(t, 5, 10*time.Millisecond, WithBudget(bk))
	h, _ := r.HedgeStartAt(at(0), time.Time{})
	r.HedgeAt(at(10), &h) // 25 → 15
	r.HedgeAt(at(20), &h) // 15 → 5
	if n, d := r.HedgeAt(at(30), &h); n != 0 || d.Done {
		t.Fatalf("hedge %d (%+v) granted with 5 tokens, want refused, not done", n, d)
	}
	if got := bk.Level(); got != 5 {
		t.Fatalf("level %v, want 5", got)
	}
	d := r.HedgeEndAt(at(35), &h, 2, Success, Signal{}) // refunded: 15
	if !d.Done || d.Reason != nil {
		t.Fatal("success did not end the call")
	}
	r.HedgeCancelAt(at(35), &h, 1) // first attempt: nothing
	r.HedgeCancelAt(at(35), &h, 3) // a hedge: its charge stands
	if got := bk.Level(); got != 15 {
		t.Errorf("level %v, want 15 (the winner refunded, the cancelled hedge charged)", got)
	}
	// An empty budget ends a call whose attempts all failed with its reason.
	h, _ = r.HedgeStartAt(at(100), time.Time{})
	r.HedgeAt(at(110), &h) // 15 → 5
	r.HedgeAt(at(120), &h) // refused
	r.HedgeEndAt(at(130), &h, 1, Transient, Signal{})
	if d := r.HedgeEndAt(at(131), &h, 2, Transient, Signal{}); !d.Done || !errors.Is(d.Reason, ErrBudgetExhausted) {
		t.Errorf("decision %+v, want done, budget exhausted", d)
	}
}

func TestHedgeDeadlineAndKillSwitch(t *testing.T) {
	r := hedger(t, 3, 10*time.Millisecond)
	h, _ := r.HedgeStartAt(at(0), at(10))
	if n, _ := r.HedgeAt(at(10), &h); n != 0 {
		t.Fatal("a hedge was sent at the deadline")
	}
	if d := r.HedgeEndAt(at(11), &h, 1, Transient, Signal{}); !errors.Is(d.Reason, ErrDeadline) {
		t.Errorf("reason %v, want ErrDeadline", d.Reason)
	}
	r.Dials().SetRetriesDisabled(true)
	h, _ = r.HedgeStartAt(at(0), time.Time{})
	if n, _ := r.HedgeAt(at(10), &h); n != 0 {
		t.Fatal("a hedge was sent with retries disabled")
	}
}

func TestHedgeBreaker(t *testing.T) {
	b := breaker.MustNew(breaker.Spec{Failures: 2, Delay: time.Hour})
	r := hedger(t, 3, 10*time.Millisecond, WithBreaker(b))
	h, _ := r.HedgeStartAt(at(0), time.Time{})
	r.HedgeAt(at(10), &h)
	r.HedgeEndAt(at(11), &h, 1, Transient, Signal{})
	r.HedgeEndAt(at(12), &h, 2, Transient, Signal{}) // opens
	if n, d := r.HedgeAt(at(12), &h); n != 0 || !d.Done || !errors.Is(d.Reason, ErrBreakerOpen) {
		t.Fatalf("hedge %d, %+v; want refused by the open breaker, done", n, d)
	}
	if _, ok := r.HedgeStartAt(at(20), time.Time{}); ok {
		t.Fatal("an open breaker let a hedged call start")
	}
}

func TestHedgePolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		h    HedgePolicy
		want string
	}{
		{HedgePolicy{}, ""},
		{HedgePolicy{MaxAttempts: 5, Delay: time.Second}, ""},
		{HedgePolicy{MaxAttempts: 6}, "hedge.max_attempts"},
		{HedgePolicy{MaxAttempts: -1}, "hedge.max_attempts"},
		{HedgePolicy{Delay: -time.Second}, "hedge.delay"},
	} {
		_, err := New(Policy{Hedge: &tc.h})
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.h, err, tc.want)
		}
	}
	h := &HedgePolicy{}
	r := MustNew(Policy{Hedge: h})
	if r.Policy().Hedge.MaxAttempts != DefaultHedgeAttempts || h.MaxAttempts != 0 {
		t.Errorf("default max_attempts %d (caller's %d), want %d and the caller's untouched", r.Policy().Hedge.MaxAttempts, h.MaxAttempts, DefaultHedgeAttempts)
	}
}
