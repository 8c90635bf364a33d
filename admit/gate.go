package admit

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/supersede"
	"github.com/stormguard/stormguard/wire"
)

// Gate is the admission gate of a server: a concurrency limiter in front, a
// shed.Queue behind it where requests wait while the limit is reached, one
// timer for the whole queue that drops the waiters whose time is up, the
// kill switch, and the counters. See the package documentation for a
// request's way through. Build one with [New]; the zero Gate is not usable.
type Gate struct {
	dials    *killswitch.Dials
	onWait   func(time.Duration)
	onRefuse func(context.Context, int, Decision)

	mu      sync.Mutex     // guards core (but its counters), armed, armedAt, sup
	core    *Core[*waiter] // the decisions; see Core
	timer   *time.Timer    // fires at the queue's NextExpiry; its func takes mu
	armed   bool
	armedAt time.Time
	waiting atomic.Int64 // core.Queued(), for the lock-free fast path

	sup *supersede.Table[tableKey, *waiter] // guarded by mu; nil: supersession off

	waiters sync.Pool // of *waiter
}

// waiter is a request waiting in the queue, or for its twin. It receives
// exactly one grant on ch, sent under the gate's mutex when it leaves the
// queue (or its twin ends), unless it removes itself (Queue.Remove or
// Table.LeaveAt succeeds), in which case it receives none; so ch is empty
// again when the waiter goes back to the pool.
//
// A keyed waiter (a request whose key the supersession table holds) is
// allocated for its request and never pooled: the table may hold it while
// its request runs, and compares it by address. keyed, key and arrived are
// set before the waiter is shared, or under the mutex.
type waiter struct {
	ch      chan grant // buffered, capacity 1: a send never blocks
	handle  shed.Handle
	keyed   bool
	key     tableKey
	arrived time.Time // when a keyed waiter last arrived at the table
}

// grant ends a wait: with a permit to run (why is shed.None), or with the
// reason the queue gave the request up. waited is the time spent queued.
// superseded says a newer request with its key took its place. For a
// request waiting on its twin, result is the twin's result (nil: none to
// replay).
type grant struct {
	permit     limit.Permit
	why        shed.Reason
	waited     time.Duration
	superseded bool
	result     any
}

// New validates cfg, fills its defaults and builds a Gate with an empty
// queue (allocated now, see [shed.New]) and, unless cfg.Limiter is set, a
// fresh [limit.Limiter] from cfg.Limit that honours cfg.Dials.
func New(cfg Config) (*Gate, error) {
	core, err := NewCore[*waiter](cfg)
	if err != nil {
		return nil, err
	}
	g := &Gate{
		dials:    cfg.Dials,
		onWait:   cfg.OnQueueWait,
		onRefuse: cfg.OnRefuse,
		core:     core,
	}
	if c := cfg.Supersede; c != nil {
		d := c.WithDefaults()
		g.sup = supersede.New[tableKey, *waiter](d.MaxKeys, d.TTL, supersede.WithMaxWaiters(d.MaxWaiters))
	}
	g.timer = time.AfterFunc(time.Hour, g.onTimer)
	g.timer.Stop()
	g.waiters.New = func() any { return &waiter{ch: make(chan grant, 1)} }
	return g, nil
}

// Limiter returns the concurrency limiter the gate admits requests with.
func (g *Gate) Limiter() *limit.Limiter { return g.core.lim }

// Admit takes a request that arrived at now through the steps of the
// package documentation and returns how it fared. If d admits it, the
// request holds a slot: run its work, with a context from t.Bind, then call
// t.Release exactly once. Otherwise t is the zero Ticket and d says what to
// answer; the request has been counted.
//
// ctx is the request's own context: its deadline counts, and if it ends
// while the request waits in the queue the request leaves the queue at
// once. Admit blocks only while the request waits in the queue.
func (g *Gate) Admit(ctx context.Context, now time.Time, r Request) (t Ticket, d Decision) {
	t, d = g.admit(ctx, now, r)
	if g.onRefuse != nil && !d.Admitted() {
		g.onRefuse(ctx, max(r.Attempt, 1), d)
	}
	return t, d
}

