package grpcx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"stormguard/limit"
	"stormguard/shed"
	"stormguard/wire"
)

// gate is the admission core of a [Server], free of anything gRPC: a
// concurrency limiter in front, a shed.Queue behind it where requests wait
// while the limit is reached, and one timer for the whole queue that drops
// the waiters whose time is up.
//
// It mirrors the unexported admission code of httpx.Server; the two are
// meant to become one shared type (see the package documentation of grpcx
// for the state of that).
//
// Concurrency: the queue is guarded by mu; each waiting request blocks on a
// channel of its own, to which exactly one grant is sent under mu when the
// request leaves the queue (unless it removes itself). No callback runs
// under mu. No goroutine is started per request.
type gate struct {
	lim *limit.Limiter

	mu      sync.Mutex // guards q, armed, armedAt
	q       *shed.Queue[*waiter]
	timer   *time.Timer // fires at the queue's NextExpiry; its func takes mu
	armed   bool
	armedAt time.Time
	waiting atomic.Int64 // q.Len(), for the lock-free fast path

	waiters sync.Pool // of *waiter
}

// waiter is a request waiting in the queue. ch is buffered (capacity 1) so
// a grant never blocks the sender; it is empty again whenever the waiter
// goes back to the pool.
type waiter struct {
	ch     chan grant
	handle shed.Handle
}

// grant ends a wait: with a permit to run (why is shed.None), or with the
// reason the queue gave the request up. waited is the time spent queued.
type grant struct {
	permit limit.Permit
	why    shed.Reason
	waited time.Duration
}

func newGate(lim *limit.Limiter, q *shed.Queue[*waiter]) *gate {
	g := &gate{lim: lim, q: q}
	g.timer = time.AfterFunc(time.Hour, g.onTimer)
	g.timer.Stop()
	g.waiters.New = func() any { return &waiter{ch: make(chan grant, 1)} }
	return g
}

// admitted is how a request fared at the gate.
type admitted struct {
	permit limit.Permit
	ok     bool          // permit holds a slot: run the request
	why    shed.Reason   // when !ok: why the queue gave it up; None: its client left
	waited time.Duration // time spent in the queue, when ok
}

// admit lets a request that arrived at now through, at once if nobody is
// queued and the limiter has room, else after waiting in the queue. ctx is
// the request's; if it ends while the request waits, the request leaves
// the queue and admit reports why as shed.Expired (its deadline passed) or
// shed.None (its client went away).
func (g *gate) admit(ctx context.Context, now time.Time, attempt int, crit wire.Criticality, dl time.Time) admitted {
	if g.waiting.Load() == 0 { // nobody to overtake: try the fast path
		if p, ok := g.lim.AcquireAt(now); ok {
			return admitted{permit: p, ok: true}
		}
	}
	wt := g.waiters.Get().(*waiter)
	g.mu.Lock()
	now = time.Now() // read under the lock: the queue sees time move forward
	adm := g.q.PushAt(now, shed.Item[*waiter]{Payload: wt, Attempt: attempt, Criticality: crit, Deadline: dl})
	if adm.HasVictim() {
		adm.Victim.Payload.ch <- grant{why: adm.VictimReason}
	}
	if !adm.Admitted() {
		g.mu.Unlock()
		g.waiters.Put(wt)
		return admitted{why: adm.Refused}
	}
	wt.handle = adm.Handle
	g.waiting.Store(int64(g.q.Len()))
	g.dispatchLocked(now)
	g.armLocked()
	g.mu.Unlock()

	var gr grant
	select {
	case gr = <-wt.ch:
	case <-ctx.Done():
		g.mu.Lock()
		_, removed := g.q.Remove(wt.handle)
		if removed {
			g.waiting.Store(int64(g.q.Len()))
			g.armLocked()
		}
		g.mu.Unlock()
		if !removed {
			gr = <-wt.ch // it left the queue under the lock: its grant is there
			if gr.why == shed.None {
				// Admitted just as its context ended: pass the slot on.
				g.release(gr.permit, releaseIgnore)
			}
		}
		g.waiters.Put(wt)
		if !removed && gr.why != shed.None {
			return admitted{why: gr.why}
		}
		if ctx.Err() == context.DeadlineExceeded {
			return admitted{why: shed.Expired}
		}
		return admitted{}
	}
	g.waiters.Put(wt)
	if gr.why != shed.None {
		return admitted{why: gr.why}
	}
	return admitted{permit: gr.permit, ok: true, waited: gr.waited}
}

// dispatchLocked answers the queued requests whose time is up at now, then
// hands permits to queued requests, in the queue's order, while the limiter
// grants them. g.mu must be held.
func (g *gate) dispatchLocked(now time.Time) {
	for {
		it, why, ok := g.q.ExpireAt(now)
		if !ok {
			break
		}
		it.Payload.ch <- grant{why: why}
	}
	for g.q.Len() > 0 {
		p, ok := g.lim.AcquireAt(now)
		if !ok {
			break
		}
		it, why, _ := g.q.PopAt(now)
		if why != shed.None { // not expected: ExpireAt just ran at the same now
			p.IgnoreAt(now)
			p = limit.Permit{}
		}
		it.Payload.ch <- grant{permit: p, why: why, waited: now.Sub(it.Enqueued)}
	}
	g.waiting.Store(int64(g.q.Len()))
}

// armLocked sets the timer to fire at the queue's next expiry, unless it is
// already set to fire no later; it stops the timer when nothing can expire.
// A timer that fires early finds nothing due and sets itself again. g.mu
// must be held.
func (g *gate) armLocked() {
	at, ok := g.q.NextExpiry()
	if !ok {
		if g.armed {
			g.timer.Stop()
			g.armed = false
		}
		return
	}
	if g.armed && !at.Before(g.armedAt) {
		return
	}
	g.armed, g.armedAt = true, at
	g.timer.Reset(time.Until(at))
}

// onTimer drops the requests whose time is up and sets the timer for the
// next.
func (g *gate) onTimer() {
	g.mu.Lock()
	g.armed = false
	g.dispatchLocked(time.Now())
	g.armLocked()
	g.mu.Unlock()
}

// How a permit is released: see the Server documentation.
const (
	releaseSuccess = iota
	releaseDropped
	releaseIgnore
)

// release ends a permit as kind says and, if requests are waiting, hands
// the freed slot on.
func (g *gate) release(p limit.Permit, kind int) {
	now := time.Now()
	switch kind {
	case releaseSuccess:
		p.SuccessAt(now)
	case releaseDropped:
		p.DroppedAt(now)
	default:
		p.IgnoreAt(now)
	}
	// The release above and this load pair with admit's store of waiting
	// and its acquire: one side sees the other, so a freed slot never goes
	// unnoticed by a waiter.
	if g.waiting.Load() > 0 {
		g.mu.Lock()
		g.dispatchLocked(time.Now())
		g.armLocked()
		g.mu.Unlock()
	}
}

// stats returns the queue's length and counters.
func (g *gate) stats() (int, shed.Stats) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.q.Len(), g.q.Stats()
}
