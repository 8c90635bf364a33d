package engine

import (
	"container/heap"
	"fmt"
	"slices"
	"testing"
)

// TestHeapOrder pushes events with random times, many of them equal, and
// checks that the heap pops them in the order of a stable sort by time of
// the insertion order: earliest first, ties first-in first-out.
func TestHeapOrder(t *testing.T) {
	tests := []struct {
		name  string
		n     int  // events
		span  int  // times are drawn from [0, span): small spans mean many ties
		mixed bool // interleave pops with pushes
	}{
		{"one", 1, 1, false},
		{"all-equal", 500, 1, false},
		{"few-times", 2000, 7, false},
		{"some-ties", 5000, 1000, false},
		{"distinct", 5000, 1 << 40, false},
		{"mixed-ties", 10000, 50, true},
		{"mixed-distinct", 10000, 1 << 40, true},
		{"far", farHeap + 5000, 1 << 12, false}, // exercises the far sift (TestSiftVariants covers the branchy one)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Stream(1, uint64(tt.n))
			var h eventHeap
			var want []Event // pending events, stably sorted by time: the order they must pop in
			var got, ref []Event
			pop := func() {
				var ev Event
				h.pop(&ev)
				got = append(got, ev)
				ref = append(ref, want[0])
				want = want[1:]
			}
			for seq := uint64(1); seq <= uint64(tt.n); seq++ {
				ev := Event{At: Time(r.Uint64N(uint64(tt.span))), Seq: seq, A: int64(seq), B: -int64(seq), Target: uint32(seq), Kind: Kind(seq)}
				h.pushEvent(ev)
				if !tt.mixed {
					want = append(want, ev)
					continue
				}
				// Insert after every event with the same time: FIFO among ties.
				i, _ := slices.BinarySearchFunc(want, ev.At+1, func(e Event, t Time) int { return cmpTime(e.At, t) })
				want = slices.Insert(want, i, ev)
				if r.IntN(3) == 0 {
					pop()
				}
			}
			slices.SortStableFunc(want, func(a, b Event) int { return cmpTime(a.At, b.At) })
			for len(want) > 0 {
				pop()
			}
			if h.len() != 0 {
				t.Fatalf("heap holds %d events after popping all", h.len())
			}
			if len(got) != len(ref) {
				t.Fatalf("popped %d events, want %d", len(got), len(ref))
			}
			for i := range got {
				if got[i] != ref[i] {
					t.Fatalf("pop %d: got (At %d, Seq %d), want (At %d, Seq %d)",
						i, got[i].At, got[i].Seq, ref[i].At, ref[i].Seq)
				}
			}
		})
	}
}

func cmpTime(a, b Time) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestHeapHole checks the deferred refill of the root: pops followed by
// pushes, pops, peeks and length queries in every combination.
func TestHeapHole(t *testing.T) {
	var h eventHeap
	seq := uint64(0)
	push := func(at Time) {
		seq++
		h.pushEvent(Event{At: at, Seq: seq})
	}
	pop := func() Time {
		var ev Event
		h.pop(&ev)
		return ev.At
	}
	for _, at := range []Time{5, 3, 9, 1} {
		push(at)
	}
	steps := []struct {
		op   string
		at   Time // push: time; pop, top: wanted time
		want int  // wanted len after the step
	}{
		{"pop", 1, 3},
		{"push", 4, 4}, // fills the hole
		{"pop", 3, 3},
		{"top", 4, 3}, // refills the hole
		{"pop", 4, 2},
		{"pop", 5, 1},
		{"push", 2, 2},
		{"push", 7, 3},
		{"pop", 2, 2},
		{"pop", 7, 1},
		{"pop", 9, 0},
		{"push", 6, 1},
		{"pop", 6, 0},
	}
	for i, st := range steps {
		switch st.op {
		case "push":
			push(st.at)
		case "pop":
			if got := pop(); got != st.at {
				t.Fatalf("step %d: pop got %d, want %d", i, got, st.at)
			}
		case "top":
			if got := h.top().time(); got != st.at {
				t.Fatalf("step %d: top got %d, want %d", i, got, st.at)
			}
		}
		if got := h.len(); got != st.want {
			t.Fatalf("step %d (%s): len %d, want %d", i, st.op, got, st.want)
		}
	}
}

