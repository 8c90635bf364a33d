package engine

import (
	"math"
	"math/bits"
)

// eventHeap is a 4-ary min-heap of events ordered by [before]. The children
// of node i are 4i+1 … 4i+4 and its parent is (i−1)/4. A 4-ary heap is half
// as deep as a binary one and a node's children sit next to each other in
// memory, so a pop touches few cache lines.
//
// Three refinements make the common step — deliver the earliest event,
// schedule a new one — cheap:
//
//   - Delivering leaves a hole at the root instead of refilling it at once.
//     If the next operation is a push, as it usually is, the new event drops
//     into the hole and sifts down: one sift instead of a sift-down of the
//     last event plus a sift-up of the new one. Any other operation refills
//     the hole first.
//   - With random event times, the comparisons of a sift are coin flips that
//     a branch predictor gets wrong half the time, so while the heap is in
//     cache the four children are compared without branches. Past bigHeap
//     events, an ordinary branchy loop is faster (see bigHeap).
//   - The four slots past the end always hold sentinels that sort after
//     every event, so every level compares exactly four children.
//
// Sifts move a hole rather than swapping: one copy per level, and the moving
// event is written once at the end.
type eventHeap struct {
	s    []Event // cap(s) ≥ len(s)+4 and s[len(s):len(s)+4] are sentinels
	hole bool    // s[0] was delivered and is free
}

// sentinel sorts after every event, since events have Seq < MaxUint64.
// It is never modified.
var sentinel = Event{At: Never, Seq: math.MaxUint64}

// bigHeap is the heap length (6 MiB of events) from which sifting down
// uses branches. A branch-free sift makes each level's address wait for the
// previous level's data. While the heap is in cache that costs little and
// saves the mispredictions; once most levels miss the cache, a branchy sift
// wins, because the processor speculatively loads the next level before it
// knows which child won. On the development machine the branch-free sift
// was about 25 % faster at 10⁴ events and the branchy one about 30 % faster
// at 10⁶.
const bigHeap = 1 << 17

func (h *eventHeap) len() int {
	if h.hole {
		return len(h.s) - 1
	}
	return len(h.s)
}

// top returns the earliest event. The heap must not be empty.
func (h *eventHeap) top() *Event {
	if h.hole {
		h.fill()
	}
	return &h.s[0]
}

// pop copies the earliest event into dst and removes it, leaving the hole.
// The heap must not be empty.
func (h *eventHeap) pop(dst *Event) {
	*dst = *h.top()
	h.hole = true
}

// remove removes the earliest event. The heap must not be empty.
func (h *eventHeap) remove() {
	h.top()
	h.hole = true
}

// fill refills the hole at the root with the last event.
func (h *eventHeap) fill() {
	h.hole = false
	s := h.s
	n := len(s) - 1
	last := s[n]
	s[n] = sentinel
	s = s[:n]
	h.s = s
	if n > 0 {
		s[siftDown(s, &last)] = last
	}
}

// push adds ev.
func (h *eventHeap) push(ev Event) {
	if h.hole {
		h.hole = false
		h.s[siftDown(h.s, &ev)] = ev
		return
	}
	s := h.s
	n := len(s)
	if cap(s) < n+5 {
		s = make([]Event, n, max(2*cap(s), 64))
		copy(s, h.s)
		for i := n; i < n+4; i++ {
			s[:cap(s)][i] = sentinel
		}
	}
	s = s[:n+1]
	s[:n+5][n+4] = sentinel
	i := n
	for i > 0 {
		p := (i - 1) / 4
		if !before(&ev, &s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = ev
	h.s = s
}

// siftDown moves the hole at the root of s down to where x belongs, moving
// earlier children up, and returns the hole's final index. It does not
// write x.
func siftDown(s []Event, x *Event) int {
	if len(s) >= bigHeap {
		return siftDownBranchy(s, x)
	}
	return siftDownFlat(s, x)
}

// siftDownFlat is siftDown without data-dependent branches. At each level
// it loads the four children's keys, picks the earliest with two rounds of
// branch-free selects on registers, and stops when x is earlier.
func siftDownFlat(s []Event, x *Event) int {
	n := len(s)
	xa, xs := key(x)
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			return i
		}
		k := s[c : c+4 : c+4] // may reach into the sentinels
		a0, s0 := key(&k[0])
		a1, s1 := key(&k[1])
		a2, s2 := key(&k[2])
		a3, s3 := key(&k[3])
		p := less128(a1, s1, a0, s0) // winner of k[0], k[1] is k[p]
		ap, sp := pick(p, a0, a1), pick(p, s0, s1)
		q := less128(a3, s3, a2, s2) // winner of k[2], k[3] is k[2+q]
		aq, sq := pick(q, a2, a3), pick(q, s2, s3)
		w := less128(aq, sq, ap, sp) // 1 if k[2+q] beats k[p]
		if less128(pick(w, ap, aq), pick(w, sp, sq), xa, xs) == 0 {
			return i
		}
		m := pick(w, p, 2+q) & 3
		s[i] = k[m]
		i = c + int(m)
	}
}

// siftDownBranchy is siftDown with ordinary comparisons.
func siftDownBranchy(s []Event, x *Event) int {
	n := len(s)
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			return i
		}
		k := s[c : c+4 : c+4]
		m := 0
		for j := 1; j < 4; j++ {
			if before(&k[j], &k[m]) {
				m = j
			}
		}
		if !before(&k[m], x) {
			return i
		}
		s[i] = k[m]
		i = c + m
	}
}

// key returns an event's sort key as two unsigned words: At with its sign
// bit flipped, so that unsigned order is signed order, and Seq.
func key(ev *Event) (uint64, uint64) {
	return uint64(ev.At) ^ 1<<63, ev.Seq
}

// less128 reports, as 1 or 0, whether the 128-bit number (xa, xs) is less
// than (ya, ys): the borrow out of their subtraction.
func less128(xa, xs, ya, ys uint64) uint64 {
	_, borrow := bits.Sub64(xs, ys, 0)
	_, borrow = bits.Sub64(xa, ya, borrow)
	return borrow
}

// pick returns y if c is 1 and x if c is 0, without branching.
func pick(c, x, y uint64) uint64 {
	return x ^ (x^y)&-c
}
