package grpcx

import (
	"testing"
	"time"
)

// TestClock: the clock read from a deadline is the time between two
// readings of time.Now around it, whether the deadline has a monotonic
// reading (compared by it) or not (compared by the wall clock), and
// time.Now itself without a deadline or with one too far away for a
// Duration.
func TestClock(t *testing.T) {
	for _, tt := range []struct {
		name string
		dl   time.Time
	}{
		{"no deadline", time.Time{}},
		{"a deadline with a monotonic reading", time.Now().Add(time.Hour)},
		{"a deadline passed", time.Now().Add(-time.Minute)},
		{"a wall-clock deadline", time.Now().Add(time.Hour).Round(0)},
		{"a deadline past a Duration", time.Unix(1<<62, 0)},
		{"a deadline before a Duration", time.Unix(-1<<62, 0)},
	} {
		before := time.Now()
		got := clock(tt.dl)
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Errorf("%s: clock = %v, not within [%v, %v]", tt.name, got, before, after)
		}
		if hasMono := got.Round(0) != got; tt.dl.IsZero() && !hasMono {
			t.Errorf("%s: clock = %v, without the monotonic reading of time.Now", tt.name, got)
		}
	}
}
