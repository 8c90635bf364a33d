package admit

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
)

// Gate is the admission gate of a server: a shell over a [Core], which
// takes every decision, that adds what production needs to carry them out:
// a mutex around the core's steps, a channel per waiting request, one timer
// for the whole queue, contexts, the wall clock and the kill switch's
// random draw. See the package documentation for a request's way through.
// Build one with [New]; the zero Gate is not usable.
type Gate struct {
	onWait   func(time.Duration)
	onRefuse func(context.Context, int, Decision)

	mu    sync.Mutex     // guards the core's locked steps and the waiters' refs
	core  *Core[*waiter] // the decisions
	timer *time.Timer    // fires at the queue's next expiry; its func takes mu

	waiters sync.Pool // of unkeyed *waiter
}

// waiter is a request waiting in the queue, or for its twin. It receives
// exactly one grant on ch, sent under the gate's mutex when an action
// starts or answers it, unless CancelAt takes it out first, in which case
// it receives none; so ch is empty again when the waiter goes back to the
// pool. ref is the core's latest reference to it, guarded by the mutex.
//
// A keyed waiter (a request with an idempotency key, supersession on) is
// allocated for its request and never pooled: the core's actions may name
// it after its request has left (a twin's result, say), matched by address.
type waiter struct {
	ch    chan grant // buffered, capacity 1: a send never blocks
	ref   Ref
	keyed bool
}

// grant is a waiter's Start or Respond action.
type grant struct {
	kind   ActionKind
	permit limit.Permit
	d      Decision
	waited time.Duration
	ref    Ref
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
		onWait:   cfg.OnQueueWait,
		onRefuse: cfg.OnRefuse,
		core:     core,
	}
	g.timer = time.AfterFunc(time.Hour, g.onTimer)
	g.timer.Stop()
	g.waiters.New = func() any { return &waiter{ch: make(chan grant, 1)} }
	return g, nil
}

// Limiter returns the concurrency limiter the gate admits requests with.
func (g *Gate) Limiter() *limit.Limiter { return g.core.lim }

// drawPPM is the kill switch's random draw: uniform in [0, 1e6).
func drawPPM() uint32 { return rand.Uint32N(1_000_000) }

// Admit takes a request that arrived at now through the steps of the
// package documentation and returns how it fared. If d admits it, the
// request holds a slot: run its work, with a context from t.Bind, then call
// t.Release exactly once. Otherwise t is the zero Ticket and d says what to
// answer; the request has been counted.
//
// ctx is the request's own context: its deadline counts, and if it ends
// while the request waits in the queue (or for its twin) the request leaves
// at once. Admit blocks only while the request waits.
func (g *Gate) Admit(ctx context.Context, now time.Time, r Request) (t Ticket, d Decision) {
	t, d = g.admit(ctx, now, &r)
	if g.onRefuse != nil && !d.Admitted() {
		g.onRefuse(ctx, max(r.Attempt, 1), d)
	}
	return t, d
}

func (g *Gate) admit(ctx context.Context, now time.Time, r *Request) (Ticket, Decision) {
	var ctxDL time.Time
	if d, ok := ctx.Deadline(); ok {
		ctxDL = d
	}
	keyed := r.Key != "" && g.core.sup != nil
	// EnterAt reads the core's configuration, counters and limiter, and an
	// atomic copy of the queue's length: no lock.
	var in Entered
	switch g.core.EnterAt(now, r, ctxDL, keyed, drawPPM, &in) {
	case Go:
		if g.onWait != nil {
			g.onWait(0)
		}
		return Ticket{g: g, permit: in.Permit, deadline: in.Deadline, attempt: in.Attempt, crit: in.Criticality}, Decision{}
	case Stop:
		return Ticket{}, in.Decision
	}
	e := in.Entry
	var wt *waiter
	var key *Key
	if keyed {
		k := KeyOf(r.KeyScope, r.Key)
		key = &k
		wt = &waiter{ch: make(chan grant, 1), keyed: true}
	} else {
		wt = g.waiters.Get().(*waiter)
	}
	g.mu.Lock()
	// now read under the lock: the queue sees time move forward.
	gr, done := g.execLocked(g.core.QueueAt(time.Now(), wt, e, key), wt)
	g.mu.Unlock()
	if !done {
		gr = g.wait(ctx, wt, e)
	}
	g.putWaiter(wt)
	if gr.kind == Start {
		if g.onWait != nil {
			g.onWait(gr.waited)
		}
		return Ticket{g: g, permit: gr.permit, deadline: e.Deadline, attempt: e.Attempt, crit: e.Criticality, ref: gr.ref}, Decision{}
	}
	return Ticket{}, g.core.Resolve(gr.d)
}

// execLocked carries out a step's actions, g.mu held: grants are sent to
// the waiters they name, but self's, which is returned (done true); refs are
// recorded; the timer is set or stopped.
func (g *Gate) execLocked(acts []Action[*waiter], self *waiter) (own grant, done bool) {
	for i := range acts {
		a := &acts[i]
		switch a.Kind {
		case Start, Respond:
			gr := grant{kind: a.Kind, permit: a.Permit, d: a.Decision, waited: a.Waited, ref: a.Ref}
			if a.H == self {
				own, done = gr, true
				continue
			}
			a.H.ch <- gr
		case Wait, Join:
			a.H.ref = a.Ref
		case Arm:
			g.timer.Reset(time.Until(a.At))
		case Disarm:
			g.timer.Stop()
		}
	}
	return own, done
}

// wait waits for the grant of the request of wt, which entered with e; if
// its context ends first, the request leaves the core (or, if the core let
// it go just then, gives its slot back).
func (g *Gate) wait(ctx context.Context, wt *waiter, e Entry) grant {
	select {
	case gr := <-wt.ch:
		return gr
	case <-ctx.Done():
	}
	g.mu.Lock()
	d, ok, acts := g.core.CancelAt(time.Now(), wt.ref)
	if ok {
		g.execLocked(acts, nil)
		g.mu.Unlock()
		return grant{kind: Respond, d: d}
	}
	g.mu.Unlock()
	gr := <-wt.ch // the core let it go under the lock: its grant is there
	if gr.kind != Start {
		return gr
	}
	// Admitted just as its context ended: pass the slot on.
	g.mu.Lock()
	d, acts = g.core.AbandonAt(time.Now(), gr.ref, &gr.permit, e.Deadline, shed.None)
	g.execLocked(acts, nil)
	g.mu.Unlock()
	return grant{kind: Respond, d: d}
}

// putWaiter returns a waiter to the pool, unless it is keyed.
func (g *Gate) putWaiter(wt *waiter) {
	if !wt.keyed {
		wt.ref = Ref{}
		g.waiters.Put(wt)
	}
}

// onTimer is the timer's function: it answers the queued requests whose
// time is up and hands free slots on.
func (g *Gate) onTimer() {
	g.mu.Lock()
	g.execLocked(g.core.TickAt(time.Now()), nil)
	g.mu.Unlock()
}

// Stats returns a snapshot of the gate's counters. The counters are read
// one by one, so a snapshot taken while requests run may be off by the
// requests in progress.
func (g *Gate) Stats() Stats {
	st := g.core.counterStats()
	g.mu.Lock()
	st.Queued = g.core.q.Len()
	st.Queue = g.core.q.Stats()
	g.mu.Unlock()
	return st
}
