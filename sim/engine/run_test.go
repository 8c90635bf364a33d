package engine

import (
	"math"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// TestRunUntil checks that Run and NextUntil deliver exactly the events due
// at or before the limit and leave the clock there.
func TestRunUntil(t *testing.T) {
	var e Engine
	for _, at := range []Time{10, 20, 20, 30, 45} {
		e.At(at, Event{A: int64(at)})
	}
	var got []Time
	rec := HandlerFunc(func(e *Engine, ev Event) {
		if e.Now() != ev.At {
			t.Errorf("Now = %v during event at %v", e.Now(), ev.At)
		}
		got = append(got, ev.At)
	})
	steps := []struct {
		until   Time
		wantN   int  // events delivered so far
		wantNow Time // clock afterwards
	}{
		{5, 0, 5},
		{20, 3, 20}, // inclusive limit
		{15, 3, 20}, // a limit in the past changes nothing
		{44, 4, 44},
		{Never, 5, 45}, // Never drains and leaves the clock at the last event
		{Never, 5, 45},
		{100, 5, 100},
	}
	for _, st := range steps {
		e.Run(st.until, rec)
		if len(got) != st.wantN || e.Now() != st.wantNow {
			t.Fatalf("Run(%v): %d events, Now %v; want %d, %v", st.until, len(got), e.Now(), st.wantN, st.wantNow)
		}
	}
	if e.Fired() != 5 {
		t.Errorf("Fired = %d, want 5", e.Fired())
	}
}

// TestNextEmpty checks Next, NextUntil and Peek with nothing scheduled, on
// the zero Engine.
func TestNextEmpty(t *testing.T) {
	var e Engine
	var ev Event
	if e.Next(&ev) {
		t.Error("Next on an empty engine = true")
	}
	if _, ok := e.Peek(); ok {
		t.Error("Peek on an empty engine: ok = true")
	}
	if e.NextUntil(Never, &ev) || e.Now() != 0 {
		t.Errorf("NextUntil(Never) on an empty engine moved the clock to %v", e.Now())
	}
	if e.NextUntil(7, &ev) || e.Now() != 7 {
		t.Errorf("NextUntil(7): Now = %v, want 7", e.Now())
	}
}

// TestScheduleFields checks what the engine sets on scheduled events:
// At, increasing Seq, and the caller's fields untouched; a delivered event
// can be scheduled again as it is.
func TestScheduleFields(t *testing.T) {
	var e Engine
	q := e.NewFixedQueue(3)
	e.At(2, Event{At: 999, Seq: 999, Kind: 7, Target: 8, A: 9, B: 10})
	q.Add(Event{Kind: 1})
	e.AfterCancelable(1, Event{Kind: 2})
	want := []Event{
		{At: 1, Seq: 3, Kind: 2},
		{At: 2, Seq: 1, Kind: 7, Target: 8, A: 9, B: 10},
		{At: 3, Seq: 2, Kind: 1},
	}
	var ev Event
	for i, w := range want {
		if !e.Next(&ev) || ev != w {
			t.Fatalf("event %d = %+v, want %+v", i, ev, w)
		}
	}
	e.After(5, ev) // again, 5 ns later
	if !e.Next(&ev) || ev.At != 8 || ev.Seq != 4 || ev.Kind != 1 {
		t.Errorf("rescheduled event = %+v, want At 8, Seq 4, Kind 1", ev)
	}
}

func TestSchedulePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(e *Engine)
	}{
		{"At in the past", func(e *Engine) { e.At(e.Now()-1, Event{}) }},
		{"AtCancelable in the past", func(e *Engine) { e.AtCancelable(e.Now()-1, Event{}) }},
		{"negative After", func(e *Engine) { e.After(-1, Event{}) }},
		{"negative AfterCancelable", func(e *Engine) { e.AfterCancelable(-1, Event{}) }},
		{"negative queue delay", func(e *Engine) { e.NewFixedQueue(-1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Engine
			e.NextUntil(100, new(Event))
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.f(&e)
		})
	}
}