func (g *Gate) admit(ctx context.Context, now time.Time, r Request) (t Ticket, d Decision) {
	g.core.Arrive(r) // counters are atomics: no lock needed
	if g.dials != nil {
		if g.dials.ShedPPM() > 0 && g.dials.Shed(rand.Uint32N(1_000_000)) {
			return Ticket{}, g.refuse(ShedKillSwitch)
		}
	}
	var pdl time.Time
	if d, ok := ctx.Deadline(); ok {
		pdl = d
	}
	// CheckAt reads the core's configuration and counters only: no lock.
	e, d, ok := g.core.CheckAt(now, r, pdl)
	if !ok {
		return Ticket{}, d
	}
	attempt, crit, dl := e.Attempt, e.Criticality, e.Deadline

	if g.sup != nil && r.Key != "" {
		return g.admitKeyed(ctx, r, attempt, crit, dl)
	}
	// The fast path: Core.AcquireAt's rule (nobody queued, the limiter
	// grants), with the queue's length read without the lock.
	if g.waiting.Load() == 0 {
		if p, ok := g.core.lim.AcquireAt(now); ok {
			// admitted's work, with the ticket built once, in the result.
			g.core.Admitted()
			if g.onWait != nil {
				g.onWait(0)
			}
			return Ticket{g: g, permit: p, deadline: dl, attempt: attempt, crit: crit}, Decision{}
		}
	}
	wt := g.waiters.Get().(*waiter)
	g.mu.Lock()
	return g.queueLocked(ctx, time.Now(), wt, attempt, crit, dl) // now read under the lock: the queue sees time move forward
}

// admitted counts an admitted request, tells OnQueueWait how long it
// waited, and returns its ticket.
func (g *Gate) admitted(t Ticket, waited time.Duration) (Ticket, Decision) {
	g.core.Admitted()
	if g.onWait != nil {
		g.onWait(waited)
	}
	return t, Decision{}
}

// refuse counts a request shed for reason and returns its decision (see
// Core.Refuse).
func (g *Gate) refuse(reason ShedReason) Decision { return g.core.Refuse(reason) }

// drop counts and decides a request the queue refused (queued false) or
// gave up after it waited (queued true), for why (see Core.Drop).
func (g *Gate) drop(why shed.Reason, queued bool) Decision { return g.core.Drop(why, queued) }

// leave counts a request whose context ended while it waited: Expired if
// by its deadline, else Canceled.
func (g *Gate) leave(ctx context.Context) Decision {
	if ctx.Err() == context.DeadlineExceeded {
		g.core.c.expired.Add(1)
		g.core.c.expiredQueued.Add(1)
		return Decision{Answer: Expired}
	}
	g.core.c.canceled.Add(1)
	return Decision{Answer: Canceled}
}

// queueLocked queues the request of wt at now, g.mu held, and waits until
// it gets a permit. It unlocks g.mu. If the request does not get a permit,
// the decision says why.
func (g *Gate) queueLocked(ctx context.Context, now time.Time, wt *waiter, attempt int, crit wire.Criticality, dl time.Time) (Ticket, Decision) {
	adm, d := g.core.PushAt(now, wt, Entry{Attempt: attempt, Criticality: crit, Deadline: dl})
	if adm.HasVictim() {
		v := adm.Victim.Payload
		g.endKeyedLocked(now, v, nil)
		v.ch <- grant{why: adm.VictimReason} // counted by its own goroutine, with Drop
	}
	if !adm.Admitted() {
		g.endKeyedLocked(now, wt, nil)
		g.mu.Unlock()
		g.putWaiter(wt)
		return Ticket{}, d
	}
	wt.handle = adm.Handle
	g.waiting.Store(int64(g.core.q.Len()))
	g.dispatchLocked(now)
	g.armLocked()
	g.mu.Unlock()
	return g.waitQueued(ctx, wt, attempt, crit, dl)
}

