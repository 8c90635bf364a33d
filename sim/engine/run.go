package engine

// Next delivers the earliest pending event: it removes it, advances the
// clock to its time, stores it in *ev and returns true. With nothing pending
// it returns false and leaves the clock alone. Cancelled events are skipped.
//
// The usual loop is
//
//	var ev engine.Event
//	for e.Next(&ev) {
//		switch ev.Kind {
//		case Arrive: …
//		}
//	}
func (e *Engine) Next(ev *Event) bool {
	return e.next(Never, ev)
}

// NextUntil is like [Engine.Next] but delivers only events due at or before
// until. When the earliest pending event is later, or none is pending, it
// returns false and, if until is after Now(), advances the clock to until:
// a loop over NextUntil covers the span up to until, and the next loop
// starts where it ended. The clock never advances to [Never]: with until =
// Never, NextUntil is the same as Next.
func (e *Engine) NextUntil(until Time, ev *Event) bool {
	if e.next(until, ev) {
		return true
	}
	if until > e.now && until != Never {
		e.now = until
	}
	return false
}

// Run delivers every event due at or before until to h, in order, then
// leaves the clock at until (see [Engine.NextUntil]). With until = [Never]
// it runs until nothing is pending; the clock then stays at the last event.
func (e *Engine) Run(until Time, h Handler) {
	var ev Event
	for e.NextUntil(until, &ev) {
		h.Handle(e, ev)
	}
}

// Peek returns the time of the earliest pending event, or false if none is.
func (e *Engine) Peek() (Time, bool) {
	ev, _ := e.front()
	if ev == nil {
		return 0, false
	}
	return ev.At, true
}

// next delivers the earliest pending event due at or before limit.
func (e *Engine) next(limit Time, ev *Event) bool {
	top, q := e.front()
	if top == nil || top.At > limit {
		return false
	}
	if q == nil {
		if top.slot != 0 {
			e.freeSlot(top.slot)
		}
		e.heap.pop(ev)
		ev.slot = 0
	} else {
		*ev = *top
		q.drop()
	}
	e.now = ev.At
	e.fired++
	return true
}

// front discards cancelled events from the heads of the heap and the fixed
// queues, then returns the earliest live event and the queue holding it, nil
// for the heap. With nothing pending it returns nil, nil.
func (e *Engine) front() (*Event, *FixedQueue) {
	for {
		var top *Event
		var q *FixedQueue
		if e.heap.len() > 0 {
			top = e.heap.top()
		}
		if len(e.ready) > 0 {
			if f := e.ready[0].front(); top == nil || before(f, top) {
				top, q = f, e.ready[0]
			}
		}
		switch {
		case top == nil:
			return nil, nil
		case q != nil:
			if !q.frontDead() {
				return top, q
			}
			q.drop()
		default:
			if top.slot == 0 || e.slots[top.slot] == top.Seq {
				return top, nil
			}
			e.freeSlot(top.slot)
			e.heap.remove()
		}
	}
}
