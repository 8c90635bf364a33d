package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
)

// recorder returns hooks that append what they see, prefixed with name, to
// *log.
func recorder(name string, log *[]string) Hooks {
	return Hooks{
		OnAttempt: func(n int, c Class, _ time.Duration) {
			*log = append(*log, fmt.Sprintf("%s attempt %d %v", name, n, c))
		},
		OnRetry:  func(n int, _ time.Duration) { *log = append(*log, fmt.Sprintf("%s retry %d", name, n)) },
		OnGiveUp: func(_ error, n int, _ error) { *log = append(*log, fmt.Sprintf("%s giveup %d", name, n)) },
	}
}

func TestJoinHooks(t *testing.T) {
	tests := []struct {
		name string
		sets []string // recorders to join, in order; "" is the zero Hooks
		want []string
	}{
		{"none", nil, nil},
		{"only empty sets", []string{"", ""}, nil},
		{"one", []string{"a"}, []string{"a attempt 1 transient", "a retry 1", "a giveup 2"}},
		{"two in order, empty skipped", []string{"a", "", "b"}, []string{
			"a attempt 1 transient", "b attempt 1 transient",
			"a retry 1", "b retry 1",
			"a giveup 2", "b giveup 2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var hs []Hooks
			for _, name := range tt.sets {
				if name == "" {
					hs = append(hs, Hooks{})
					continue
				}
				hs = append(hs, recorder(name, &got))
			}
			j := JoinHooks(hs...)
			if tt.want == nil {
				if j.OnAttempt != nil || j.OnRetry != nil || j.OnGiveUp != nil {
					t.Fatal("joined hooks are set; want the zero Hooks, so that a retrier keeps its fast path")
				}
				return
			}
			j.OnAttempt(1, Transient, 0)
			j.OnRetry(1, 0)
			j.OnGiveUp(ErrAttemptsExhausted, 2, errors.New("last"))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// Hooks from several sets, each with some hooks missing, all run on a
// retrier, and a retrier built with no hooks joined allocates nothing.
func TestJoinHooksOnARetrier(t *testing.T) {
	var attempts, retries, giveUps int
	r := MustNew(fast, WithHooks(JoinHooks(
		Hooks{OnAttempt: func(int, Class, time.Duration) { attempts++ }},
		Hooks{OnRetry: func(int, time.Duration) { retries++ }},
		Hooks{OnGiveUp: func(error, int, error) { giveUps++ }, OnAttempt: func(int, Class, time.Duration) { attempts++ }},
	)))
	_ = Do(context.Background(), r, func(context.Context) error { return statusErr(503) })
	if attempts != 6 || retries != 2 || giveUps != 1 {
		t.Errorf("hooks saw %d attempts, %d retries, %d give-ups; want 6 (3 twice), 2, 1", attempts, retries, giveUps)
	}
	bare := MustNew(fast, WithHooks(JoinHooks()))
	ok := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(100, func() { _ = Do(context.Background(), bare, ok) }); n != 0 {
		t.Errorf("Do with JoinHooks() allocates %v times per call; want 0", n)
	}
}

type ctxKey struct{}

// OnEvent sees every event of a call in order, with the context the call
// was made with, and the request's duration at its end: for a call that
// succeeds after a retry, one that gives up, and one whose caller leaves
// during the wait.
func TestOnEvent(t *testing.T) {
	type seen struct {
		kind    EventKind
		attempt int
		class   Class
		reason  error
		ctxOK   bool
	}
	tests := []struct {
		name   string
		fn     func(context.Context) error
		cancel bool // cancel the context during the first wait
		want   []seen
	}{
		{"success after a retry", scriptErrs(statusErr(503)), false, []seen{
			{EventAttempt, 1, Transient, nil, true},
			{EventRetry, 1, 0, nil, true},
			{EventAttempt, 2, Success, nil, true},
			{EventSucceeded, 2, 0, nil, true},
		}},
		{"gave up", scriptErrs(statusErr(503), statusErr(404)), false, []seen{
			{EventAttempt, 1, Transient, nil, true},
			{EventRetry, 1, 0, nil, true},
			{EventAttempt, 2, NeverRetry, nil, true},
			{EventGaveUp, 2, 0, ErrNotRetryable, true},
		}},
		{"caller left during the wait", scriptErrs(statusErr(503)), true, []seen{
			{EventAttempt, 1, Transient, nil, true},
			{EventRetry, 1, 0, nil, true},
			{EventGaveUp, 1, 0, ErrCanceled, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "mine"))
			defer cancel()
			var got []seen
			var end Event
			r := MustNew(Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: 20 * time.Millisecond}},
				WithHooks(Hooks{OnEvent: func(ctx context.Context, e Event) {
					got = append(got, seen{e.Kind, e.Attempt, e.Class, e.Reason, ctx.Value(ctxKey{}) == "mine"})
					if e.Kind == EventRetry && tt.cancel {
						cancel()
					}
					if e.Kind == EventSucceeded || e.Kind == EventGaveUp {
						end = e
					}
				}}))
			start := time.Now()
			_ = Do(ctx, r, tt.fn)
			elapsed := time.Since(start)
			if !slices.EqualFunc(got, tt.want, func(a, b seen) bool {
				return a.kind == b.kind && a.attempt == b.attempt && a.class == b.class && errors.Is(a.reason, b.reason) && a.ctxOK == b.ctxOK
			}) {
				t.Errorf("events\n%+v\nwant\n%+v", got, tt.want)
			}
			// The request's duration covers the waits: at least one 20 ms
			// wait unless the caller left at once, and never more than
			// the whole of Do.
			min := 20 * time.Millisecond
			if tt.cancel {
				min = 0
			}
			if end.Took < min || end.Took > elapsed {
				t.Errorf("request took %v; want between %v and %v (the whole of Do)", end.Took, min, elapsed)
			}
		})
	}
}

// scriptErrs returns a function that fails with errs, one per call, then
// succeeds.
func scriptErrs(errs ...error) func(context.Context) error {
	n := 0
	return func(context.Context) error {
		if n < len(errs) {
			n++
			return errs[n-1]
		}
		return nil
	}
}

// A call started with StartAt (the simulator's way) still reaches OnEvent,
// with context.Background(); OnEvent makes the shells read the clock, and
// the success path with it allocates nothing.
func TestOnEventWithoutContext(t *testing.T) {
	var kinds []EventKind
	var ctxs []context.Context
	r := MustNew(Policy{MaxAttempts: 1}, WithHooks(Hooks{OnEvent: func(ctx context.Context, e Event) {
		kinds = append(kinds, e.Kind)
		ctxs = append(ctxs, ctx)
	}}))
	if !r.NeedsClock() {
		t.Error("NeedsClock() = false with OnEvent set; want true, so that requests are timed")
	}
	now := time.Unix(100, 0)
	c := r.StartAt(now, time.Time{})
	r.EndAt(now.Add(time.Second), &c, Success, Signal{}, 0)
	if want := []EventKind{EventAttempt, EventSucceeded}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v; want %v", kinds, want)
	}
	for _, ctx := range ctxs {
		if ctx != context.Background() {
			t.Errorf("ctx %v; want context.Background()", ctx)
		}
	}
	counting := MustNew(fast, WithHooks(Hooks{OnEvent: func(context.Context, Event) {}}))
	ok := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(100, func() { _ = Do(context.Background(), counting, ok) }); n != 0 {
		t.Errorf("Do with OnEvent allocates %v times per call; want 0", n)
	}
}

func TestJoinHooksOnEvent(t *testing.T) {
	var got []string
	h := func(name string) Hooks {
		return Hooks{OnEvent: func(_ context.Context, e Event) { got = append(got, name+" "+e.Kind.String()) }}
	}
	if j := JoinHooks(Hooks{}, Hooks{}); j.OnEvent != nil {
		t.Error("JoinHooks of empty sets has OnEvent")
	}
	j := JoinHooks(h("a"), Hooks{}, h("b"))
	j.OnEvent(context.Background(), Event{Kind: EventRetry})
	if want := []string{"a retry", "b retry"}; !slices.Equal(got, want) {
		t.Errorf("got %q; want %q", got, want)
	}
	if s := EventKind(9).String(); s != "retry.EventKind(9)" {
		t.Errorf("EventKind(9).String() = %q", s)
	}
}
