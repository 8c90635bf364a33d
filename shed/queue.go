package shed

import (
	"math/bits"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// Item is a request in a [Queue]: the caller's payload and what the queue
// needs to rank and expire it. It is plain data; the zero Item is a first try
// of criticality critical with no deadline.
type Item[T any] struct {
	// Payload identifies the request to the caller, such as a request id
	// in the simulator or a waiter index in middleware. The queue only
	// stores it.
	Payload T
	// Attempt is the attempt number from the wire: 1 for a first try, 2
	// for the first retry, and so on. A value below 1 counts as 1.
	Attempt int
	// Criticality is the request's criticality from the wire. Only
	// Priority criticality reads it; a value beyond the known levels
	// counts as the nearest one.
	Criticality wire.Criticality
	// Deadline is when the caller stops waiting; the zero Time means none.
	Deadline time.Time
	// Enqueued is when the item entered the queue. PushAt sets it to its
	// now argument; the value passed in is ignored.
	Enqueued time.Time
}

// IsRetry reports whether the item is a retry: its attempt number is above 1.
func (it Item[T]) IsRetry() bool { return it.Attempt > 1 }

// Handle identifies an item that [Queue.PushAt] admitted, so that the caller
// can take it back with [Queue.Remove]. Once the item has left the queue the
// handle identifies nothing, even after its storage is reused. The zero
// Handle identifies nothing.
type Handle struct {
	slot int32
	gen  uint32
}

// Admission is the outcome of [Queue.PushAt]. Two things may have happened,
// independently: the newcomer was admitted or refused, and a queued item may
// have been given up to make room for it. The caller answers each item given
// up with its reason.
type Admission[T any] struct {
	// Refused is None if the newcomer was queued, or else why it was not:
	// QueueFull or Expired.
	Refused Reason
	// Handle identifies the queued newcomer; it is the zero Handle if the
	// newcomer was refused.
	Handle Handle
	// VictimReason is None, or why Victim left the queue to make room:
	// Evicted, or Expired or QueueTimeout if it would have been dropped
	// anyway.
	VictimReason Reason
	// Victim is the item given up; the zero Item if VictimReason is None.
	Victim Item[T]
}

// Admitted reports whether the newcomer was queued.
func (a Admission[T]) Admitted() bool { return a.Refused == None }

// HasVictim reports whether a queued item was given up to make room.
func (a Admission[T]) HasVictim() bool { return a.VictimReason != None }

// numClasses is the number of priority classes: four criticalities times
// first try or retry. Class 0 is the best.
const numClasses = 8

// Priority codes, so that ranking compares no strings.
const (
	prioNone uint8 = iota
	prioFirstTries
	prioCriticality
)

var prioCodes = map[Priority]uint8{NoPriority: prioNone, FirstTries: prioFirstTries, ByCriticality: prioCriticality}

// noSlot marks the end of a list and an item absent from the heap.
const noSlot = -1

// Queue is an admission queue of items carrying a payload of type T. It
// ranks items into classes by [Config.Priority], serves the best class
// first in [Config.Order], sheds from the worst class when full, and drops
// items at their deadline; the package documentation gives the rules.
//
// The rules in detail:
//
//   - PushAt refuses a newcomer with Expired if its deadline leaves
//     MinRemaining or less. Otherwise, if the queue is full, it first gives
//     up an item whose time is up (with its reason, and as if it had left
//     when it fell due); failing that it compares the newcomer with the item
//     it would serve last: the newest item of the worst class (the oldest if
//     that class is served newest first). If the newcomer would be served
//     first, that item is Evicted; otherwise the newcomer is refused with
//     QueueFull. So a full queue keeps the Capacity items it would serve
//     first, and retries are shed before any first try.
//   - PopAt returns items whose time is up, earliest first, each with its
//     reason, before it returns one to serve; so an item returned to serve
//     always has more than MinRemaining left before its deadline.
//   - An item's time is up at Deadline − MinRemaining, or with Order
//     adaptive-lifo at its queue timeout if that is earlier. It is decided
//     when the item is pushed; [Queue.NextExpiry] says when the next one
//     falls due, so that a timer or a simulation event can call
//     [Queue.ExpireAt] exactly then.
//
// For example, with the zero Config (first tries first, FIFO) and capacity 3
// holding first try F1 and retries R1, R2, pushed in that order: pushing
// first try F2 evicts R2, the newest of the worst class, and PopAt then
// serves F1, F2, R1; pushing retry R3 instead would be refused with
// QueueFull, as R3 would be served after R1 and R2.
//
// All methods run in constant time except that adding or removing an item
// with a deadline costs O(log n). Storage grows on demand, doubling, up to
// the capacity, so a large capacity costs nothing until it is used; once
// grown, no method allocates, and [Queue.Reuse] lets a new queue start on
// the storage of one that is done with. A Queue is not safe
// for concurrent use. The zero Queue has capacity 0 and refuses every item
// with QueueFull: build one with [New].
//
// A queue of one class served in FIFO or LIFO order (Priority none, Order
// fifo or lifo: a plain queue, such as a simulated thread pool's) keeps
// its items in a ring, in push order, until it is first given an item
// with a deadline or asked to Remove one; from then on it keeps them in
// linked lists, as every other queue does. The rules, the answers and the
// handles are the same either way; the ring only saves the links.
type Queue[T any] struct {
	slots []slot[T]   // grows on demand up to capacity
	cap   int         // Config.Capacity
	heap  []heapEntry // the items that can expire, soonest first
	free  int32       // head of the free list, linked through slot.next
	n     int

	classes  [numClasses]list
	nonEmpty uint8 // bit c is set iff classes[c] holds items

	lastEmpty      time.Time             // when the queue last went from empty to not empty
	classLastEmpty [numClasses]time.Time // the same for each class
	seq            uint64                // pushes so far; orders ties in the heap
	epoch          time.Time             // origin of the heap's keys
	hasEpoch       bool

	cfg          Config
	prio         uint8 // prioNone, prioFirstTries or prioCriticality
	lifo         bool  // Order lifo
	adaptive     bool  // Order adaptive-lifo
	target       time.Duration
	interval     time.Duration
	minRemaining time.Duration

	counts [2]Counts // first tries, retries

	// ring: the items are ritems[rhead], ritems[rhead+1], … (wrapping
	// at len(ritems)), oldest first, q.n of them; rtail is one past the
	// newest. The slots, the free list, the class lists and the expiry
	// heap are then unused. A queue starts as a ring if it may stay one
	// (Priority none, Order fifo or lifo), and becomes a list queue
	// (toList) for good when it meets an item with a deadline or a
	// Remove: its items then move to the slots of the same index, so that
	// their handles still find them.
	ring         bool
	ritems       []ringItem[T]
	rhead, rtail int32
}

// ringItem is an item in a ring and its place's generation: an Item
// without its Deadline (a ring holds none), 48 bytes for an 8-byte
// payload where a slot takes 128, so that a long queue of a plain thread
// pool (a simulated storm's) touches less memory.
type ringItem[T any] struct {
	payload  T
	attempt  int
	enqueued time.Time
	gen      uint32
	crit     wire.Criticality
	used     bool
}

// list is a doubly linked list of slots, oldest (head) to newest (tail).
type list struct{ head, tail int32 }

type slot[T any] struct {
	item       Item[T]
	expiry     time.Time // when its time is up; meaningful only if pos != noSlot
	seq        uint64
	prev, next int32
	pos        int32 // index in the heap, or noSlot
	gen        uint32
	class      uint8
	timeout    bool // expiry is the adaptive queue timeout, not the deadline
	used       bool
}

// New validates c, fills its defaults and builds a Queue with room for
// min(c.Capacity, 64) items, allocated now; the rest comes as it is used
// (see [Queue]): about 130 bytes per item (50 in a plain queue's ring)
// plus the payload's size.
func New[T any](c Config) (*Queue[T], error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.WithDefaults()
	q := &Queue[T]{
		cap:          c.Capacity,
		cfg:          c,
		prio:         prioCodes[c.Priority],
		lifo:         c.Order == LIFO,
		adaptive:     c.Order == AdaptiveLIFO,
		target:       c.CoDelTarget,
		interval:     c.CoDelInterval,
		minRemaining: c.MinRemaining,
	}
	for i := range q.classes {
		q.classes[i] = list{noSlot, noSlot}
	}
	if q.ring = q.prio == prioNone && !q.adaptive; q.ring {
		q.ritems = make([]ringItem[T], min(c.Capacity, initialSlots))
		q.free = noSlot
		return q, nil
	}
	q.slots = make([]slot[T], min(c.Capacity, initialSlots))
	q.heap = make([]heapEntry, 0, min(c.Capacity, initialSlots))
	for i := range q.slots {
		q.slots[i].next = int32(i + 1)
		q.slots[i].pos = noSlot
	}
	q.slots[len(q.slots)-1].next = noSlot // Validate ensures Capacity ≥ 1
	return q, nil
}

// Reuse makes q use the storage old has grown, so that a program that
// builds one queue after another (the simulator, run after run) does not
// grow the same arrays again. q must be new: built by [New], nothing pushed
// yet. old must not be used afterwards; its storage is cleared as q grows
// into it, so q behaves exactly as a new queue would. Reuse does nothing if
// old is q itself, and takes none of old's storage that has less room
// than q's (a plain queue's ring takes a ring, others take slots).
func (q *Queue[T]) Reuse(old *Queue[T]) {
	if old == nil || old == q || q.seq != 0 {
		return
	}
	if len(q.slots) > 0 && cap(old.slots) >= len(q.slots) {
		slots := old.slots[:len(q.slots)]
		copy(slots, q.slots) // q's fresh free list
		q.slots = slots
	}
	if len(q.ritems) > 0 && cap(old.ritems) >= len(q.ritems) {
		r := old.ritems[:len(q.ritems)]
		clear(r)
		q.ritems = r
	}
	if cap(old.heap) > cap(q.heap) {
		q.heap = old.heap[:0]
	}
	old.slots, old.ritems, old.heap, old.free, old.cap = nil, nil, nil, noSlot, 0
}

// Config returns the queue's configuration, defaults filled in.
func (q *Queue[T]) Config() Config { return q.cfg }

// Len returns the number of items in the queue.
func (q *Queue[T]) Len() int { return q.n }

// Cap returns the most items the queue holds.
func (q *Queue[T]) Cap() int { return q.cap }

// initialSlots is how many slots New allocates; the rest come on demand.
const initialSlots = 64

// grow doubles the slots (up to the capacity) and links the new ones into
// the free list. It is called only when the free list is empty and the
// queue holds fewer items than its capacity.
func (q *Queue[T]) grow() {
	old := len(q.slots)
	n := min(q.cap, 2*old)
	q.slots = append(q.slots, make([]slot[T], n-old)...)
	for i := old; i < n; i++ {
		q.slots[i].next = int32(i + 1)
		q.slots[i].pos = noSlot
	}
	q.slots[n-1].next = q.free
	q.free = int32(old)
}

// Stats returns the queue's counters.
func (q *Queue[T]) Stats() Stats { return Stats{FirstTries: q.counts[0], Retries: q.counts[1]} }

// Overloaded reports whether the queue as a whole is overloaded at now: it
// holds items and has not been empty since now − CoDelInterval or earlier.
// It is a signal for metrics and for [Decide]; adaptive LIFO acts on the
// same test applied to each priority class, see the package documentation.
func (q *Queue[T]) Overloaded(now time.Time) bool {
	return q.n > 0 && !now.Before(q.lastEmpty.Add(q.interval))
}

// newestFirst reports whether the queue serves the newest item of class c
// first at now: always under LIFO, and under adaptive LIFO while the class
// is overloaded (not empty since now − CoDelInterval or earlier). The
// caller knows that c holds items.
func (q *Queue[T]) newestFirst(now time.Time, c uint8) bool {
	return q.lifo || q.adaptive && !now.Before(q.classLastEmpty[c].Add(q.interval))
}

// rank returns the class of it, 0 being the best.
func (q *Queue[T]) rank(it *Item[T]) uint8 {
	var r uint8
	if it.Attempt > 1 {
		r = 1
	}
	switch q.prio {
	case prioFirstTries:
		return r
	case prioCriticality:
		c := min(max(it.Criticality, wire.Sheddable), wire.CriticalPlus)
		return uint8(wire.CriticalPlus-c)*2 + r
	}
	return 0
}

// kind indexes counts: 0 for a first try, 1 for a retry.
func kind[T any](it *Item[T]) int {
	if it.Attempt > 1 {
		return 1
	}
	return 0
}

// PushAt offers item it to the queue at now and reports what happened: see
// [Admission] and, for the rules, [Queue]. The caller answers a refused
// newcomer with a.Refused and a victim with a.VictimReason.
func (q *Queue[T]) PushAt(now time.Time, it Item[T]) (a Admission[T]) {
	// A small wrapper, inlined into the caller: the item is built in the
	// caller's frame and push works on it and on the result in place,
	// instead of both being copied through the call's stack arguments.
	q.push(now, &it, &a)
	return a
}

// PushTo is [Queue.PushAt] for a caller that keeps the item and the outcome
// in its own storage: it offers *it at now, as PushAt offers its item, and
// stores what PushAt would return in *a. It reads *it and does not change
// it. A hot caller saves the copies of the item and of the Admission (88
// bytes for a small payload) that PushAt's arguments and result take.
func (q *Queue[T]) PushTo(now time.Time, it *Item[T], a *Admission[T]) {
	*a = Admission[T]{}
	q.push(now, it, a)
}

// push is PushAt on the caller's item, filling in a, which is zero.
func (q *Queue[T]) push(now time.Time, it *Item[T], a *Admission[T]) {
	if q.ring {
		// The common case of a ring, without the rest of push: no
		// deadline, not full, room at the ring's tail.
		if i := q.rtail; q.n < q.cap && int(i) < len(q.ritems) && q.n < len(q.ritems) && it.Deadline.IsZero() {
			k := kind(it)
			q.counts[k].Pushed++
			if q.n == 0 {
				q.lastEmpty, q.classLastEmpty[0] = now, now
			}
			a.Handle = Handle{slot: i, gen: q.ringPut(i, now, it, k)}
			return
		}
		if !it.Deadline.IsZero() {
			q.toList()
		}
	}
	k := kind(it)
	q.counts[k].Pushed++
	if !it.Deadline.IsZero() && !now.Before(it.Deadline.Add(-q.minRemaining)) {
		q.counts[k].Expired++
		a.Refused = Expired
		return
	}
	r := q.rank(it)
	full := q.n >= q.cap
	if full && len(q.heap) > 0 && !now.Before(q.slots[q.heap[0].slot].expiry) {
		a.Victim, a.VictimReason = q.expireTop()
		full = false
	}
	// Whether the queue and the newcomer's class were empty is judged
	// after a due item left, as if ExpireAt had dropped it on time, but
	// before an eviction, which never counts as either going empty.
	wasEmpty, classWasEmpty := q.n == 0, q.nonEmpty&(1<<r) == 0
	if full {
		if q.n == 0 { // capacity 0
			q.counts[k].Full++
			a.Refused = QueueFull
			return
		}
		w := uint8(7 - bits.LeadingZeros8(q.nonEmpty))
		newest := q.newestFirst(now, w)
		if r > w || r == w && !newest {
			q.counts[k].Full++
			a.Refused = QueueFull
			return
		}
		if q.ring {
			q.ringTake(newest, &a.Victim) // serving newest first, it would serve the oldest last
		} else {
			i := q.classes[w].tail
			if newest {
				i = q.classes[w].head
			}
			q.remove(i, &a.Victim)
		}
		a.VictimReason = Evicted
		q.counts[kind(&a.Victim)].Evicted++
	}
	if wasEmpty {
		q.lastEmpty = now
	}
	if classWasEmpty {
		q.classLastEmpty[r] = now
	}

	if q.ring && q.ringPlace(now, it, a) {
		return
	}
	if q.free == noSlot {
		q.grow()
	}
	i := q.free
	s := &q.slots[i]
	q.free = s.next
	s.used = true
	s.gen++
	if s.gen == 0 { // the zero Handle must never match
		s.gen = 1
	}
	s.item = *it
	s.item.Enqueued = now
	s.class = r
	q.seq++
	s.seq = q.seq

	q.link(&q.classes[r], i)
	q.nonEmpty |= 1 << r
	q.n++
	q.counts[k].Queued++

	hasExpiry := false
	if !it.Deadline.IsZero() {
		s.expiry, s.timeout, hasExpiry = it.Deadline.Add(-q.minRemaining), false, true
	}
	if q.adaptive {
		t := now.Add(q.target)
		if o := q.classLastEmpty[r].Add(q.interval); o.After(t) {
			t = o
		}
		if !hasExpiry || t.Before(s.expiry) {
			s.expiry, s.timeout, hasExpiry = t, true, true
		}
	}
	if hasExpiry {
		q.heapPush(now, s.expiry, i)
	}
	a.Handle = Handle{slot: i, gen: s.gen}
}

// PopAt removes and returns the next item at now. If an item's time is up it
// returns that one (the earliest due) with its reason, Expired or
// QueueTimeout, and the caller answers it and calls again; otherwise it
// returns the item to serve with why None. ok is false only when the queue
// is empty. The usual loop:
//
//	for {
//		it, why, ok := q.PopAt(now)
//		if !ok {
//			break // nothing to serve
//		}
//		if why != shed.None {
//			reject(it, why)
//			continue
//		}
//		serve(it)
//		break
//	}
func (q *Queue[T]) PopAt(now time.Time) (it Item[T], why Reason, ok bool) {
	// Inlined into the caller, as PushAt is: pop fills the caller's item.
	why, ok = q.pop(now, &it)
	return it, why, ok
}

// pop is PopAt filling in the caller's item it, which is zero.
func (q *Queue[T]) pop(now time.Time, it *Item[T]) (why Reason, ok bool) {
	if q.n == 0 {
		return None, false
	}
	if q.ring && !q.lifo {
		// A FIFO ring's oldest, as ringTake takes it, written here.
		i := q.rhead
		if q.rhead++; int(q.rhead) == len(q.ritems) {
			q.rhead = 0
		}
		r := &q.ritems[i]
		it.Payload, it.Attempt, it.Criticality, it.Enqueued = r.payload, r.attempt, r.crit, r.enqueued
		var none T
		r.payload = none
		r.used = false
		if q.n--; q.n == 0 {
			q.nonEmpty = 0
			q.rhead, q.rtail = 0, 0
		}
		k := kind(it)
		q.counts[k].Queued--
		q.counts[k].Served++
		return None, true
	}
	if q.ring {
		q.ringTake(false, it)
		q.counts[kind(it)].Served++
		return None, true
	}
	if len(q.heap) > 0 && !now.Before(q.slots[q.heap[0].slot].expiry) {
		*it, why = q.expireTop()
		return why, true
	}
	c := uint8(bits.TrailingZeros8(q.nonEmpty))
	l := &q.classes[c]
	i := l.head
	if q.newestFirst(now, c) {
		i = l.tail
	}
	q.remove(i, it)
	q.counts[kind(it)].Served++
	return None, true
}

// ExpireAt removes and returns one item whose time is up at now, the
// earliest due, with its reason (Expired or QueueTimeout); ok is false if
// there is none. Call it until ok is false when [Queue.NextExpiry] falls due,
// to drop queued work at its deadline rather than when PopAt meets it.
func (q *Queue[T]) ExpireAt(now time.Time) (it Item[T], why Reason, ok bool) {
	if len(q.heap) == 0 || now.Before(q.slots[q.heap[0].slot].expiry) {
		return it, None, false
	}
	it, why = q.expireTop()
	return it, why, true
}

// NextExpiry returns the instant at which the next queued item's time is
// up; ok is false if no queued item can expire (no item has a deadline and
// the Order is not adaptive-lifo, or the queue is empty).
func (q *Queue[T]) NextExpiry() (at time.Time, ok bool) {
	if len(q.heap) == 0 {
		return at, false
	}
	return q.slots[q.heap[0].slot].expiry, true
}

// Remove takes the item identified by h out of the queue, for instance
// because its client went away, and returns it; ok is false if the item has
// already left the queue (served, shed, expired or removed) or h identifies
// nothing.
func (q *Queue[T]) Remove(h Handle) (it Item[T], ok bool) {
	if !q.holds(h) {
		return it, false
	}
	if q.ring {
		q.toList()
	}
	q.remove(h.slot, &it)
	q.counts[kind(&it)].Removed++
	return it, true
}

// Swap gives the item identified by h a new payload, keeping its place, its
// deadline and its class, and returns the old payload; ok is false if the
// item has left the queue or h identifies nothing. A server uses it to let a
// newer request take the place of a twin it supersedes (see the supersede
// package), so that the newer one does not start again at the back.
func (q *Queue[T]) Swap(h Handle, payload T) (old T, ok bool) {
	if !q.holds(h) {
		return old, false
	}
	if q.ring {
		r := &q.ritems[h.slot]
		old, r.payload = r.payload, payload
		return old, true
	}
	s := &q.slots[h.slot]
	old, s.item.Payload = s.item.Payload, payload
	return old, true
}

// holds reports whether the item h identifies is in the queue.
func (q *Queue[T]) holds(h Handle) bool {
	if h.gen == 0 || h.slot < 0 {
		return false
	}
	if q.ring {
		if int(h.slot) >= len(q.ritems) {
			return false
		}
		r := &q.ritems[h.slot]
		return r.used && r.gen == h.gen
	}
	if int(h.slot) >= len(q.slots) {
		return false
	}
	s := &q.slots[h.slot]
	return s.used && s.gen == h.gen
}

// expireTop removes the heap's top item, whose time is up, and counts it.
func (q *Queue[T]) expireTop() (it Item[T], why Reason) {
	i := q.heap[0].slot
	why = Expired
	if q.slots[i].timeout {
		why = QueueTimeout
	}
	q.remove(i, &it)
	if why == Expired {
		q.counts[kind(&it)].Expired++
	} else {
		q.counts[kind(&it)].TimedOut++
	}
	return it, why
}

// remove unlinks slot i from its class and the heap, frees it and copies
// its item to dst (straight into the caller's result: an item is 72 bytes
// for a small payload, and copying it twice showed in profiles). The
// caller counts the outcome.
func (q *Queue[T]) remove(i int32, dst *Item[T]) {
	s := &q.slots[i]
	l := &q.classes[s.class]
	if s.prev == noSlot {
		l.head = s.next
	} else {
		q.slots[s.prev].next = s.next
	}
	if s.next == noSlot {
		l.tail = s.prev
	} else {
		q.slots[s.next].prev = s.prev
	}
	if l.head == noSlot {
		q.nonEmpty &^= 1 << s.class
	}
	if s.pos != noSlot {
		q.heapRemove(int(s.pos))
	}
	*dst = s.item
	var none T
	s.item.Payload = none // drop references the payload may hold; the rest is overwritten by the next push
	s.used = false
	s.prev = noSlot
	s.next = q.free
	q.free = i
	q.n--
	q.counts[kind(dst)].Queued--
}

// link appends slot i to the list l.
func (q *Queue[T]) link(l *list, i int32) {
	s := &q.slots[i]
	s.prev, s.next = l.tail, noSlot
	if l.tail == noSlot {
		l.head = i
	} else {
		q.slots[l.tail].next = i
	}
	l.tail = i
}

// --- the ring ------------------------------------------------------------------

// ringPlace puts it, pushed at now, at the ring's tail and reports true,
// or reports false having made q a list queue, when the ring is full and
// wrapped and only the list can grow. The rest of push has run: it is
// admitted, and any victim has left.
func (q *Queue[T]) ringPlace(now time.Time, it *Item[T], a *Admission[T]) bool {
	i := q.rtail
	if int(i) == len(q.ritems) {
		// At the end of the storage: go on at its start, or grow it
		// in place (the items keep their places, and so their handles).
		// A queue more than a quarter full grows, so that one that keeps
		// growing does not wrap and then fill (which would need a move);
		// storage beyond it comes to at most the capacity.
		if len(q.ritems) < q.cap && q.n > len(q.ritems)/4 {
			q.ringGrow()
		} else {
			i = 0
		}
	}
	if q.n == len(q.ritems) {
		// Full and wrapped (a full ring that does not wrap grew above):
		// growing would move items.
		q.toList()
		return false
	}
	a.Handle = Handle{slot: i, gen: q.ringPut(i, now, it, kind(it))}
	return true
}

// ringPut puts it (of kind k), pushed at now, in place i, the ring's new
// tail, counts it queued, and returns the place's new generation. Small
// enough to be inlined into push.
func (q *Queue[T]) ringPut(i int32, now time.Time, it *Item[T], k int) uint32 {
	r := &q.ritems[i]
	r.used = true
	if r.gen++; r.gen == 0 { // the zero Handle must never match
		r.gen = 1
	}
	r.payload, r.attempt, r.crit, r.enqueued = it.Payload, it.Attempt, it.Criticality, now
	q.seq++
	q.rtail, q.nonEmpty = i+1, 1
	q.n++
	q.counts[k].Queued++
	return r.gen
}

// ringGrow doubles the storage of a ring whose items do not wrap past its
// end (up to the capacity), keeping every item in its place.
func (q *Queue[T]) ringGrow() {
	old := len(q.ritems)
	q.ritems = append(q.ritems, make([]ringItem[T], min(q.cap, 2*old)-old)...)
}

// ringTake removes the ring's oldest item (oldest) or its newest, which
// exists, copies it to dst and counts it as no longer queued. The caller
// counts how it left.
func (q *Queue[T]) ringTake(oldest bool, dst *Item[T]) {
	var i int32
	if oldest {
		i = q.rhead
		q.rhead++
		if int(q.rhead) == len(q.ritems) {
			q.rhead = 0
		}
	} else {
		if q.rtail == 0 {
			q.rtail = int32(len(q.ritems))
		}
		q.rtail--
		i = q.rtail
	}
	r := &q.ritems[i]
	*dst = Item[T]{Payload: r.payload, Attempt: r.attempt, Criticality: r.crit, Enqueued: r.enqueued}
	var none T
	r.payload = none
	r.used = false
	q.n--
	if q.n == 0 {
		q.nonEmpty = 0
		q.rhead, q.rtail = 0, 0
	}
	q.counts[kind(dst)].Queued--
}

// toList makes a ring queue a list queue, for good: the items move to the
// slots of their places (so that their handles still find them), linked
// oldest to newest into class 0; each slot takes its place's generation,
// and those without an item go on the free list.
func (q *Queue[T]) toList() {
	q.ring = false
	if n := len(q.ritems); len(q.slots) < n {
		q.slots = append(q.slots, make([]slot[T], n-len(q.slots))...)
	}
	for j := range q.slots {
		q.slots[j].pos = noSlot
	}
	for j := range q.ritems {
		r, s := &q.ritems[j], &q.slots[j]
		s.gen, s.used = r.gen, r.used
		if r.used {
			s.item = Item[T]{Payload: r.payload, Attempt: r.attempt, Criticality: r.crit, Enqueued: r.enqueued}
		}
	}
	l := list{noSlot, noSlot}
	i := q.rhead
	for range q.n {
		q.link(&l, i)
		if i++; int(i) == len(q.ritems) {
			i = 0
		}
	}
	q.classes[0] = l
	q.free = noSlot
	for j := len(q.slots) - 1; j >= 0; j-- {
		if s := &q.slots[j]; !s.used {
			s.prev, s.next = noSlot, q.free
			q.free = int32(j)
		}
	}
	q.ritems = nil
	q.rhead, q.rtail = 0, 0
}
