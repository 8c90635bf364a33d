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
func (e *Engine) Peek() (Time, bool) { return e.front() }

// next delivers the earliest pending event due at or before limit. On the
// way it discards the cancelled events that come before the earliest live
// one, as front does, also when that event is not due.
func (e *Engine) next(limit Time, ev *Event) bool {
	for {
		var hk *hkey
		if e.heap.len() > 0 {
			hk = e.heap.top()
		}
		if len(e.ready) > 0 {
			q := e.ready[0]
			f := q.front()
			if hk == nil || makeKey(f.At, f.Seq).less(*hk) {
				if q.frontDead() {
					q.drop()
					continue
				}
				if f.At > limit {
					return false
				}
				// Field by field: *ev = *f would copy through the stack.
				ev.At, ev.Seq, ev.A, ev.B, ev.Target, ev.Kind = f.At, f.Seq, f.A, f.B, f.Target, f.Kind
				q.drop()
				e.now = ev.At
				e.fired++
				return true
			}
		}
		if hk == nil {
			return false
		}
		slot := e.heap.v[0].slot
		if slot != 0 && e.slots[slot] != hk.seq {
			e.freeSlot(slot)
			e.heap.remove()
			continue
		}
		if hk.time() > limit {
			return false
		}
		if slot != 0 {
			e.freeSlot(slot)
		}
		e.heap.pop(ev)
		e.now = ev.At
		e.fired++
		return true
	}
}

// front discards cancelled events from the heads of the heap and the fixed
// queues, then returns the time of the earliest live event, or false if
// nothing is pending.
func (e *Engine) front() (Time, bool) {
	for {
		var hk *hkey
		if e.heap.len() > 0 {
			hk = e.heap.top()
		}
		if len(e.ready) > 0 {
			q := e.ready[0]
			f := q.front()
			if hk == nil || makeKey(f.At, f.Seq).less(*hk) {
				if q.frontDead() {
					q.drop()
					continue
				}
				return f.At, true
			}
		}
		if hk == nil {
			return 0, false
		}
		if slot := e.heap.v[0].slot; slot != 0 && e.slots[slot] != hk.seq {
			e.freeSlot(slot)
			e.heap.remove()
			continue
		}
		return hk.time(), true
	}
}