// TestAfterSaturates checks that a delay too long to represent means
// Never instead of wrapping into the past.
func TestAfterSaturates(t *testing.T) {
	var e Engine
	e.NextUntil(Time(time.Hour), new(Event))
	e.After(math.MaxInt64, Event{A: 1})
	q := e.NewFixedQueue(math.MaxInt64)
	q.Add(Event{A: 2})
	e.After(time.Second, Event{A: 3})
	var ev Event
	var got []int64
	for e.Next(&ev) {
		got = append(got, ev.A)
		if ev.A != 3 && ev.At != Never {
			t.Errorf("event %d at %v, want Never", ev.A, ev.At)
		}
	}
	if !equalInts(got, []int64{3, 1, 2}) {
		t.Errorf("fired %v, want [3 1 2]", got)
	}
}

func TestTime(t *testing.T) {
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"Add", Time(5).Add(3), Time(8)},
		{"Add saturates up", Time(5).Add(math.MaxInt64), Never},
		{"Add saturates down", Time(-5).Add(math.MinInt64), Time(math.MinInt64)},
		{"Sub", Time(5).Sub(8), time.Duration(-3)},
		{"Sub saturates up", Never.Sub(-1), time.Duration(math.MaxInt64)},
		{"Sub saturates down", Time(math.MinInt64).Sub(1), time.Duration(math.MinInt64)},
		{"Duration", Time(1500 * time.Millisecond).Duration(), 1500 * time.Millisecond},
		{"Seconds", Time(1500 * time.Millisecond).Seconds(), 1.5},
		{"String", Time(1500 * time.Millisecond).String(), "1.5s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestNoAllocs checks that the steady state allocates nothing: delivering,
// scheduling in the heap and a fixed queue, cancelling, and Run with a
// Handler.
func TestNoAllocs(t *testing.T) {
	var e Engine
	q := e.NewFixedQueue(time.Second)
	r := Stream(1, 1)
	h := &reschedule{r: Stream(1, 2)}
	var hs [64]Handle
	for i := range 1000 {
		e.After(time.Duration(r.Uint64N(1e6)), Event{Target: uint32(i)})
	}
	step := func() {
		var ev Event
		for range 100 {
			e.Next(&ev)
			e.After(time.Duration(r.ExpFloat64()*1e6), ev)
			i := r.IntN(len(hs))
			e.Cancel(hs[i])
			if r.IntN(2) == 0 {
				hs[i] = q.Add(ev)
			} else {
				hs[i] = e.AfterCancelable(time.Duration(r.Uint64N(1e6)), ev)
			}
		}
		h.n = 100
		e.Run(Never, h)
		for range 99 { // make up for the events the handler did not reschedule
			e.After(time.Duration(r.Uint64N(1e6)), Event{})
		}
	}
	for range 1000 { // let the buffers reach their steady size
		step()
	}
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Errorf("%v allocations per step, want 0", n)
	}
}

// TestEnginesIndependent runs the same scenario on engines in parallel
// goroutines: they share nothing, so -race stays quiet and the results
// agree.
func TestEnginesIndependent(t *testing.T) {
	var wg sync.WaitGroup
	sums := make([]uint64, 4)
	for i := range sums {
		wg.Go(func() { sums[i] = scenarioHash(42, 20_000, true) })
	}
	wg.Wait()
	for i := range sums {
		if sums[i] != sums[0] {
			t.Fatalf("engine %d: hash %x, engine 0: %x", i, sums[i], sums[0])
		}
	}
}

// TestEventSize pins the size the documentation promises: events are
// copied by value everywhere, so growing them costs speed.
func TestEventSize(t *testing.T) {
	if got := unsafe.Sizeof(Event{}); got != 40 {
		t.Errorf("Event is %d bytes, want 40", got)
	}
	if got := unsafe.Sizeof(Handle{}); got != 16 {
		t.Errorf("Handle is %d bytes, want 16", got)
	}
}
