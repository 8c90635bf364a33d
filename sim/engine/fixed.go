package engine

import "time"

// FixedQueue holds events that all fire the same delay after they are
// added, such as every client's request timeout. Because the delay is
// fixed, events leave in the order they came in, so the queue is a FIFO
// ring buffer: adding and firing cost O(1), however many events wait, where
// a heap would pay O(log n) for each. The engine merges the fronts of its
// fixed queues with the head of its heap when it picks the next event, so
// firing order is the same as if every event were in one heap: by time,
// then by scheduling order across the heap and all queues.
//
// Create one with [Engine.NewFixedQueue]; the zero FixedQueue is not usable.
// An engine may have any number of queues, one per distinct delay is
// typical. Entries are always cancelable, at no extra cost: [FixedQueue.Add]
// returns a [Handle]. The ring grows to the most entries the queue has held
// at once, cancelled ones included, and does not shrink. A FixedQueue
// belongs to its Engine and, like it, is not safe for concurrent use.
type FixedQueue struct {
	e     *Engine
	delay time.Duration
	id    uint32 // 1 + index in e.queues, stored in handles

	// Entry number p (counting every entry ever added, from 0) lives in
	// buf[p&mask] while head ≤ p < tail; bit p&mask of dead says whether
	// it was cancelled. len(buf) is zero or a power of two, at least 64.
	// Cancel sets a bit instead of writing the entry, which keeps it off
	// cache lines that the queue will not read again until the entry's time.
	// A million pending timeouts and as many cancelled ones fill 80 MB of
	// ring (40-byte events) and a 256 KiB bitmap; the ring is written and
	// read strictly in order, which the processor's prefetchers follow.
	buf        []Event
	dead       []uint64
	mask       uint64
	head, tail uint64
}

// NewFixedQueue returns a new queue on e whose events fire delay after they
// are added. It panics if delay is negative.
func (e *Engine) NewFixedQueue(delay time.Duration) *FixedQueue {
	if delay < 0 {
		panic("engine: negative fixed-queue delay")
	}
	q := &FixedQueue{e: e, delay: delay, id: uint32(len(e.queues) + 1)}
	if len(e.spare) > 0 {
		r := e.spare[0]
		e.spare[0] = ring{}
		e.spare = e.spare[1:]
		clear(r.dead)
		q.buf, q.dead, q.mask = r.buf, r.dead, uint64(len(r.buf)-1)
	}
	e.queues = append(e.queues, q)
	return q
}

// Delay returns the queue's delay.
func (q *FixedQueue) Delay() time.Duration { return q.delay }

// Len returns the number of entries the queue holds, including cancelled
// ones not yet discarded.
func (q *FixedQueue) Len() int { return int(q.tail - q.head) }

// Add schedules ev to fire at Now()+Delay() and returns a handle that can
// cancel it. As with [Engine.After], At and Seq are set by the engine.
func (q *FixedQueue) Add(ev Event) Handle {
	p := q.tail
	if p-q.head-1 >= uint64(len(q.buf))-1 { // empty or full: both rare
		return q.addSlow(ev)
	}
	e := q.e
	e.seq++
	at := e.now + Time(q.delay)
	if at < e.now {
		at = Never // saturate, as Time.Add does; delay ≥ 0
	}
	// Field by field: copying ev whole, or a composite literal, goes
	// through the stack, and the wide loads of that copy stall on the
	// narrow stores before them.
	b := &q.buf[p&q.mask]
	b.At, b.Seq, b.A, b.B, b.Target, b.Kind = at, e.seq, ev.A, ev.B, ev.Target, ev.Kind
	q.tail = p + 1
	return Handle{id: p, queue: q.id}
}

// addSlow is Add when the queue is empty (it then joins e.ready) or its
// ring is full (it then grows).
func (q *FixedQueue) addSlow(ev Event) Handle {
	e := q.e
	e.seq++
	if q.tail-q.head == uint64(len(q.buf)) {
		q.grow()
	}
	p := q.tail
	b := &q.buf[p&q.mask]
	b.At, b.Seq, b.A, b.B, b.Target, b.Kind = e.now.Add(q.delay), e.seq, ev.A, ev.B, ev.Target, ev.Kind
	q.tail++
	if q.tail-q.head == 1 {
		e.ready.push(q) // the queue was empty: it now has a front
	}
	return Handle{id: p, queue: q.id}
}

// grow doubles the ring, keeping entry p at buf[p&mask].
func (q *FixedQueue) grow() {
	n := max(2*len(q.buf), 64)
	buf := make([]Event, n)
	dead := make([]uint64, n/64)
	mask := uint64(n - 1)
	for p := q.head; p != q.tail; p++ {
		buf[p&mask] = q.buf[p&q.mask]
		if q.isDead(p) {
			dead[(p&mask)/64] |= 1 << (p % 64)
		}
	}
	q.buf, q.dead, q.mask = buf, dead, mask
}

// isDead reports whether entry p was cancelled.
func (q *FixedQueue) isDead(p uint64) bool {
	return q.dead[(p&q.mask)/64]&(1<<(p%64)) != 0
}

// front returns the earliest entry. The queue must not be empty.
func (q *FixedQueue) front() *Event { return &q.buf[q.head&q.mask] }

// frontDead reports whether the front entry was cancelled.
func (q *FixedQueue) frontDead() bool { return q.isDead(q.head) }

// drop removes the front entry. The queue must be non-empty and at the top
// of e.ready, which is where every queue the engine pops from is.
func (q *FixedQueue) drop() {
	q.dead[(q.head&q.mask)/64] &^= 1 << (q.head % 64)
	q.head++
	switch r := &q.e.ready; {
	case q.head == q.tail:
		r.popTop()
	case len(*r) > 1:
		r.fixTop()
	}
}

// pending reports whether entry p is still waiting: not yet fired and not
// cancelled.
func (q *FixedQueue) pending(p uint64) bool {
	return p-q.head < q.tail-q.head && !q.isDead(p) // p in [head, tail)
}

// cancel cancels entry p if it is pending and reports whether it was.
func (q *FixedQueue) cancel(p uint64) bool {
	if !q.pending(p) {
		return false
	}
	q.dead[(p&q.mask)/64] |= 1 << (p % 64)
	return true
}

// readyHeap is a binary min-heap of the non-empty fixed queues, ordered by
// their front entries, so the engine finds the earliest queued event in
// O(1) and keeps the order in O(log queues) when a front changes.
type readyHeap []*FixedQueue

func (h *readyHeap) push(q *FixedQueue) {
	s := append(*h, q)
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(q.front(), s[p].front()) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = q
	*h = s
}

// popTop removes the top queue, which has become empty.
func (h *readyHeap) popTop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s[n] = nil
	*h = s[:n]
	h.fixTop()
}

// fixTop restores the order after the top queue's front changed.
func (h *readyHeap) fixTop() {
	s := *h
	n := len(s)
	if n < 2 {
		return
	}
	q := s[0]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && before(s[c+1].front(), s[c].front()) {
			c++
		}
		if !before(s[c].front(), q.front()) {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = q
}