// waitQueued waits until the queued request of wt gets a permit, and
// returns its ticket; if it does not get one, the decision says why.
func (g *Gate) waitQueued(ctx context.Context, wt *waiter, attempt int, crit wire.Criticality, dl time.Time) (Ticket, Decision) {
	keyed := wt.keyed // read before a pooled waiter goes back to the pool
	var gr grant
	select {
	case gr = <-wt.ch:
	case <-ctx.Done():
		g.mu.Lock()
		_, removed := g.core.q.Remove(wt.handle)
		if removed {
			g.endKeyedLocked(time.Now(), wt, nil)
			g.waiting.Store(int64(g.core.q.Len()))
			g.armLocked()
		}
		g.mu.Unlock()
		if removed {
			g.putWaiter(wt)
			return Ticket{}, g.leave(ctx)
		}
		gr = <-wt.ch // it left the queue under the lock: its grant is there
		if gr.why == shed.None && !gr.superseded {
			// Admitted just as its context ended: pass the slot on.
			g.endKeyed(wt)
			g.putWaiter(wt)
			g.releaseAt(time.Now(), gr.permit)
			return Ticket{}, g.leave(ctx)
		}
	}
	g.putWaiter(wt)
	switch {
	case gr.superseded:
		g.core.c.superseded.Add(1)
		return Ticket{}, Decision{Answer: Superseded}
	case gr.why != shed.None:
		return Ticket{}, g.drop(gr.why, true)
	case !keyed:
		return g.admitted(Ticket{g: g, permit: gr.permit, deadline: dl, attempt: attempt, crit: crit}, gr.waited)
	}
	// A keyed request may have taken a twin's place, and with it the twin's
	// deadline in the queue: its own may have passed first.
	if now := time.Now(); !now.Before(dl.Add(-g.core.minRemaining)) {
		g.endKeyed(wt)
		g.releaseAt(now, gr.permit)
		g.core.c.expired.Add(1)
		g.core.c.expiredQueued.Add(1)
		return Ticket{}, Decision{Answer: Expired}
	}
	return g.admitted(Ticket{g: g, permit: gr.permit, deadline: dl, attempt: attempt, crit: crit, wt: wt}, gr.waited)
}

// putWaiter returns a waiter to the pool, unless it is keyed.
func (g *Gate) putWaiter(wt *waiter) {
	if !wt.keyed {
		g.waiters.Put(wt)
	}
}

// endKeyed is endKeyedLocked with no result, taking g.mu.
func (g *Gate) endKeyed(wt *waiter) {
	if !wt.keyed {
		return
	}
	g.mu.Lock()
	g.endKeyedLocked(time.Now(), wt, nil)
	g.mu.Unlock()
}

// dispatchLocked answers the queued requests whose time is up at now, then
// hands permits to queued requests, in the queue's order, while the limiter
// grants them. g.mu must be held.
func (g *Gate) dispatchLocked(now time.Time) {
	for {
		wt, why, ok := g.core.ExpireAt(now)
		if !ok {
			break
		}
		g.endKeyedLocked(now, wt, nil)
		wt.ch <- grant{why: why}
	}
	for {
		it, p, why, ok := g.core.GrantAt(now)
		if !ok {
			break
		}
		wt := it.Payload
		waited := now.Sub(it.Enqueued)
		switch {
		case why != shed.None: // not expected: ExpireAt just ran at the same now
			g.endKeyedLocked(now, wt, nil)
		case wt.keyed:
			g.startKeyedLocked(now, wt)
			waited = now.Sub(wt.arrived) // it may have taken an older twin's place
		}
		wt.ch <- grant{permit: p, why: why, waited: waited}
	}
	g.waiting.Store(int64(g.core.Queued()))
}

// armLocked sets the timer to fire at the queue's next expiry, unless it is
// already set to fire no later; it stops the timer when nothing can expire.
// A timer that fires early finds nothing due and sets itself again. g.mu
// must be held.
func (g *Gate) armLocked() {
	at, ok := g.core.NextExpiry()
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

// onTimer is the timer's function: it drops the requests whose time is up
// and sets the timer for the next.
func (g *Gate) onTimer() {
	g.mu.Lock()
	g.armed = false
	g.dispatchLocked(time.Now())
	g.armLocked()
	g.mu.Unlock()
}

// releaseAt ends a permit at now with no sample and, if requests are
// waiting, hands the freed slot on.
func (g *Gate) releaseAt(now time.Time, p limit.Permit) {
	p.IgnoreAt(now)
	g.handOn()
}

// handOn hands a slot just freed to the queued requests, if any.
func (g *Gate) handOn() {
	// The release above and this load pair with await's store of waiting
	// and its acquire: one of the two sides sees the other, so a freed slot
	// never goes unnoticed by a waiter.
	if g.waiting.Load() > 0 {
		g.mu.Lock()
		g.dispatchLocked(time.Now())
		g.armLocked()
		g.mu.Unlock()
	}
}
