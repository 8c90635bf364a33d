package budget

import (
	"testing"
	"time"
)

func TestConcurrencyRules(t *testing.T) {
	c := mustPreset(t, "envoy").(*Concurrency)
	// want: retries in flight.
	runSteps(t, c, func(time.Time) float64 {
		_, r := c.InFlight()
		return float64(r)
	}, []step{
		{call: "begin", want: 0},
		{call: "retry", n: 3, wantOK: true, want: 3}, // min 3; attempts in flight 4
		{call: "retry", wantOK: false, want: 3},      // ⌊0.2 × 4⌋ = 0 < 3
		{call: "end-retry", outcome: Success, want: 2},
		{call: "retry", wantOK: true, want: 3},
		{call: "begin", n: 16, want: 3},                 // attempts in flight 20
		{call: "retry", wantOK: true, want: 4},          // ⌊0.2 × 20⌋ = 4
		{call: "retry", wantOK: false, want: 4},         // ⌊0.2 × 21⌋ = 4
		{call: "begin", n: 4, want: 4},                  // 25
		{call: "retry", wantOK: true, want: 5},          // ⌊0.2 × 25⌋ = 5
		{call: "retry", wantOK: false, want: 5},         // ⌊0.2 × 26⌋ = 5
		{call: "end", outcome: Failure, n: 21, want: 5}, // every first try ends: 5 retries, 5 attempts in flight
		{call: "retry", wantOK: false, want: 5},         // no memory, but 5 + 1 > 3
		{call: "end-retry", outcome: Ignore, n: 5, want: 0},
		{call: "retry", wantOK: true, want: 1},
	})
	if a, r := c.InFlight(); a != 1 || r != 1 {
		t.Fatalf("InFlight() = (%d, %d), want (1, 1)", a, r)
	}
	// Extra EndAt calls do not take the counts below zero.
	for range 3 {
		c.EndAt(t0, Success, Ticket{retry: true})
	}
	if a, r := c.InFlight(); a != 0 || r != 0 {
		t.Fatalf("InFlight() after extra EndAt = (%d, %d), want (0, 0)", a, r)
	}
}

func TestConcurrencyLimitTable(t *testing.T) {
	// A burst of retries after n first tries: each granted retry is itself an
	// attempt in flight, so the burst stops at the first r with
	// r + 1 > max(⌊0.2 × (n + r)⌋, 3), that is r = max(⌊(n − 5) / 4⌋ + 1, 3).
	tests := []struct {
		firstTries int
		want       int // retries granted before the first refusal
	}{
		{0, 3}, {10, 3}, {16, 3}, {17, 4}, {20, 4}, {25, 6}, {40, 9}, {80, 19},
	}
	for _, tt := range tests {
		c := NewConcurrency(0.2, 3)
		for range tt.firstTries {
			c.BeginAt(t0)
		}
		got := 0
		for {
			if _, ok := c.RetryAt(t0, Transient); !ok {
				break
			}
			got++
		}
		if got != tt.want {
			t.Errorf("%d first tries: %d retries granted, want %d", tt.firstTries, got, tt.want)
		}
		if a := tt.firstTries + got; got > max(a/5, 3) {
			t.Errorf("%d first tries: %d retries in flight exceed max(⌊0.2 × %d⌋, 3)", tt.firstTries, got, a)
		}
	}
}

func TestNewConcurrencyPanics(t *testing.T) {
	tests := []struct {
		name    string
		percent float64
		min     int
	}{
		{"percent above 1", 20, 3},
		{"negative percent", -0.1, 3},
		{"negative min", 0.2, -1},
		{"both zero", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("NewConcurrency did not panic")
				}
			}()
			NewConcurrency(tt.percent, tt.min)
		})
	}
}
