package admit

import (
	"context"
	"fmt"
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
	maxTimeout   time.Duration
	minRemaining time.Duration
	maxCrit      wire.Criticality
	lim          *limit.Limiter
	dials        *killswitch.Dials
	saturated    func() bool
	onWait       func(time.Duration)
	onRefuse     func(context.Context, int, Decision)

	mu      sync.Mutex // guards q, armed, armedAt, sup
	q       *shed.Queue[*waiter]
	timer   *time.Timer // fires at the queue's NextExpiry; its func takes mu
	armed   bool
	armedAt time.Time
	waiting atomic.Int64 // q.Len(), for the lock-free fast path

	sup *supersede.Table[tableKey, *waiter] // guarded by mu; nil: supersession off

	waiters sync.Pool // of *waiter

	c counters
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	q, err := shed.New[*waiter](cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("%w: queue: %w", ErrInvalidConfig, err)
	}
	lim := cfg.Limiter
	if lim == nil {
		alg, err := cfg.Limit.New()
		if err != nil {
			return nil, fmt.Errorf("%w: limit: %w", ErrInvalidConfig, err)
		}
		lim = limit.NewLimiter(alg, limit.WithDials(cfg.Dials))
	}
	g := &Gate{
		maxTimeout:   cfg.MaxTimeout,
		minRemaining: cfg.MinRemaining,
		maxCrit:      cfg.MaxCriticality,
		lim:          lim,
		dials:        cfg.Dials,
		saturated:    cfg.ServiceSaturated,
		onWait:       cfg.OnQueueWait,
		onRefuse:     cfg.OnRefuse,
		q:            q,
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
func (g *Gate) Limiter() *limit.Limiter { return g.lim }

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
	g.c.arrived.Add(1)
	attempt := max(r.Attempt, 1)
	if attempt > 1 {
		g.c.retries.Add(1)
	}
	if g.dials != nil {
		if g.dials.ShedPPM() > 0 && g.dials.Shed(rand.Uint32N(1_000_000)) {
			return Ticket{}, g.refuse(ShedKillSwitch)
		}
	}

	budget := g.maxTimeout
	if r.HasTimeout && r.Timeout < budget {
		budget = r.Timeout
	}
	dl := now.Add(budget)
	if pdl, ok := ctx.Deadline(); ok && pdl.Before(dl) {
		dl = pdl
	}
	if !now.Before(dl.Add(-g.minRemaining)) {
		g.c.expired.Add(1)
		return Ticket{}, Decision{Answer: Expired}
	}
	if r.Throttle != nil && r.Throttle() {
		return Ticket{}, g.refuse(ShedThrottled)
	}

	crit := max(r.Criticality, wire.Sheddable)
	if r.TrustedCriticality {
		crit = min(crit, wire.CriticalPlus)
	} else {
		crit = min(crit, g.maxCrit)
	}

	if g.sup != nil && r.Key != "" {
		return g.admitKeyed(ctx, r, attempt, crit, dl)
	}
	if g.waiting.Load() == 0 { // nobody to overtake: try the fast path
		if p, ok := g.lim.AcquireAt(now); ok {
			return g.admitted(Ticket{g: g, permit: p, deadline: dl, attempt: attempt, crit: crit}, 0)
		}
	}
	wt := g.waiters.Get().(*waiter)
	g.mu.Lock()
	return g.queueLocked(ctx, time.Now(), wt, attempt, crit, dl) // now read under the lock: the queue sees time move forward
}

// admitted counts an admitted request, tells OnQueueWait how long it
// waited, and returns its ticket.
func (g *Gate) admitted(t Ticket, waited time.Duration) (Ticket, Decision) {
	g.c.started.Add(1)
	if g.onWait != nil {
		g.onWait(waited)
	}
	return t, Decision{}
}

// refuse counts a request shed for reason and returns its decision:
// Throttled for a throttled client or a key with too many waiters; ServiceOverloaded for the kill switch
// or when the service is saturated; else InstanceOverloaded.
func (g *Gate) refuse(reason ShedReason) Decision {
	g.c.shed[reason].Add(1)
	switch {
	case reason == ShedThrottled || reason == ShedKeyBusy:
		return Decision{Answer: Throttled, Reason: reason}
	case reason == ShedKillSwitch || g.saturated != nil && g.saturated():
		return Decision{Answer: ServiceOverloaded, Reason: reason}
	default:
		return Decision{Answer: InstanceOverloaded, Reason: reason}
	}
}

// drop counts and decides a request the queue refused (queued false) or
// gave up after it waited (queued true), for why.
func (g *Gate) drop(why shed.Reason, queued bool) Decision {
	switch why {
	case shed.Expired:
		g.c.expired.Add(1)
		if queued {
			g.c.expiredQueued.Add(1)
		}
		return Decision{Answer: Expired}
	case shed.Evicted:
		return g.refuse(ShedEvicted)
	case shed.QueueTimeout:
		return g.refuse(ShedQueueTimeout)
	default: // shed.QueueFull
		return g.refuse(ShedQueueFull)
	}
}

// leave counts a request whose context ended while it waited: Expired if
// by its deadline, else Canceled.
func (g *Gate) leave(ctx context.Context) Decision {
	if ctx.Err() == context.DeadlineExceeded {
		g.c.expired.Add(1)
		g.c.expiredQueued.Add(1)
		return Decision{Answer: Expired}
	}
	g.c.canceled.Add(1)
	return Decision{Answer: Canceled}
}

// queueLocked queues the request of wt at now, g.mu held, and waits until
// it gets a permit. It unlocks g.mu. If the request does not get a permit,
// the decision says why.
func (g *Gate) queueLocked(ctx context.Context, now time.Time, wt *waiter, attempt int, crit wire.Criticality, dl time.Time) (Ticket, Decision) {
	adm := g.q.PushAt(now, shed.Item[*waiter]{Payload: wt, Attempt: attempt, Criticality: crit, Deadline: dl})
	if adm.HasVictim() {
		v := adm.Victim.Payload
		g.endKeyedLocked(now, v, nil)
		v.ch <- grant{why: adm.VictimReason}
	}
	if !adm.Admitted() {
		g.endKeyedLocked(now, wt, nil)
		g.mu.Unlock()
		g.putWaiter(wt)
		return Ticket{}, g.drop(adm.Refused, false)
	}
	wt.handle = adm.Handle
	g.waiting.Store(int64(g.q.Len()))
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
		_, removed := g.q.Remove(wt.handle)
		if removed {
			g.endKeyedLocked(time.Now(), wt, nil)
			g.waiting.Store(int64(g.q.Len()))
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
			g.releaseAt(time.Now(), gr.permit, releaseIgnore)
			return Ticket{}, g.leave(ctx)
		}
	}
	g.putWaiter(wt)
	switch {
	case gr.superseded:
		g.c.superseded.Add(1)
		return Ticket{}, Decision{Answer: Superseded}
	case gr.why != shed.None:
		return Ticket{}, g.drop(gr.why, true)
	case !keyed:
		return g.admitted(Ticket{g: g, permit: gr.permit, deadline: dl, attempt: attempt, crit: crit}, gr.waited)
	}
	// A keyed request may have taken a twin's place, and with it the twin's
	// deadline in the queue: its own may have passed first.
	if now := time.Now(); !now.Before(dl.Add(-g.minRemaining)) {
		g.endKeyed(wt)
		g.releaseAt(now, gr.permit, releaseIgnore)
		g.c.expired.Add(1)
		g.c.expiredQueued.Add(1)
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
		it, why, ok := g.q.ExpireAt(now)
		if !ok {
			break
		}
		g.endKeyedLocked(now, it.Payload, nil)
		it.Payload.ch <- grant{why: why}
	}
	for g.q.Len() > 0 {
		p, ok := g.lim.AcquireAt(now)
		if !ok {
			break
		}
		it, why, _ := g.q.PopAt(now)
		wt := it.Payload
		waited := now.Sub(it.Enqueued)
		switch {
		case why != shed.None: // not expected: ExpireAt just ran at the same now
			p.IgnoreAt(now)
			p = limit.Permit{}
			g.endKeyedLocked(now, wt, nil)
		case wt.keyed:
			g.startKeyedLocked(now, wt)
			waited = now.Sub(wt.arrived) // it may have taken an older twin's place
		}
		wt.ch <- grant{permit: p, why: why, waited: waited}
	}
	g.waiting.Store(int64(g.q.Len()))
}

// armLocked sets the timer to fire at the queue's next expiry, unless it is
// already set to fire no later; it stops the timer when nothing can expire.
// A timer that fires early finds nothing due and sets itself again. g.mu
// must be held.
func (g *Gate) armLocked() {
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

// onTimer is the timer's function: it drops the requests whose time is up
// and sets the timer for the next.
func (g *Gate) onTimer() {
	g.mu.Lock()
	g.armed = false
	g.dispatchLocked(time.Now())
	g.armLocked()
	g.mu.Unlock()
}

// How a permit is released: see the package documentation.
const (
	releaseSuccess = iota
	releaseDropped
	releaseIgnore
)

// releaseAt ends a permit at now as kind says and, if requests are
// waiting, hands the freed slot on.
func (g *Gate) releaseAt(now time.Time, p limit.Permit, kind int) {
	switch kind {
	case releaseSuccess:
		p.SuccessAt(now)
	case releaseDropped:
		p.DroppedAt(now)
	default:
		p.IgnoreAt(now)
	}
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
