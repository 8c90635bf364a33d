package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestEngineMatchesReference drives the engine and refEngine with the same
// random script — schedule into the heap or a fixed queue, cancel, deliver —
// and checks that they deliver the same events in the same order. Coarse
// time grains make many events share a time, so the tie-break between the
// heap and the queues is exercised.
func TestEngineMatchesReference(t *testing.T) {
	tests := []struct {
		name    string
		delays  []time.Duration // one fixed queue per delay
		grain   time.Duration   // heap delays are multiples of grain …
		maxMul  uint64          // … from 0 to maxMul-1 grains
		cancelP int             // percent of steps that cancel a random handle
		steps   int
	}{
		{"heap-only", nil, time.Microsecond, 1000, 0, 20000},
		{"heap-ties", nil, time.Millisecond, 4, 10, 20000},
		{"one-queue", []time.Duration{5 * time.Millisecond}, time.Millisecond, 10, 0, 20000},
		{"queues-ties", []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond}, time.Millisecond, 4, 20, 20000},
		{"many-queues", []time.Duration{1, 7, 13, 20, 20, 31, 64, 100, 101, 250, 999, 1000}, 1, 200, 15, 30000},
		{"cancel-heavy", []time.Duration{3 * time.Millisecond, 9 * time.Millisecond}, time.Millisecond, 12, 45, 30000},
		{"one-queue-cancels", []time.Duration{4 * time.Millisecond}, time.Millisecond, 8, 40, 30000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Engine
			var ref refEngine
			var queues []*FixedQueue
			for _, d := range tt.delays {
				queues = append(queues, e.NewFixedQueue(d))
			}
			type pair struct {
				h   Handle
				seq uint64
			}
			var handles []pair
			r := Stream(7, uint64(len(tt.name)))
			delivered := 0
			for step := range tt.steps {
				ev := Event{Kind: Kind(r.IntN(5)), Target: uint32(step), A: int64(step), B: -int64(step)}
				switch op := r.IntN(100); {
				case op < tt.cancelP && len(handles) > 0:
					i := r.IntN(len(handles))
					p := handles[i]
					if got, want := e.Cancel(p.h), ref.cancel(p.seq); got != want {
						t.Fatalf("step %d: Cancel = %v, want %v", step, got, want)
					}
					if e.Pending(p.h) {
						t.Fatalf("step %d: Pending after Cancel", step)
					}
				case op < 55:
					d := time.Duration(r.Uint64N(tt.maxMul)) * tt.grain
					if r.IntN(2) == 0 {
						e.After(d, ev)
						ref.after(d, ev)
					} else {
						h := e.AfterCancelable(d, ev)
						handles = append(handles, pair{h, ref.after(d, ev)})
					}
				case op < 75 && len(queues) > 0:
					q := queues[r.IntN(len(queues))]
					h := q.Add(ev)
					handles = append(handles, pair{h, ref.after(q.Delay(), ev)})
				default:
					var got, want Event
					gok, wok := e.Next(&got), ref.next(&want)
					if gok != wok || got != want {
						t.Fatalf("step %d: Next = %v %+v, want %v %+v", step, gok, got, wok, want)
					}
					if gok {
						delivered++
					}
					if e.Now() != ref.now {
						t.Fatalf("step %d: Now = %v, want %v", step, e.Now(), ref.now)
					}
				}
			}
			for { // drain
				var got, want Event
				gok, wok := e.Next(&got), ref.next(&want)
				if gok != wok || got != want {
					t.Fatalf("drain: Next = %v %+v, want %v %+v", gok, got, wok, want)
				}
				if !gok {
					break
				}
				delivered++
			}
			if e.Fired() != uint64(delivered) {
				t.Errorf("Fired = %d, want %d", e.Fired(), delivered)
			}
			if e.Len() != 0 {
				t.Errorf("Len after draining = %d, want 0", e.Len())
			}
		})
	}
}

// TestFixedQueueMerge checks the tie-break between the heap and fixed
// queues on a hand-made schedule: at equal times, first scheduled fires
// first, whichever structure holds the event.
func TestFixedQueueMerge(t *testing.T) {
	var e Engine
	q10 := e.NewFixedQueue(10)
	q5 := e.NewFixedQueue(5)
	q0 := e.NewFixedQueue(0)
	e.At(10, Event{A: 1})   // heap, t=10
	q10.Add(Event{A: 2})    // q10, t=10, after A=1
	q5.Add(Event{A: 3})     // q5, t=5
	e.At(5, Event{A: 4})    // heap, t=5, after A=3
	q0.Add(Event{A: 5})     // q0, t=0
	e.After(0, Event{A: 6}) // heap, t=0, after A=5
	q10.Add(Event{A: 7})    // q10, t=10, after A=2
	e.At(10, Event{A: 8})   // heap, t=10, after A=7

	want := []struct {
		at Time
		a  int64
	}{{0, 5}, {0, 6}, {5, 3}, {5, 4}, {10, 1}, {10, 2}, {10, 7}, {10, 8}}
	var got []string
	var ev Event
	for e.Next(&ev) {
		got = append(got, fmt.Sprintf("%d@%d", ev.A, ev.At))
	}
	var wants []string
	for _, w := range want {
		wants = append(wants, fmt.Sprintf("%d@%d", w.a, w.at))
	}
	if fmt.Sprint(got) != fmt.Sprint(wants) {
		t.Errorf("order\n got %v\nwant %v", got, wants)
	}
}

// TestFixedQueueGrowth adds entries ever faster while earlier ones fire, so
// the ring grows several times while it is wrapped around, with cancelled
// entries scattered in; exactly the live entries must fire, in order, each
// at its add time plus the delay.
func TestFixedQueueGrowth(t *testing.T) {
	const delay = time.Millisecond
	var e Engine
	q := e.NewFixedQueue(delay)
	type entry struct {
		h  Handle
		at Time
	}
	var added []entry // every entry, in order; A is the index
	cancelled := map[int64]bool{}
	nextLive := int64(0) // index of the next entry expected to fire
	expect := func(ev Event) {
		t.Helper()
		for cancelled[nextLive] {
			nextLive++
		}
		if ev.A != nextLive || ev.At != added[ev.A].at {
			t.Fatalf("fired entry %d at %v, want entry %d at %v", ev.A, ev.At, nextLive, added[nextLive].at)
		}
		nextLive++
	}
	r := Stream(3, 0)
	for phase := range 5 {
		for range 2000 { // one tick per µs; 2^phase entries per tick
			for range 1 << phase {
				i := int64(len(added))
				added = append(added, entry{q.Add(Event{A: i}), e.Now().Add(delay)})
				if r.IntN(4) == 0 { // cancel a random pending entry
					j := nextLive + int64(r.Uint64N(uint64(i-nextLive+1)))
					if !cancelled[j] && !e.Cancel(added[j].h) {
						t.Fatalf("Cancel(entry %d) = false while pending", j)
					}
					cancelled[j] = true
				}
			}
			var ev Event
			for e.NextUntil(e.Now()+Time(time.Microsecond), &ev) {
				expect(ev)
			}
		}
	}
	var ev Event
	for e.Next(&ev) {
		expect(ev)
	}
	for cancelled[nextLive] {
		nextLive++
	}
	if nextLive != int64(len(added)) {
		t.Errorf("%d of %d entries accounted for", nextLive, len(added))
	}
	if len(q.buf) < 8000 {
		t.Errorf("ring has %d slots; the test meant to grow it past 8000", len(q.buf))
	}
}
