package engine

import "time"

// Engine is a discrete-event scheduler in virtual time: it holds scheduled
// events and hands them back one at a time, earliest first, advancing its
// clock to each event's time as it does.
//
// The zero Engine is ready to use, with its clock at Time(0) and nothing
// scheduled. An Engine is not safe for concurrent use, and must not be copied
// once used; independent simulations each use their own Engine and may run
// in parallel.
//
// Scheduling an event costs O(log n) in the heap ([Engine.At],
// [Engine.After]) or O(1) in a fixed-delay queue ([FixedQueue.Add]); so does
// delivering one. Cancelling costs O(1): the event is marked and discarded
// when it reaches the front. In steady state nothing allocates.
type Engine struct {
	now   Time
	seq   uint64 // Seq of the last event scheduled
	fired uint64 // events delivered

	heap eventHeap

	// Cancelable heap events own a slot: slots[i] holds the Seq of the live
	// event in slot i, or 0 once it is cancelled. A slot is freed when its
	// event leaves the heap, fired or discarded. Slot 0 is never used.
	slots []uint64
	free  []uint32

	queues []*FixedQueue // every fixed queue, by id−1
	ready  readyHeap     // the non-empty ones

	spare []ring // rings from [Engine.Reuse] for the next fixed queues
}

// Now returns the current virtual time: the time of the event delivered
// last, or the limit a run stopped at (see [Engine.NextUntil]).
func (e *Engine) Now() Time { return e.now }

// Fired returns how many events the engine has delivered.
func (e *Engine) Fired() uint64 { return e.fired }

// Len returns how many events the engine holds, in its heap and its fixed
// queues, including cancelled ones not yet discarded.
func (e *Engine) Len() int {
	n := e.heap.len()
	for _, q := range e.ready {
		n += q.Len()
	}
	return n
}

// At schedules ev to fire at time t. It panics if t is before Now().
func (e *Engine) At(t Time, ev Event) {
	e.notPast(t)
	e.schedule(t, ev, 0)
}

// After schedules ev to fire d after Now(). It panics if d is negative.
func (e *Engine) After(d time.Duration, ev Event) {
	e.schedule(e.later(d), ev, 0)
}

// AtCancelable is like [Engine.At] but returns a handle that can cancel the
// event. Use it only for events that may be cancelled: it costs a little
// more than At. Events that fire a fixed delay after being scheduled, such
// as timeouts, are cheaper still in a [FixedQueue].
func (e *Engine) AtCancelable(t Time, ev Event) Handle {
	e.notPast(t)
	return e.scheduleCancelable(t, ev)
}

// AfterCancelable is like [Engine.After] but returns a handle that can
// cancel the event (see [Engine.AtCancelable]).
func (e *Engine) AfterCancelable(d time.Duration, ev Event) Handle {
	return e.scheduleCancelable(e.later(d), ev)
}

// schedule stamps ev with time t, the next sequence number and its
// cancellation slot (0 for none), and puts it in the heap.
func (e *Engine) schedule(t Time, ev Event, slot uint32) {
	e.seq++
	e.heap.push(t, e.seq, hval{a: ev.A, b: ev.B, target: ev.Target, kind: ev.Kind, slot: slot})
}

func (e *Engine) scheduleCancelable(t Time, ev Event) Handle {
	s := e.allocSlot()
	e.schedule(t, ev, s)
	e.slots[s] = e.seq
	return Handle{id: e.seq, slot: s}
}

func (e *Engine) notPast(t Time) {
	if t < e.now {
		panic("engine: event scheduled in the past")
	}
}

// later returns Now()+d, saturating at Never.
func (e *Engine) later(d time.Duration) Time {
	if d < 0 {
		panic("engine: negative delay")
	}
	return e.now.Add(d)
}

func (e *Engine) allocSlot() uint32 {
	if n := len(e.free); n > 0 {
		s := e.free[n-1]
		e.free = e.free[:n-1]
		return s
	}
	if len(e.slots) == 0 {
		e.slots = append(e.slots, 0) // slot 0 means "not cancelable"
	}
	e.slots = append(e.slots, 0)
	return uint32(len(e.slots) - 1)
}

func (e *Engine) freeSlot(s uint32) {
	e.slots[s] = 0
	e.free = append(e.free, s)
}

// Cancel cancels the event h refers to and reports whether it did. It is a
// no-op reporting false if the event already fired or was cancelled, and
// for the zero Handle. The event's storage is reclaimed when its time comes.
func (e *Engine) Cancel(h Handle) bool {
	if h.queue != 0 {
		q := e.queue(h)
		return q != nil && q.cancel(h.id)
	}
	if h.id != 0 && int(h.slot) < len(e.slots) && e.slots[h.slot] == h.id {
		e.slots[h.slot] = 0
		return true
	}
	return false
}

// Pending reports whether the event h refers to is still scheduled: not yet
// fired and not cancelled.
func (e *Engine) Pending(h Handle) bool {
	if h.queue != 0 {
		q := e.queue(h)
		return q != nil && q.pending(h.id)
	}
	return h.id != 0 && int(h.slot) < len(e.slots) && e.slots[h.slot] == h.id
}

// queue returns the fixed queue of h, or nil if e has no such queue.
func (e *Engine) queue(h Handle) *FixedQueue {
	if int(h.queue) > len(e.queues) {
		return nil
	}
	return e.queues[h.queue-1]
}
