package admit

import (
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/supersede"
)

// ReleaseAt ends at now the permit *p of an admitted request that the
// supersession table does not hold (its Ref is not Keyed), whose deadline
// is deadline (the zero Time: none), and counts it by the rule of the
// package documentation's table: a panic first, then a deadline that
// passed, then a caller that went away (gone), then o. It returns how the
// request counted, and handOn: requests are queued, so the freed slot is to
// be handed on with DispatchAt.
func (c *Core[T]) ReleaseAt(now time.Time, p *limit.Permit, deadline time.Time, gone bool, o Outcome) (f Fate, handOn bool) {
	f, s := classify(o, late(now, deadline), gone)
	c.inc(&c.c.fates[f&(numFates-1)])
	switch s {
	case sampleSuccess:
		p.SuccessAt(now)
	case sampleDropped:
		p.DroppedAt(now)
	default:
		p.IgnoreAt(now)
	}
	return f, c.waiting.Load() > 0
}

// DispatchAt hands slots freed by ReleaseAt to the queued requests, at now,
// after answering those whose time is up.
func (c *Core[T]) DispatchAt(now time.Time) []Action[T] {
	now = c.clock(now)
	c.ready = c.ready[:0]
	c.dispatch(now)
	c.arm()
	return c.ready
}

// TickAt is the queue's timer firing at now: the requests whose time is up
// are answered, and slots go to those queued.
func (c *Core[T]) TickAt(now time.Time) []Action[T] {
	now = c.clock(now)
	if c.armed && !now.Before(c.armedAt) {
		c.armed = false
	}
	return c.DispatchAt(now)
}

// EndAt is ReleaseAt for an admitted request the supersession table may
// hold (ref is Keyed), then the end of its key: the requests that joined
// it are answered Joined with result, the shell's record of its answer,
// when it is fit to replay, that is when the request completed for a
// caller that was still waiting:
//
//	result is not nil (the shell kept a replayable answer)
//	the work did not panic
//	its deadline had not passed when it ended, and its caller had not left
//
// Otherwise they go through the gate again, in the order they came: the
// first runs (or queues), the others join it. Then freed slots are handed
// on.
func (c *Core[T]) EndAt(now time.Time, ref Ref, p *limit.Permit, deadline time.Time, gone bool, o Outcome, result any) (Fate, []Action[T]) {
	c.ready = c.ready[:0]
	f, _ := c.ReleaseAt(now, p, deadline, gone, o)
	replay := result != nil && o != Panicked && (f == FateGoodput || f == FateFailed)
	return f, c.ended(c.clock(now), ref, result, replay)
}

// ended ends the key of the request ref refers to, if the table holds it
// (its waiters answered with result if replay, else sent through again),
// hands freed slots on and sets the timer: the end of every step that
// frees a slot.
func (c *Core[T]) ended(now time.Time, ref Ref, result any, replay bool) []Action[T] {
	if k, ok := c.deref(ref); ok {
		c.endKey(now, k, result, replay)
		c.freeKeyed(k)
	}
	c.dispatch(now)
	c.rerun(now)
	c.arm()
	return c.ready
}

// CancelAt takes a queued request, or one that waits for its twin, out of
// the core at now: its caller went away (ref is the latest its actions
// gave). ok false: the core no longer holds it, and the step that let it go
// answered it (Start or Respond). Otherwise d is its decision, counted:
// Expired if its deadline had passed, else Canceled.
func (c *Core[T]) CancelAt(now time.Time, ref Ref) (d Decision, ok bool, acts []Action[T]) {
	now = c.clock(now)
	c.ready = c.ready[:0]
	if ref.k == 0 {
		it, removed := c.q.Remove(ref.q)
		if !removed {
			return d, false, nil
		}
		d = c.leave(now, it.Deadline)
		c.waiting.Store(int64(c.q.Len()))
	} else {
		k, valid := c.deref(ref)
		if !valid {
			return d, false, nil
		}
		kr := &c.keyed[k]
		switch kr.state {
		case kQueued:
			if _, removed := c.q.Remove(kr.q); !removed {
				return d, false, nil
			}
			c.waiting.Store(int64(c.q.Len()))
			c.endKey(now, k, nil, false)
		case kJoined:
			if !c.sup.LeaveAt(now, kr.key, k) {
				return d, false, nil
			}
			c.joiningAdd(-1)
		default:
			return d, false, nil
		}
		d = c.leave(now, kr.e.Deadline)
		c.freeKeyed(k)
	}
	c.rerun(now)
	c.arm()
	return d, true, c.ready
}

// AbandonAt gives back, at now, the permit *p of a request that a Start
// let go but that never ran: its caller had left by then (why is
// shed.None: counted Expired if deadline had passed, else Canceled), or
// the shell's own queue in front of its workers gave it up for why (the
// simulator's; counted as the admission queue counts it). It is not
// counted as started; its key's waiters go through the gate again, and
// the slot is handed on.
func (c *Core[T]) AbandonAt(now time.Time, ref Ref, p *limit.Permit, deadline time.Time, why shed.Reason) (Decision, []Action[T]) {
	now = c.clock(now)
	c.ready = c.ready[:0]
	c.dec(&c.c.started)
	p.IgnoreAt(now)
	var d Decision
	if why == shed.None {
		d = c.leave(now, deadline)
	} else {
		d = c.drop(why, true)
	}
	return d, c.ended(now, ref, nil, false)
}

// Drain takes every request out of the core's queue and its supersession
// table, for a shell that loses them all at once (a crash): it returns
// their handles, queued ones first, to answer. Nothing is counted, and the
// core must not be used afterwards.
func (c *Core[T]) Drain(now time.Time) []T {
	out := c.drained[:0]
	for {
		it, _, ok := c.q.PopAt(now)
		if !ok {
			break
		}
		out = append(out, it.Payload.h)
	}
	for i := range c.keyed {
		if c.keyed[i].state == kJoined {
			out = append(out, c.keyed[i].h)
		}
	}
	c.drained = out
	return out
}

