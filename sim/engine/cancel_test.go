package engine

import (
	"testing"
	"time"
)

// TestCancel checks the cancellation contract for heap and fixed-queue
// events: a cancelled event never fires, and cancelling an event that has
// fired or was cancelled is a no-op that reports false.
func TestCancel(t *testing.T) {
	type setup func(e *Engine, q *FixedQueue, ev Event) Handle
	heap := func(e *Engine, _ *FixedQueue, ev Event) Handle { return e.AfterCancelable(time.Second, ev) }
	queue := func(_ *Engine, q *FixedQueue, ev Event) Handle { return q.Add(ev) }
	tests := []struct {
		name     string
		schedule setup
		// before cancelling: deliver this many events (the target is A=1,
		// scheduled second after a filler A=0 that fires first)
		deliver    int
		cancels    int  // Cancel calls on the target
		wantFirst  bool // what the first Cancel reports
		wantFired  []int64
		wantActive bool // Pending(target) before the first Cancel
	}{
		{"heap/pending", heap, 0, 1, true, []int64{0, 2}, true},
		{"heap/twice", heap, 0, 2, true, []int64{0, 2}, true},
		{"heap/after-fire", heap, 2, 1, false, []int64{0, 1, 2}, false},
		{"queue/pending", queue, 0, 1, true, []int64{0, 2}, true},
		{"queue/twice", queue, 0, 2, true, []int64{0, 2}, true},
		{"queue/after-fire", queue, 2, 1, false, []int64{0, 1, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Engine
			q := e.NewFixedQueue(time.Second)
			e.After(time.Millisecond, Event{A: 0})
			h := tt.schedule(&e, q, Event{A: 1})
			e.After(2*time.Second, Event{A: 2})
			var fired []int64
			var ev Event
			for range tt.deliver {
				if e.Next(&ev) {
					fired = append(fired, ev.A)
				}
			}
			if got := e.Pending(h); got != tt.wantActive {
				t.Errorf("Pending before Cancel = %v, want %v", got, tt.wantActive)
			}
			for i := range tt.cancels {
				got := e.Cancel(h)
				want := tt.wantFirst && i == 0
				if got != want {
					t.Errorf("Cancel #%d = %v, want %v", i+1, got, want)
				}
			}
			if e.Pending(h) {
				t.Error("Pending after Cancel = true")
			}
			for e.Next(&ev) {
				fired = append(fired, ev.A)
			}
			if !equalInts(fired, tt.wantFired) {
				t.Errorf("fired %v, want %v", fired, tt.wantFired)
			}
		})
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCancelStaleHandle checks that a handle whose event fired does not
// touch a later event that reuses its storage (the heap slot, the ring
// slot).
func TestCancelStaleHandle(t *testing.T) {
	var e Engine
	q := e.NewFixedQueue(0)
	old := e.AfterCancelable(0, Event{A: 1})
	oldQ := q.Add(Event{A: 2})
	var ev Event
	for e.Next(&ev) {
	}
	fresh := e.AfterCancelable(0, Event{A: 3}) // reuses old's slot
	freshQ := q.Add(Event{A: 4})
	if fresh.slot != old.slot {
		t.Fatalf("test assumption: slot not reused (%d, %d)", old.slot, fresh.slot)
	}
	if e.Cancel(old) || e.Cancel(oldQ) {
		t.Fatal("Cancel of a fired event's handle = true")
	}
	if !e.Pending(fresh) || !e.Pending(freshQ) {
		t.Fatal("stale Cancel disturbed a later event")
	}
	var got []int64
	for e.Next(&ev) {
		got = append(got, ev.A)
	}
	if !equalInts(got, []int64{3, 4}) {
		t.Errorf("fired %v, want [3 4]", got)
	}
}

// TestCancelOddHandles checks handles that refer to nothing the engine
// holds. (Handles are only meaningful to the engine that made them; the
// other engine here is just a way to make such handles.)
func TestCancelOddHandles(t *testing.T) {
	var other Engine
	oq1 := other.NewFixedQueue(time.Second)
	oq2 := other.NewFixedQueue(time.Second)
	tests := []struct {
		name string
		h    Handle
	}{
		{"zero", Handle{}},
		{"queue-out-of-range", oq2.Add(Event{})}, // e has one queue
		{"entry-never-added", oq1.Add(Event{})},  // e's queue is empty
		{"slot-never-used", other.AfterCancelable(time.Second, Event{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Engine
			e.NewFixedQueue(time.Second)
			if e.Pending(tt.h) {
				t.Error("Pending = true")
			}
			if e.Cancel(tt.h) {
				t.Error("Cancel = true")
			}
		})
	}
}

// TestCancelSameTime checks that an event can cancel another due at the
// same instant, and that cancelled events at the front are skipped by Peek
// and Len counts them until then.
func TestCancelSameTime(t *testing.T) {
	var e Engine
	q := e.NewFixedQueue(5)
	e.At(5, Event{A: 1})
	victimQ := q.Add(Event{A: 2})
	victimH := e.AtCancelable(5, Event{A: 3})
	e.At(6, Event{A: 4})
	var got []int64
	var ev Event
	for e.Next(&ev) {
		got = append(got, ev.A)
		if ev.A == 1 {
			e.Cancel(victimQ)
			e.Cancel(victimH)
			if n := e.Len(); n != 3 {
				t.Errorf("Len with two cancelled events pending = %d, want 3", n)
			}
			if at, ok := e.Peek(); !ok || at != 6 {
				t.Errorf("Peek = %v, %v; want 6, true", at, ok)
			}
		}
	}
	if !equalInts(got, []int64{1, 4}) {
		t.Errorf("fired %v, want [1 4]", got)
	}
}
