package engine

import (
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
		{"big", bigHeap + 5000, 1 << 12, false}, // exercises the branchy sift
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
				ev := Event{At: Time(r.Uint64N(uint64(tt.span))), Seq: seq, A: int64(seq)}
				h.push(ev)
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
		h.push(Event{At: at, Seq: seq})
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
			if got := h.top().At; got != st.at {
				t.Fatalf("step %d: top got %d, want %d", i, got, st.at)
			}
		}
		if got := h.len(); got != st.want {
			t.Fatalf("step %d (%s): len %d, want %d", i, st.op, got, st.want)
		}
	}
}

// TestSiftVariants checks that the branch-free and the branchy sift agree.
func TestSiftVariants(t *testing.T) {
	r := Stream(2, 0)
	for n := 1; n < 300; n += 7 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var h eventHeap
			for i := range n {
				h.push(Event{At: Time(r.Uint64N(20)), Seq: uint64(i + 1)})
			}
			x := Event{At: Time(r.Uint64N(20)), Seq: uint64(n + 1)}
			a := slices.Clone(h.s[:n+4])
			b := slices.Clone(h.s[:n+4])
			ia := siftDownFlat(a[:n], &x)
			ib := siftDownBranchy(b[:n], &x)
			if ia != ib || !slices.Equal(a, b) {
				t.Fatalf("flat sift ended at %d, branchy at %d", ia, ib)
			}
		})
	}
}