// --- keyed requests ------------------------------------------------------------

// newKeyed records a keyed request h with key and entry e that arrives at
// now, and returns its index.
func (c *Core[T]) newKeyed(h T, key Key, e Entry, now time.Time) int32 {
	var k int32
	if n := len(c.freeK); n > 0 {
		k = c.freeK[n-1]
		c.freeK = c.freeK[:n-1]
	} else {
		c.keyed = append(c.keyed, keyedReq[T]{})
		k = int32(len(c.keyed) - 1)
	}
	kr := &c.keyed[k]
	kr.h, kr.gen, kr.state, kr.key, kr.e, kr.q, kr.arrived = h, kr.gen+1, kNew, key, e, shed.Handle{}, now
	return k
}

// freeKeyed forgets keyed request k: its Refs are stale from now on.
func (c *Core[T]) freeKeyed(k int32) {
	kr := &c.keyed[k]
	var zero T
	kr.h, kr.state = zero, kFree
	kr.gen++
	c.freeK = append(c.freeK, k)
}

// deref returns the keyed request ref refers to, if it is still the one.
func (c *Core[T]) deref(ref Ref) (int32, bool) {
	k := ref.k - 1
	if ref.k == 0 || int(k) >= len(c.keyed) || c.keyed[k].gen != ref.gen || c.keyed[k].state == kFree {
		return 0, false
	}
	return k, true
}

// arriveKeyed is step 4 and 5 for keyed request k at now: the table
// decides whether it is served as usual, takes a queued twin's place,
// waits for a twin in service, or is refused.
func (c *Core[T]) arriveKeyed(now time.Time, k int32) {
	kr := &c.keyed[k]
	kr.arrived = now
	_, _, held := c.sup.Held(kr.key)
	var p limit.Permit
	got := false
	if !held && c.q.Len() == 0 {
		p, got = c.acquire(now)
	}
	if !held && !got && c.reject {
		h := kr.h
		c.freeKeyed(k)
		c.answer(h, c.refuse(ShedQueueFull))
		return
	}
	d := c.sup.ArriveAt(now, kr.key, k, !got)
	switch d.Action {
	case supersede.Serve:
		if got {
			kr.state = kRunning
			c.inc(&c.c.started)
			c.emit(Action[T]{Kind: Start, H: kr.h, Permit: p, Ref: Ref{k: k + 1, gen: kr.gen}})
			return
		}
		c.enqueue(now, kr.h, k+1, kr.e)
	case supersede.Untracked:
		h, e := kr.h, kr.e
		c.freeKeyed(k)
		if got {
			c.inc(&c.c.started)
			c.emit(Action[T]{Kind: Start, H: h, Permit: p})
			return
		}
		c.enqueue(now, h, 0, e)
	case supersede.Replace:
		p.IgnoreAt(now) // not expected: a held key is not acquired for
		old := d.Old
		if ok := c.keyed[old].state == kQueued; ok {
			if _, ok = c.q.Swap(c.keyed[old].q, qent[T]{h: kr.h, k: k + 1}); ok {
				kr.q, kr.state = c.keyed[old].q, kQueued
				oh := c.keyed[old].h
				c.freeKeyed(old)
				c.inc(&c.c.superseded)
				c.answer(oh, Decision{Answer: Superseded})
				c.emit(Action[T]{Kind: Wait, H: kr.h, Ref: Ref{k: k + 1, gen: kr.gen}})
				return
			}
		}
		// Not expected: a twin the table holds as queued is in the queue.
		// Queue the newcomer as if it had no twin.
		c.enqueue(now, kr.h, k+1, kr.e)
	case supersede.Join:
		kr.state = kJoined
		c.joiningAdd(1)
		c.emit(Action[T]{Kind: Join, H: kr.h, Ref: Ref{k: k + 1, gen: kr.gen}})
	default: // supersede.Refuse
		h := kr.h
		c.freeKeyed(k)
		c.answer(h, c.refuse(ShedKeyBusy))
	}
}

// endKey ends the hold of keyed request k on its key, if it still holds
// it: the requests that joined it are answered with result (replay) or go
// through the gate again at the step's end (rerun).
func (c *Core[T]) endKey(now time.Time, k int32, result any, replay bool) {
	kr := &c.keyed[k]
	if h, _, ok := c.sup.Held(kr.key); !ok || h != k {
		return
	}
	for _, j := range c.sup.DoneAt(now, kr.key) {
		c.joiningAdd(-1)
		if replay {
			c.inc(&c.c.joined)
			h := c.keyed[j].h
			c.freeKeyed(j)
			c.answer(h, Decision{Answer: Joined, Result: result})
			continue
		}
		c.reruns = append(c.reruns, j)
	}
}

// rerun sends the requests endKey let go through the gate again, in the
// order they came: the first one's deadline checked, it runs or queues,
// and the next join it.
func (c *Core[T]) rerun(now time.Time) {
	if len(c.reruns) == 0 {
		return
	}
	for i := 0; i < len(c.reruns); i++ {
		k := c.reruns[i]
		kr := &c.keyed[k]
		if !kr.e.Deadline.IsZero() && kr.e.Deadline.Sub(now) <= c.minRemaining {
			c.inc(&c.c.expired)
			c.inc(&c.c.expiredQueued)
			h := kr.h
			c.freeKeyed(k)
			c.answer(h, Decision{Answer: Expired})
			continue
		}
		c.arriveKeyed(now, k)
	}
	c.reruns = c.reruns[:0]
	c.dispatch(now)
}
