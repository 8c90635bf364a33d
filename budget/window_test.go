package budget

import (
	"testing"
	"time"
)

func TestWindowRules(t *testing.T) {
	tests := []struct {
		name   string
		preset string
		steps  []step // want: retries in the window
	}{
		{
			name:   "sre: retries ≤ 10 % of requests",
			preset: "sre",
			steps: []step{
				{call: "retry", wantOK: false, want: 0}, // no requests yet
				{call: "begin", n: 9, want: 0},
				{call: "retry", wantOK: false, want: 0}, // 1 > 0.9
				{call: "begin", want: 0},
				{call: "retry", wantOK: true, want: 1}, // 1 ≤ 1
				{call: "retry", wantOK: false, want: 1},
				{call: "begin", n: 90, want: 1},
				{call: "retry", n: 9, wantOK: true, want: 10},
				{call: "retry", wantOK: false, want: 10},
				{call: "end-retry", outcome: Success, n: 5, want: 10}, // outcomes do not matter
				{call: "end-retry", outcome: Failure, n: 4, want: 10},
				{call: "end-retry", outcome: Ignore, want: 9}, // an abandoned retry is taken back
				{call: "retry", wantOK: true, want: 10},
			},
		},
		{
			name:   "finagle: 20 % of requests plus 10 retries/s over 10 s",
			preset: "finagle",
			steps: []step{
				{call: "retry", n: 100, wantOK: true, want: 100}, // the floor: 10/s × 10 s
				{call: "retry", wantOK: false, want: 100},
				{call: "begin", n: 50, want: 100},
				{call: "retry", n: 10, wantOK: true, want: 110}, // + 0.2 × 50
				{call: "retry", wantOK: false, want: 110},
				{call: "begin", n: 4, want: 110},
				{call: "retry", wantOK: false, want: 110}, // 111 > 110.8
				{call: "begin", want: 110},
				{call: "retry", wantOK: true, want: 111}, // 111 ≤ 111
			},
		},
		{
			name:   "per-minute: 60 retries in any minute, slots of 6 s",
			preset: "per-minute",
			steps: []step{
				{call: "retry", n: 60, wantOK: true, want: 60}, // slot 0 (the first call sets the origin)
				{call: "retry", wantOK: false, want: 60},
				{call: "retry", advance: 59 * time.Second, wantOK: false, want: 60},  // slot 9: slot 0 still counts
				{call: "retry", advance: time.Second, n: 60, wantOK: true, want: 60}, // t = 60 s: slot 0 has left
				{call: "retry", advance: 30 * time.Second, wantOK: false, want: 60},
				{call: "retry", advance: 30 * time.Second, n: 60, wantOK: true, want: 60},
				{call: "end-retry", outcome: Ignore, n: 120, want: 60},                    // the retries of t = 0 and 60 s: their slots have left, nothing to take back
				{call: "end-retry", outcome: Ignore, n: 10, want: 50},                     // the retries of t = 120 s
				{call: "retry", advance: 10 * time.Minute, n: 60, wantOK: true, want: 60}, // a long gap empties the ring
			},
		},
		{
			name:   "sre: an event counts for more than 0.9 and at most 1 window",
			preset: "sre",
			steps: []step{
				{call: "begin", n: 10, want: 0}, // t = 0: origin, slot 0
				{call: "retry", advance: 900 * time.Millisecond, wantOK: true, want: 1},
				{call: "retry", advance: 8100 * time.Millisecond, wantOK: false, want: 1}, // t = 9 s, slot 9: requests still count
				{call: "retry", advance: 999 * time.Millisecond, wantOK: false, want: 1},  // t = 9.999 s
				{call: "retry", advance: time.Millisecond, wantOK: false, want: 0},        // t = 10 s: all gone, no requests
				{call: "begin", n: 20, want: 0},
				{call: "retry", n: 2, wantOK: true, want: 2},
			},
		},
		{
			name:   "time going backwards counts in the newest slot",
			preset: "per-minute",
			steps: []step{
				{call: "retry", advance: 0, n: 10, wantOK: true, want: 10},
				{call: "retry", advance: 30 * time.Second, n: 10, wantOK: true, want: 20},
				{call: "retry", advance: -10 * time.Minute, n: 10, wantOK: true, want: 30},
				{call: "retry", advance: -100 * 365 * 24 * time.Hour, n: 30, wantOK: true, want: 60},
				{call: "retry", wantOK: false, want: 60},
				// t = 60 s: slot 0 leaves with its 10 retries; the 50 counted at
				// t = 30 s and "earlier" are still there.
				{call: "retry", advance: 100*365*24*time.Hour + 10*time.Minute + 30*time.Second, n: 10, wantOK: true, want: 60},
				{call: "retry", wantOK: false, want: 60},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustPreset(t, tt.preset).(*Window)
			runSteps(t, w, func(now time.Time) float64 {
				_, rets := w.CountsAt(now)
				return float64(rets)
			}, tt.steps)
		})
	}
}

func TestWindowCountsRequests(t *testing.T) {
	w := NewWindow(time.Second, 0.5, 0)
	for i := range 20 {
		w.BeginAt(t0.Add(time.Duration(i) * 100 * time.Millisecond))
	}
	tests := []struct {
		at                time.Duration
		requests, retries int64
	}{
		{at: 1900 * time.Millisecond, requests: 10},
		{at: 2 * time.Second, requests: 9}, // slot 20 starts: slot 10 (the request at 1 s) leaves
		{at: 2500 * time.Millisecond, requests: 4},
		{at: 3 * time.Second, requests: 0},
	}
	for _, tt := range tests {
		req, ret := w.CountsAt(t0.Add(tt.at))
		if req != tt.requests || ret != tt.retries {
			t.Errorf("CountsAt(+%v) = (%d, %d), want (%d, %d)", tt.at, req, ret, tt.requests, tt.retries)
		}
	}
}

func TestWindowSmallestAndOddSpans(t *testing.T) {
	// 10 ns: slots of 1 ns. 15 ns: slots of 1 ns too (the span is rounded down
	// to a multiple of 10 ns for the ring; the floor uses the whole span).
	for _, span := range []time.Duration{10, 15} {
		w := NewWindow(span, 1, 0)
		w.BeginAt(t0)
		if _, ok := w.RetryAt(t0.Add(9), Transient); !ok {
			t.Fatalf("span %v: retry at +9ns refused", span)
		}
		if _, ok := w.RetryAt(t0.Add(9), Transient); ok {
			t.Fatalf("span %v: second retry at +9ns granted", span)
		}
		if req, ret := w.CountsAt(t0.Add(10)); req != 0 || ret != 1 {
			t.Fatalf("span %v: CountsAt(+10ns) = (%d, %d), want (0, 1)", span, req, ret)
		}
	}
}

func TestNewWindowPanics(t *testing.T) {
	tests := []struct {
		name         string
		window       time.Duration
		ratio, floor float64
	}{
		{"window too short", 9, 0.1, 0},
		{"negative ratio", time.Second, -0.1, 1},
		{"negative floor", time.Second, 0.1, -1},
		{"ratio and floor zero", time.Second, 0, 0},
		{"huge floor", time.Hour, 0, 1e12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("NewWindow did not panic")
				}
			}()
			NewWindow(tt.window, tt.ratio, tt.floor)
		})
	}
}