// TestSiftVariants checks that the three sifts agree: each must leave the
// heap arrays and the hole exactly as the others do.
func TestSiftVariants(t *testing.T) {
	r := Stream(2, 0)
	var sizes []int
	for n := 1; n < 300; n += 7 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, farHeap+300) // past the far threshold
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var h eventHeap
			for i := range n {
				h.pushEvent(Event{At: Time(r.Uint64N(20)), Seq: uint64(i + 1), A: int64(i)})
			}
			x := makeKey(Time(r.Uint64N(20)), uint64(n+1))
			sifts := []struct {
				name string
				sift func(k []hkey, v []hval, x hkey) int
			}{
				{"near", func(k []hkey, v []hval, x hkey) int { i, _ := siftDownFlat(k, v, x, false); return i }},
				{"far", func(k []hkey, v []hval, x hkey) int { i, _ := siftDownFlat(k, v, x, true); return i }},
				{"branchy", func(k []hkey, v []hval, x hkey) int { i, _ := siftDownBranchy(k, v, x); return i }},
			}
			var k0 []hkey
			var v0 []hval
			var i0 int
			for j, s := range sifts {
				k, v := slices.Clone(h.k[:n+4]), slices.Clone(h.v)
				i := s.sift(k[:n], v, x)
				if j == 0 {
					k0, v0, i0 = k, v, i
					continue
				}
				if i != i0 || !slices.Equal(k, k0) || !slices.Equal(v, v0) {
					t.Fatalf("%s sift ended at %d, %s at %d, or left other arrays", s.name, i, sifts[0].name, i0)
				}
			}
		})
	}
}

// pushEvent pushes ev with its own At and Seq.
func (h *eventHeap) pushEvent(ev Event) {
	h.push(ev.At, ev.Seq, hval{a: ev.A, b: ev.B, target: ev.Target, kind: ev.Kind})
}

// refHeap is container/heap over events ordered by (At, Seq): the reference
// for TestHeapMatchesReference.
type refHeap []Event

func (r refHeap) Len() int           { return len(r) }
func (r refHeap) Less(i, j int) bool { return before(&r[i], &r[j]) }
func (r refHeap) Swap(i, j int)      { r[i], r[j] = r[j], r[i] }
func (r *refHeap) Push(x any)        { *r = append(*r, x.(Event)) }
func (r *refHeap) Pop() any {
	old := *r
	ev := old[len(old)-1]
	*r = old[:len(old)-1]
	return ev
}

// TestHeapMatchesReference drives eventHeap and container/heap with the
// same random pushes, pops, removals and peeks, and checks that every
// popped event, every peeked time and every length agree. The heaps grow
// past farHeap and shrink back, so both sifts and the switch between them
// are exercised, with many equal times.
func TestHeapMatchesReference(t *testing.T) {
	tests := []struct {
		name  string
		grow  int    // pushes before the mixed phase
		span  uint64 // times are now + [0, span)
		pushP int    // percent of mixed steps that push
		steps int
	}{
		{"small-ties", 50, 4, 50, 20000},
		{"small-distinct", 100, 1 << 40, 50, 20000},
		{"cross-far", farHeap - 2000, 1000, 55, 8000},
		{"far-shrink", farHeap + 3000, 1 << 30, 30, 12000},
		{"far-ties", farHeap + 500, 16, 50, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Stream(5, tt.span)
			var h eventHeap
			var ref refHeap
			var now Time
			seq := uint64(0)
			push := func() {
				seq++
				ev := Event{At: now + Time(r.Uint64N(tt.span)), Seq: seq, A: int64(seq), B: -int64(seq), Target: uint32(seq * 7), Kind: Kind(seq % 5)}
				h.pushEvent(ev)
				heap.Push(&ref, ev)
			}
			for range tt.grow {
				push()
			}
			for step := range tt.steps {
				switch op := r.IntN(100); {
				case op < tt.pushP:
					push()
				case ref.Len() == 0:
					continue
				case op < tt.pushP+5: // peek
					if got, want := h.top().time(), ref[0].At; got != want {
						t.Fatalf("step %d: top at %d, want %d", step, got, want)
					}
				case op < tt.pushP+10: // remove without delivering
					h.remove()
					heap.Pop(&ref)
				default:
					var got Event
					h.pop(&got)
					want := heap.Pop(&ref).(Event)
					if got != want {
						t.Fatalf("step %d: popped %+v, want %+v", step, got, want)
					}
					now = got.At
				}
				if h.len() != ref.Len() {
					t.Fatalf("step %d: len %d, want %d", step, h.len(), ref.Len())
				}
			}
			for ref.Len() > 0 {
				var got Event
				h.pop(&got)
				if want := heap.Pop(&ref).(Event); got != want {
					t.Fatalf("drain: popped %+v, want %+v", got, want)
				}
			}
			if h.len() != 0 {
				t.Fatalf("len %d after draining", h.len())
			}
		})
	}
}
