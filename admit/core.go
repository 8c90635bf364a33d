package admit

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/supersede"
	"github.com/stormguard/stormguard/wire"
)

// Core is the admission gate's decisions, all of them and in their order,
// with time and randomness as arguments: the kill switch, the deadline and
// its bounds, the throttle, the criticality a caller is believed, request
// supersession, the concurrency limiter and the queue behind it, which
// request a freed slot goes to, what each refusal is answered, the release
// of admitted work (what it teaches the limiter, what counts as goodput,
// whether a twin's result is replayed to the requests that joined it), and
// the counters. It never reads the clock, starts no goroutine and blocks on
// nothing; it is not safe for concurrent use, except as said below.
//
// Its steps take an event and return the actions that carry it out, in the
// shape of raft's Step and Ready:
//
//	event                       step                     actions
//	a request arrives           EnterAt, then QueueAt    Start, Respond, Wait, Join
//	                            if it says Hold
//	admitted work ends          ReleaseAt (unkeyed),     for the queued and joined: Start,
//	                            then DispatchAt if it    Respond (a replayed result); the
//	                            says so; EndAt (keyed)   joined go through again
//	the caller of a queued or   CancelAt                 its decision
//	joined request leaves
//	a Start's caller had left,  AbandonAt                its decision
//	or the shell could not run
//	it
//	the queue's timer fires     TickAt                   Respond (expired), Start
//
// and every step that changes the queue may add Arm or Disarm for its
// timer. The shells only execute the actions: [Gate] (a mutex, a channel per
// waiting request, one timer, contexts) and the simulator (package sim,
// which drives one Core per replica of every service in virtual time). So
// both take the same decisions on the same sequence of events.
//
// EnterAt and ReleaseAt touch only the core's configuration, its counters,
// the limiter and an atomic copy of the queue's length: a shell may call
// them without its lock, concurrently with each other and with one locked
// step (the Gate's fast path), unless the core was built OneGoroutine.
// Every other step must be serialised. Stats may be called concurrently
// with EnterAt and ReleaseAt; its queue figures need the shell's lock.
//
// T is the shell's handle of a request (a *waiter, a simulator's attempt
// id), comparable so that its actions can be matched to it.
type Core[T comparable] struct {
	maxTimeout   time.Duration // 0: no bound (WithoutMaxTimeout)
	minRemaining time.Duration
	maxCrit      wire.Criticality
	reject       bool // RejectAtLimit
	open         bool // no limit, no deadline bound, no supersession: only the kill switch may refuse
	one          bool // OneGoroutine: plain counters
	saturated    func() bool
	dials        *killswitch.Dials
	lim          *limit.Limiter // nil: no limit (WithoutLimit)
	q            *shed.Queue[qent[T]]
	waiting      atomic.Int64 // q.Len(), for EnterAt and ReleaseAt

	sup    *supersede.Table[Key, int32] // keyed requests by index; nil: supersession off
	keyed  []keyedReq[T]
	freeK  []int32
	reruns []int32

	armed   bool
	armedAt time.Time
	last    time.Time // the latest time a locked step saw: the queue's clock
	ready   []Action[T]
	drained []T
	c       counters
}

// qent is a queued request: the shell's handle and, for a keyed request,
// its index in keyed plus one (0: unkeyed).
type qent[T any] struct {
	h T
	k int32
}

// keyedReq is a request the supersession table may hold: what the core
// needs to start it, end its key, or send it through again.
type keyedReq[T any] struct {
	h       T
	gen     uint32
	state   uint8
	key     Key
	e       Entry
	q       shed.Handle // while queued
	arrived time.Time   // when it last arrived at the table
}

// The states of a keyedReq.
const (
	kFree uint8 = iota
	kNew
	kQueued
	kJoined
	kRunning
)

// CoreOption changes a [Core] built by [NewCore], for models of servers
// that lack one of the gate's parts (the simulator's services without a
// policy file's server block).
type CoreOption func(*coreOptions)

type coreOptions struct{ noLimit, noMaxTimeout, one bool }

// WithoutLimit: the core has no concurrency limit; every request that gets
// past the other steps is admitted at once (Config.Limit, Limiter and
// Queue are not used).
func WithoutLimit() CoreOption { return func(o *coreOptions) { o.noLimit = true } }

// WithoutMaxTimeout: the core does not bound deadlines; a request's
// deadline is its caller's timeout or its context's deadline, if any, and a
// request with neither has none (Config.MaxTimeout is not used).
func WithoutMaxTimeout() CoreOption { return func(o *coreOptions) { o.noMaxTimeout = true } }

