package httpx

import (
	"testing"
	"time"
)

// The clock's times agree with time.Now, carry monotonic readings (so Sub
// and Before between them are exact), and the wall clock's base is read
// again once it is clockRefresh old, or from the future.
func TestClock(t *testing.T) {
	tests := []struct {
		name        string
		base        time.Duration // the base's age; no base if zero
		wantRefresh bool          // the base is read again
	}{
		{"first reading", 0, true},
		{"fresh base", time.Millisecond, false},
		{"old base", 2 * clockRefresh, true},
		{"base from the future", -time.Second, true},
	}
	for _, tt := range tests {
		var c clock
		var base *time.Time
		if tt.base != 0 {
			b := time.Now().Add(-tt.base)
			base = &b
			c.base.Store(base)
		}
		before := time.Now()
		got := c.now()
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Errorf("%s: now() = %v; want within [%v, %v]", tt.name, got, before, after)
		}
		// The monotonic reading is there: Round(0) strips it, and only a
		// time with one prints "m=".
		if got.String() == got.Round(0).String() {
			t.Errorf("%s: now() = %v has no monotonic reading", tt.name, got)
		}
		if refreshed := c.base.Load() != base; refreshed != tt.wantRefresh {
			t.Errorf("%s: base read again = %v; want %v", tt.name, refreshed, tt.wantRefresh)
		}
		if !tt.wantRefresh {
			// The wall reading is the base's plus the monotonic time since.
			if wall, want := got.Round(0), base.Round(0).Add(got.Sub(*base)); !wall.Equal(want) {
				t.Errorf("%s: wall reading %v; want base + elapsed = %v", tt.name, wall, want)
			}
		}

		time.Sleep(time.Millisecond)
		end := since(got)
		if d, min := end.Sub(got), after.Sub(got)+time.Millisecond; d < min || d > time.Since(got) {
			t.Errorf("%s: since(t).Sub(t) = %v; want between %v and time.Since(t)", tt.name, d, min)
		}
	}
}
