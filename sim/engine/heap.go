package engine

import (
	"math"
	"math/bits"
	"unsafe"
)

// eventHeap is a 4-ary min-heap of events ordered by (At, Seq). The
// children of node i are 4i+1 … 4i+4 and its parent is (i−1)/4. A 4-ary
// heap is half as deep as a binary one and a node's children sit next to
// each other in memory, so a sift touches few cache lines.
//
// The heap keeps each event in two parallel arrays: k holds the sort keys,
// 16 bytes each, and v the rest, 32 bytes. Sifting compares keys only, so
// each level of a sift reads the four children's keys from one cache line
// (k is aligned so that every sibling group fills exactly one line) and
// then moves one key and one value. With whole 48-byte events in one array,
// as before, the four children's keys were spread over three or four
// lines. The split is most of the 10 % that BenchmarkEngine/pending1e6
// gained with it, whose heap of 10⁴ replies competes for the cache with
// 80 MB of ring and 24 MB of client state.
//
// Three refinements make the common step — deliver the earliest event,
// schedule a new one — cheap:
//
//   - Delivering leaves a hole at the root instead of refilling it at once.
//     If the next operation is a push, as it usually is, the new event drops
//     into the hole and sifts down: one sift instead of a sift-down of the
//     last event plus a sift-up of the new one. Any other operation refills
//     the hole first, with the last event.
//   - With random event times, the comparisons of a sift are coin flips that
//     a branch predictor gets wrong half the time, so the four children are
//     compared without branches, except in heaps too big for any cache; see
//     farHeap and bigHeap for the three variants.
//   - The four keys past the end always hold sentinels that sort after
//     every event, so every level compares exactly four children.
//
// Sifts move a hole rather than swapping: one copy per level, and the moving
// event is written once at the end.
type eventHeap struct {
	k    []hkey // cap(k) ≥ len(k)+4 and k[len(k):len(k)+4] are sentinels
	v    []hval // len(v) = len(k); v[i] goes with k[i]
	hole bool   // k[0], v[0] were delivered and are free
	sink uint64 // sum of the words the far and branchy sifts touch ahead
}

// hkey is an event's sort key: At with its sign bit flipped, so that
// unsigned order is time order, then Seq. Unsigned keys let a branch-free
// comparison use a two-word subtraction.
type hkey struct {
	at, seq uint64
}

// hval is the rest of a heap event. 32 bytes.
type hval struct {
	a, b   int64
	target uint32
	kind   Kind
	slot   uint32 // cancellation slot (index into Engine.slots), 0 if not cancelable
}

func makeKey(at Time, seq uint64) hkey { return hkey{uint64(at) ^ 1<<63, seq} }

// time returns the At the key was made from.
func (k *hkey) time() Time { return Time(k.at ^ 1<<63) }

// less reports whether key a sorts before key b. Sequence numbers are
// unique, so this is a strict total order.
func (a hkey) less(b hkey) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// sentinelKey sorts after every event, since events have Seq < MaxUint64.
var sentinelKey = hkey{math.MaxUint64, math.MaxUint64}

// The sift down has three variants, by heap length. The thresholds were
// measured on the development machine (1 MiB of L2 cache per core), running
// the hold model of BenchmarkEngine against the previous heap (whole 48-byte
// events in one array) in the same process, at 10² to 3·10⁶ events.
//
//   - Below farHeap events (768 KiB of keys and values, about what the L2
//     cache holds) the sift is branch-free: at each level it loads the four
//     children's keys, picks the earliest with conditional moves, and the
//     next level's address waits for that. In cache this is the fastest.
//   - From farHeap on, the branch-free sift first touches the four
//     children's values and the sixteen grandchildren's keys (two and four
//     cache lines; Go has no prefetch instruction, so these are plain loads
//     whose sum is kept in eventHeap.sink). The loads needed next are then
//     on their way while the comparisons wait for the current level.
//     Without this, heaps of 10⁵–10⁶ events were 20–30 % slower than the
//     one-array heap: a level's key and the winner's value, in different
//     lines, were separate round trips to memory.
//   - From bigHeap on, when most levels miss every cache, an ordinary
//     branchy loop (touching the grandchildren's keys too) wins, because the
//     processor speculatively loads the next level before it knows which
//     child won; at 10⁶ events the branch-free far sift is still 4 % faster.
const (
	farHeap = 1 << 14
	bigHeap = 1 << 21
)

func (h *eventHeap) len() int {
	if h.hole {
		return len(h.k) - 1
	}
	return len(h.k)
}

// top returns the earliest event's key; its value is h.v[0]. The heap must
// not be empty.
func (h *eventHeap) top() *hkey {
	if h.hole {
		h.fill()
	}
	return &h.k[0]
}

// pop copies the earliest event into dst and removes it, leaving the hole.
// The heap must not be empty.
func (h *eventHeap) pop(dst *Event) {
	k := h.top()
	v := &h.v[0]
	dst.At, dst.Seq, dst.A, dst.B, dst.Target, dst.Kind = k.time(), k.seq, v.a, v.b, v.target, v.kind
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
	n := len(h.k) - 1
	k, v := h.k[:n], h.v[:n]
	xk, xv := h.k[n], h.v[n]
	h.k[n] = sentinelKey
	h.k, h.v = k, v
	if n > 0 {
		i := h.siftDown(k, v, xk)
		k[i], v[i] = xk, xv
	}
}