// OneGoroutine: every step of the core, and Stats, run on one goroutine
// (the simulator's), so its counters need no atomics.
func OneGoroutine() CoreOption { return func(o *coreOptions) { o.one = true } }

// NewCore validates cfg, fills its defaults and builds a Core with an empty
// queue and, unless cfg.Limiter is set, a fresh [limit.Limiter] from
// cfg.Limit that honours cfg.Dials. It reads cfg.ServiceSaturated and the
// kill switch's shed fraction from cfg.Dials; the other hooks (OnQueueWait,
// OnRefuse) are the shell's.
func NewCore[T comparable](cfg Config, opts ...CoreOption) (*Core[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o coreOptions
	for _, f := range opts {
		f(&o)
	}
	cfg = cfg.WithDefaults()
	if o.noLimit || cfg.RejectAtLimit {
		// Nothing ever waits in its queue: it needs no room.
		cfg.Queue.Capacity = 1
	}
	q, err := shed.New[qent[T]](cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("%w: queue: %w", ErrInvalidConfig, err)
	}
	c := &Core[T]{
		maxTimeout:   cfg.MaxTimeout,
		minRemaining: cfg.MinRemaining,
		maxCrit:      cfg.MaxCriticality,
		reject:       cfg.RejectAtLimit,
		saturated:    cfg.ServiceSaturated,
		dials:        cfg.Dials,
		q:            q,
		one:          o.one,
	}
	if o.noMaxTimeout {
		c.maxTimeout = 0
	}
	if !o.noLimit {
		c.lim = cfg.Limiter
		if c.lim == nil {
			alg, err := cfg.Limit.New()
			if err != nil {
				return nil, fmt.Errorf("%w: limit: %w", ErrInvalidConfig, err)
			}
			c.lim = limit.NewLimiter(alg, limit.WithDials(cfg.Dials))
		}
	}
	if s := cfg.Supersede; s != nil {
		d := s.WithDefaults()
		c.sup = supersede.New[Key, int32](d.MaxKeys, d.TTL, supersede.WithMaxWaiters(d.MaxWaiters))
	}
	c.open = c.lim == nil && c.maxTimeout == 0 && c.sup == nil
	return c, nil
}

// Limiter returns the concurrency limiter the core admits requests with;
// nil for a core built WithoutLimit.
func (c *Core[T]) Limiter() *limit.Limiter { return c.lim }

// Queued returns the number of requests waiting in the queue.
func (c *Core[T]) Queued() int { return c.q.Len() }

// Superseding reports whether the core collapses requests by idempotency
// key (Config.Supersede is set): only then does QueueAt read a key.
func (c *Core[T]) Superseding() bool { return c.sup != nil }

// Entry is what the core decided of a request that may go on: its attempt
// number (1 or more), its criticality as the core believes it, and its
// deadline (the zero Time: none, only WithoutMaxTimeout).
type Entry struct {
	Attempt     int
	Criticality wire.Criticality
	Deadline    time.Time
}

// Entered is what [Core.EnterAt] decided of a request: its Entry (for
// Go and Hold), its permit (Go) or its decision (Stop).
type Entered struct {
	Entry
	Permit   limit.Permit
	Decision Decision
}

// EnterAt is the first part of a request's way, steps 1 to 3 of the
// package documentation and the admission at once, for request r arriving
// at now: it counts r (offered load), then
//
//  1. the kill switch: with probability Dials.ShedFraction, r is refused
//     as ServiceOverloaded (ShedKillSwitch). draw is the random draw, a
//     uniform integer in [0, 1e6); it is called only while the dials shed
//     a fraction.
//  2. its deadline becomes the earliest of now + MaxTimeout, now + its
//     timeout from the wire, and ctxDeadline (the zero Time: none); with
//     MinRemaining or less left it is Expired.
//  3. r.Throttle, if set and true: Throttled.
//
// Then, unless keyed (r carries an idempotency key and [Core.Superseding]),
// it is admitted at once if nobody is queued and the limiter grants a slot
// (Go, with out.Permit), or refused with Config.RejectAtLimit (Stop).
// Otherwise the step is Hold: QueueAt takes it on with out.Entry. A Stop's
// out.Decision has been counted, and ServiceSaturated asked. out is the
// caller's, written in place (an Entered is too big to return cheaply on
// the gate's hot path): Go writes its Entry and Permit, Hold its Entry,
// Stop its Decision; the other fields keep what they held.
func (c *Core[T]) EnterAt(now time.Time, r *Request, ctxDeadline time.Time, keyed bool, draw func() uint32, out *Entered) Step {
	c.inc(&c.c.arrived)
	if r.Attempt > 1 {
		c.inc(&c.c.retries)
	}
	if c.open && !r.HasTimeout && r.Throttle == nil && !keyed && ctxDeadline.IsZero() && (c.dials == nil || c.dials.ShedPPM() == 0) {
		// Every step below would let it through: no deadline to bound or
		// check, no throttle, no limit, no key (the simulator's services
		// without a limiter, mostly).
		c.inc(&c.c.started)
		out.Attempt, out.Criticality = max(r.Attempt, 1), c.believe(r)
		// Apart: as one assignment, the pair is built on the stack and
		// copied.
		out.Deadline = time.Time{}
		out.Permit = limit.Permit{}
		return Go
	}
	if c.dials != nil && c.dials.ShedPPM() > 0 && c.dials.Shed(draw()) {
		out.Decision = c.refuse(ShedKillSwitch) // ServiceOverloaded: nothing to resolve
		return Stop
	}
	// Step 2: the deadline, dl, and the time left before it, left.
	var dl time.Time
	var left time.Duration
	has := false
	switch {
	case c.maxTimeout > 0:
		left = c.maxTimeout
		if r.HasTimeout && r.Timeout < left {
			left = r.Timeout
		}
		dl, has = now.Add(left), true
	case r.HasTimeout:
		left = r.Timeout
		dl, has = now.Add(left), true
	}
	if !ctxDeadline.IsZero() && (!has || ctxDeadline.Before(dl)) {
		// dl is at most now + the budget, so the difference cannot
		// saturate high; saturating low it is expired too.
		dl, left, has = ctxDeadline, ctxDeadline.Sub(now), true
	}
	if has && left <= c.minRemaining {
		c.inc(&c.c.expired)
		out.Decision = Decision{Answer: Expired}
		return Stop
	}
	// Step 3: the throttle; then the criticality believed.
	if r.Throttle != nil && r.Throttle() {
		out.Decision = c.refuse(ShedThrottled)
		return Stop
	}
	out.Attempt, out.Criticality, out.Deadline = max(r.Attempt, 1), c.believe(r), dl
	if keyed && c.sup != nil {
		return Hold
	}
	if c.waiting.Load() == 0 {
		var ok bool
		if out.Permit, ok = c.acquire(now); ok {
			c.inc(&c.c.started)
			return Go
		}
		if c.reject {
			out.Decision = c.Resolve(c.refuse(ShedQueueFull))
			return Stop
		}
	}
	return Hold
}

// believe returns the criticality the core believes r has.
func (c *Core[T]) believe(r *Request) wire.Criticality {
	crit := max(r.Criticality, wire.Sheddable)
	if r.TrustedCriticality {
		return min(crit, wire.CriticalPlus)
	}
	return min(crit, c.maxCrit)
}

// acquire asks the limiter for a slot at now; without a limiter every ask
// is granted, with the zero Permit.
func (c *Core[T]) acquire(now time.Time) (limit.Permit, bool) {
	if c.lim == nil {
		return limit.Permit{}, true
	}
	return c.lim.AcquireAt(now)
}

// QueueAt is the rest of the way of request h, which EnterAt held with
// entry e, at now: with an idempotency key (key not nil, supersession on)
// the supersession table decides first (step 4 of the package
// documentation: served as usual, in a queued twin's place, waiting for a
// twin in service, or refused); then it is admitted if nobody is queued
// and the limiter grants a slot, else queued (or refused, or a queued
// request is given up to make room). The actions say what became of h and
// of any other request the step moved.
func (c *Core[T]) QueueAt(now time.Time, h T, e Entry, key *Key) []Action[T] {
	now = c.clock(now)
	c.ready = c.ready[:0]
	if key != nil && c.sup != nil {
		c.arriveKeyed(now, c.newKeyed(h, *key, e, now))
	} else if !c.enqueue(now, h, 0, e) {
		return c.ready // refused, and nothing else moved
	}
	c.dispatch(now)
	c.arm()
	return c.ready
}

// ArriveAt is EnterAt and, if it holds the request, QueueAt, for a shell
// on one goroutine: the actions say what became of h (Start with its
// permit, Respond, Wait or Join) and of the others.
func (c *Core[T]) ArriveAt(now time.Time, h T, r *Request, ctxDeadline time.Time, key *Key, draw func() uint32) []Action[T] {
	var in Entered
	switch c.EnterAt(now, r, ctxDeadline, key != nil, draw, &in) {
	case Go:
		c.ready = append(c.ready[:0], Action[T]{Kind: Start, H: h, Permit: in.Permit})
		return c.ready
	case Stop:
		c.ready = append(c.ready[:0], Action[T]{Kind: Respond, H: h, Decision: in.Decision})
		return c.ready
	}
	return c.QueueAt(now, h, in.Entry, key)
}

// Resolve returns d as the caller is to be told it: an InstanceOverloaded
// refusal becomes ServiceOverloaded when Config.ServiceSaturated says the
// whole service is out of capacity. The decisions of the actions are
// before it was asked (it is a callback, and the locked steps run none):
// a shell resolves each refusal it answers, outside its lock.
func (c *Core[T]) Resolve(d Decision) Decision {
	if d.Answer == InstanceOverloaded && c.saturated != nil && c.saturated() {
		d.Answer = ServiceOverloaded
	}
	return d
}

// refuse counts a request shed for reason and returns its decision:
// Throttled for a throttled client or a key with too many waiters;
// ServiceOverloaded for the kill switch; else InstanceOverloaded (see
// Resolve).
func (c *Core[T]) refuse(reason ShedReason) Decision {
	c.inc(&c.c.shed[reason])
	switch reason {
	case ShedThrottled, ShedKeyBusy:
		return Decision{Answer: Throttled, Reason: reason}
	case ShedKillSwitch:
		return Decision{Answer: ServiceOverloaded, Reason: reason}
	default:
		return Decision{Answer: InstanceOverloaded, Reason: reason}
	}
}

// drop counts and decides a request the queue refused (queued false) or
// gave up after it waited (queued true), for why.
func (c *Core[T]) drop(why shed.Reason, queued bool) Decision {
	switch why {
	case shed.Expired:
		c.inc(&c.c.expired)
		if queued {
			c.inc(&c.c.expiredQueued)
		}
		return Decision{Answer: Expired}
	case shed.Evicted:
		return c.refuse(ShedEvicted)
	case shed.QueueTimeout:
		return c.refuse(ShedQueueTimeout)
	default: // shed.QueueFull
		return c.refuse(ShedQueueFull)
	}
}

// leave counts a request whose caller went away before it started: Expired
// if its deadline (the zero Time: none) had passed, else Canceled.
func (c *Core[T]) leave(now, deadline time.Time) Decision {
	if late(now, deadline) {
		c.inc(&c.c.expired)
		c.inc(&c.c.expiredQueued)
		return Decision{Answer: Expired}
	}
	c.inc(&c.c.canceled)
	return Decision{Answer: Canceled}
}

// clock returns now, or the latest time a locked step saw if now is
// before it: the queue never sees time go back, whatever order a shell's
// goroutines read their clocks in.
func (c *Core[T]) clock(now time.Time) time.Time {
	if now.Before(c.last) {
		return c.last
	}
	c.last = now
	return now
}

// emit adds an action to the step's answer.
func (c *Core[T]) emit(a Action[T]) { c.ready = append(c.ready, a) }

// answer emits request h's decision.
func (c *Core[T]) answer(h T, d Decision) {
	c.ready = append(c.ready, Action[T]{Kind: Respond, H: h, Decision: d})
}

// enqueue queues request h (keyed index plus one k1, or 0) of entry e at
// now: Wait, or Respond if the queue refuses it; a queued request the queue
// gives up to make room is answered too. It reports whether the queue
// changed.
func (c *Core[T]) enqueue(now time.Time, h T, k1 int32, e Entry) (changed bool) {
	adm := c.q.PushAt(now, shed.Item[qent[T]]{Payload: qent[T]{h: h, k: k1}, Attempt: e.Attempt, Criticality: e.Criticality, Deadline: e.Deadline})
	switch {
	case !adm.Admitted():
		c.answerQueued(now, qent[T]{h: h, k: k1}, c.drop(adm.Refused, false))
	case k1 != 0:
		kr := &c.keyed[k1-1]
		kr.q, kr.state = adm.Handle, kQueued
		c.emit(Action[T]{Kind: Wait, H: h, Ref: Ref{k: k1, gen: kr.gen}})
	default:
		c.emit(Action[T]{Kind: Wait, H: h, Ref: Ref{q: adm.Handle}})
	}
	if adm.HasVictim() {
		c.answerQueued(now, adm.Victim.Payload, c.drop(adm.VictimReason, true))
	} else if !adm.Admitted() {
		return false
	}
	c.waiting.Store(int64(c.q.Len()))
	return true
}

// answerQueued answers a request that leaves the queue unrun with d, and
// frees its key.
func (c *Core[T]) answerQueued(now time.Time, qe qent[T], d Decision) {
	if qe.k != 0 {
		c.endKey(now, qe.k-1, nil, false)
		c.freeKeyed(qe.k - 1)
	}
	c.answer(qe.h, d)
}

// dispatch answers the queued requests whose time is up at now, then
// hands slots to queued requests, in the queue's order, while the limiter
// grants them.
func (c *Core[T]) dispatch(now time.Time) {
	if c.q.Len() == 0 {
		return
	}
	for {
		it, why, ok := c.q.ExpireAt(now)
		if !ok {
			break
		}
		c.answerQueued(now, it.Payload, c.drop(why, true))
	}
	for c.q.Len() > 0 {
		p, ok := c.acquire(now)
		if !ok {
			break
		}
		it, why, _ := c.q.PopAt(now)
		if why != shed.None { // not expected: ExpireAt just ran at the same now
			p.IgnoreAt(now)
			c.answerQueued(now, it.Payload, c.drop(why, true))
			continue
		}
		c.grant(now, it, p)
	}
	c.waiting.Store(int64(c.q.Len()))
}

// grant starts a request that leaves the queue with permit p.
func (c *Core[T]) grant(now time.Time, it shed.Item[qent[T]], p limit.Permit) {
	qe := it.Payload
	if qe.k == 0 {
		c.inc(&c.c.started)
		c.emit(Action[T]{Kind: Start, H: qe.h, Permit: p, Waited: now.Sub(it.Enqueued)})
		return
	}
	k := qe.k - 1
	kr := &c.keyed[k]
	// It may have taken an older twin's place, and with it the twin's
	// deadline in the queue: its own may have passed first.
	if !kr.e.Deadline.IsZero() && kr.e.Deadline.Sub(now) <= c.minRemaining {
		p.IgnoreAt(now)
		c.inc(&c.c.expired)
		c.inc(&c.c.expiredQueued)
		c.answerQueued(now, qe, Decision{Answer: Expired})
		return
	}
	if h, _, ok := c.sup.Held(kr.key); ok && h == k {
		c.sup.StartAt(now, kr.key)
	}
	kr.state = kRunning
	c.inc(&c.c.started)
	c.emit(Action[T]{Kind: Start, H: qe.h, Permit: p, Waited: now.Sub(kr.arrived), Ref: Ref{k: qe.k, gen: kr.gen}})
}

// arm emits Arm when the queue's next expiry is sooner than the timer is
// set for, or Disarm when nothing queued can expire.
func (c *Core[T]) arm() {
	at, ok := c.q.NextExpiry()
	if !ok {
		if c.armed {
			c.armed = false
			c.emit(Action[T]{Kind: Disarm})
		}
		return
	}
	if c.armed && !at.Before(c.armedAt) {
		return
	}
	c.armed, c.armedAt = true, at
	c.emit(Action[T]{Kind: Arm, At: at})
}

// Stats returns a snapshot of the core's counters, its limit and its
// queue. Counters may be read while another goroutine decides; the queue's
// length and account may not (a Gate reads them under its mutex).
func (c *Core[T]) Stats() Stats {
	st := c.counterStats()
	st.Queued = c.q.Len()
	st.Queue = c.q.Stats()
	return st
}

// counterStats is Stats without the queue.
func (c *Core[T]) counterStats() Stats {
	// Outcomes are read before the starts, and the starts before the
	// arrivals, so that a request that moves on meanwhile is never counted
	// as ended but not started, or started but not arrived.
	expiredQueued := atomic.LoadUint64(&c.c.expiredQueued)
	wasted, late := atomic.LoadUint64(&c.c.fates[FateWasted]), atomic.LoadUint64(&c.c.fates[FateWastedLate])
	st := Stats{
		WastedLate:    late,
		ExpiredQueued: expiredQueued,
		Goodput:       atomic.LoadUint64(&c.c.fates[FateGoodput]),
		Failed:        atomic.LoadUint64(&c.c.fates[FateFailed]),
		Wasted:        wasted + late,
		Expired:       atomic.LoadUint64(&c.c.expired),
		Canceled:      atomic.LoadUint64(&c.c.canceled),
		Superseded:    atomic.LoadUint64(&c.c.superseded),
		Joined:        atomic.LoadUint64(&c.c.joined),
	}
	for i := range st.Shed {
		st.Shed[i] = atomic.LoadUint64(&c.c.shed[i])
	}
	started := atomic.LoadUint64(&c.c.started)
	st.InFlight = int(started - st.Goodput - st.Failed - st.Wasted)
	if c.lim != nil {
		st.Limit = c.lim.Limit()
	}
	st.Retries = atomic.LoadUint64(&c.c.retries)
	st.Arrived = atomic.LoadUint64(&c.c.arrived)
	st.Joining = int(atomic.LoadInt64(&c.c.joining))
	return st
}
