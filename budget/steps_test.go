package budget

import (
	"fmt"
	"testing"
	"time"
)

// t0 is the start of every scripted test's clock.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// step is one protocol call (or a run of identical calls) in a scripted test.
type step struct {
	call    string        // "begin", "retry", "end" (a first attempt) or "end-retry" (the oldest granted retry not yet ended)
	cause   Cause         // retry
	outcome Outcome       // end, end-retry
	n       int           // repeat count; 0 means 1
	advance time.Duration // the clock moves by this (forwards or backwards) before the step
	wantOK  bool          // retry: whether each of the n calls is granted
	want    float64       // the probe's value after the step
}

// runSteps plays steps against b and checks, after each step, the grants of
// retries and the value of probe (a level or a count).
func runSteps(t *testing.T, b Budget, probe func(now time.Time) float64, steps []step) {
	t.Helper()
	now := t0
	var pending []Ticket
	for i, s := range steps {
		now = now.Add(s.advance)
		n := max(s.n, 1)
		for range n {
			switch s.call {
			case "begin":
				b.BeginAt(now)
			case "end":
				b.EndAt(now, s.outcome, Ticket{})
			case "end-retry":
				if len(pending) == 0 {
					t.Fatalf("step %d: end-retry with no granted retry pending", i)
				}
				b.EndAt(now, s.outcome, pending[0])
				pending = pending[1:]
			case "retry":
				tk, ok := b.RetryAt(now, s.cause)
				if ok != s.wantOK {
					t.Fatalf("step %d (%s): RetryAt ok = %v, want %v", i, s, ok, s.wantOK)
				}
				if ok != tk.Retry() {
					t.Fatalf("step %d (%s): ticket.Retry() = %v with ok = %v", i, s, tk.Retry(), ok)
				}
				if ok {
					pending = append(pending, tk)
				}
			default:
				t.Fatalf("step %d: unknown call %q", i, s.call)
			}
		}
		if got := probe(now); got != s.want {
			t.Fatalf("step %d (%s): got %g, want %g", i, s, got, s.want)
		}
	}
}

func (s step) String() string {
	switch s.call {
	case "retry":
		return fmt.Sprintf("%d × retry(%v) at +%v", max(s.n, 1), s.cause, s.advance)
	case "end", "end-retry":
		return fmt.Sprintf("%d × %s(%v) at +%v", max(s.n, 1), s.call, s.outcome, s.advance)
	}
	return fmt.Sprintf("%d × %s at +%v", max(s.n, 1), s.call, s.advance)
}

// mustPreset builds a preset's budget or fails the test.
func mustPreset(t testing.TB, name string) Budget {
	t.Helper()
	spec, err := Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := spec.New()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