// push adds the event with key (at, seq) and the rest xv.
func (h *eventHeap) push(at Time, seq uint64, xv hval) {
	xk := makeKey(at, seq)
	if h.hole {
		h.hole = false
		i := h.siftDown(h.k, h.v, xk)
		h.k[i], h.v[i] = xk, xv
		return
	}
	n := len(h.k)
	if cap(h.k) < n+5 {
		h.grow()
	}
	k, v := h.k[:n+1], h.v[:n+1]
	k[:n+5][n+4] = sentinelKey
	i := n
	for i > 0 {
		p := (i - 1) / 4
		if !xk.less(k[p]) {
			break
		}
		k[i], v[i] = k[p], v[p]
		i = p
	}
	k[i], v[i] = xk, xv
	h.k, h.v = k, v
}

// grow doubles the capacity of k and v.
func (h *eventHeap) grow() {
	n := len(h.k)
	c := max(2*cap(h.k), 64)
	k := alignedKeys(n, c)
	v := alignedVals(n, c)
	copy(k, h.k)
	copy(v, h.v)
	for i := n; i < n+4; i++ {
		k[:c][i] = sentinelKey
	}
	h.k, h.v = k, v
}

// alignedKeys returns keys of length n and capacity c whose element 0 sits
// 48 bytes past a 64-byte boundary (when the allocator allows): node i's
// children start at byte 64i+16, so every sibling group fills exactly one
// cache line.
func alignedKeys(n, c int) []hkey {
	buf := make([]hkey, c+3)
	for j := range 4 {
		if uintptr(unsafe.Pointer(&buf[j]))%64 == 48 {
			return buf[j : j+n : j+c]
		}
	}
	return buf[:n:c]
}

// alignedVals is alignedKeys for values: element 0 sits 32 bytes past a
// 64-byte boundary, so that every sibling group fills exactly two lines.
func alignedVals(n, c int) []hval {
	buf := make([]hval, c+1)
	for j := range 2 {
		if uintptr(unsafe.Pointer(&buf[j]))%64 == 32 {
			return buf[j : j+n : j+c]
		}
	}
	return buf[:n:c]
}

// siftDown moves the hole at the root of k and v to where the key x
// belongs, moving earlier events up, and returns the hole's final index.
// It does not write x.
func (h *eventHeap) siftDown(k []hkey, v []hval, x hkey) int {
	var i int
	var t uint64
	switch n := len(k); {
	case n < farHeap:
		i, _ = siftDownFlat(k, v, x, false)
		return i
	case n < bigHeap:
		i, t = siftDownFlat(k, v, x, true)
	default:
		i, t = siftDownBranchy(k, v, x)
	}
	h.sink += t // keeps the touching loads
	return i
}

// siftDownFlat is siftDown choosing among the children without branches.
// With random times the comparisons are coin flips that a branch predictor
// would get wrong half the time, so it makes them with two-word
// subtractions and conditional moves: the earlier of g[0] and g[1],
// likewise of g[2] and g[3], then the earlier of the two. Only the loop's
// exit, when x is no later than the earliest child, is a branch.
//
// With far set, each level first touches the children's values and the
// grandchildren's keys (see farHeap); it returns what it read so that the
// compiler keeps the loads.
func siftDownFlat(k []hkey, v []hval, x hkey, far bool) (int, uint64) {
	n := len(k)
	i := 0
	var t uint64
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		if far {
			if c+3 < n {
				t += uint64(v[c].a + v[c+2].a)
			}
			if gc := 4*c + 1; gc+12 < n {
				t += k[gc].at + k[gc+4].at + k[gc+8].at + k[gc+12].at
			}
		}
		g := k[c : c+4 : c+4] // may reach into the sentinels
		b01 := less128(g[1].at, g[1].seq, g[0].at, g[0].seq)
		a01, s01 := g[0].at, g[0].seq
		if b01 != 0 {
			a01, s01 = g[1].at, g[1].seq
		}
		b23 := less128(g[3].at, g[3].seq, g[2].at, g[2].seq)
		a23, s23 := g[2].at, g[2].seq
		if b23 != 0 {
			a23, s23 = g[3].at, g[3].seq
		}
		w := less128(a23, s23, a01, s01)
		if w != 0 {
			a01, s01 = a23, s23
		}
		if less128(a01, s01, x.at, x.seq) == 0 {
			break // x goes here
		}
		m := int(pick(w, b01, 2+b23) & 3)
		k[i] = hkey{a01, s01}
		v[i] = v[c+m]
		i = c + m
	}
	return i, t
}

// siftDownBranchy is siftDown with ordinary comparisons; like the far
// branch-free sift, it touches the grandchildren's keys.
func siftDownBranchy(k []hkey, v []hval, x hkey) (int, uint64) {
	n := len(k)
	i := 0
	var t uint64
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		if gc := 4*c + 1; gc+12 < n {
			t += k[gc].at + k[gc+4].at + k[gc+8].at + k[gc+12].at
		}
		g := k[c : c+4 : c+4]
		m := 0
		for j := 1; j < 4; j++ {
			if g[j].less(g[m]) {
				m = j
			}
		}
		if !g[m].less(x) {
			break
		}
		k[i] = g[m]
		v[i] = v[c+m]
		i = c + m
	}
	return i, t
}

// pick returns y if c is 1 and x if c is 0, without branching.
func pick(c, x, y uint64) uint64 {
	return x ^ (x^y)&-c
}

// less128 reports, as 1 or 0, whether the 128-bit number (xa, xs) is less
// than (ya, ys): the borrow out of their subtraction.
func less128(xa, xs, ya, ys uint64) uint64 {
	_, borrow := bits.Sub64(xs, ys, 0)
	_, borrow = bits.Sub64(xa, ya, borrow)
	return borrow
}
