package admit

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// Core is the admission gate's decisions with time as an argument: the
// deadline and its bounds, the throttle, the criticality a caller is
// believed, the concurrency limiter and the queue behind it, which request
// a freed slot goes to, what each refusal is answered, and the counters. It
// never reads the clock, starts no goroutine and blocks on nothing; it is
// not safe for concurrent use (its counters may be read concurrently, with
// [Core.Stats], while one goroutine decides).
//
// [Gate] is a shell over a Core: it calls it under its mutex with
// time.Now(), and adds a channel per waiting request, one timer for the
// queue's next expiry, the kill switch's random draw, contexts and request
// supersession. The simulator (package sim, a service whose scenario
// references a policy file's server block) drives a Core on its one
// goroutine with virtual time. So both take the same decisions on the same
// sequence of arrivals and releases.
//
// T is the caller's handle of a queued request: a waiter, a simulator's
// attempt id. A request's way through a Core:
//
//	Arrive            count it (offered load)
//	CheckAt           its deadline, Expired, Throttled, its criticality
//	AcquireAt         admitted at once: nobody queued and the limiter grants
//	PushAt            or queued (or refused: queue full; a victim evicted)
//	ExpireAt, GrantAt when time passes or a slot frees: drop the requests
//	                  whose time is up, then grant permits in queue order
//	ReleaseAt         an admitted request's work ended: count it, free its slot
//
// After ReleaseAt (or any permit's release) the caller runs ExpireAt and
// GrantAt until they return false, and answers what they return; after
// PushAt it does the same (a slot may be free) and sets a timer for
// [Core.NextExpiry].
type Core[T any] struct {
	maxTimeout   time.Duration
	minRemaining time.Duration
	maxCrit      wire.Criticality
	saturated    func() bool
	lim          *limit.Limiter
	q            *shed.Queue[T]
	c            counters
}

// NewCore validates cfg, fills its defaults and builds a Core with an empty
// queue and, unless cfg.Limiter is set, a fresh [limit.Limiter] from
// cfg.Limit that honours cfg.Dials. It reads cfg.ServiceSaturated; the
// other hooks (OnQueueWait, OnRefuse) and the kill switch's shed fraction
// are the shell's.
func NewCore[T any](cfg Config) (*Core[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	q, err := shed.New[T](cfg.Queue)
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
	return &Core[T]{
		maxTimeout:   cfg.MaxTimeout,
		minRemaining: cfg.MinRemaining,
		maxCrit:      cfg.MaxCriticality,
		saturated:    cfg.ServiceSaturated,
		lim:          lim,
		q:            q,
	}, nil
}

// Limiter returns the concurrency limiter the core admits requests with.
func (c *Core[T]) Limiter() *limit.Limiter { return c.lim }

// Queued returns the number of requests waiting in the queue.
func (c *Core[T]) Queued() int { return c.q.Len() }

// NextExpiry returns when the next queued request's time is up, if any.
func (c *Core[T]) NextExpiry() (time.Time, bool) { return c.q.NextExpiry() }

// Entry is what [Core.CheckAt] decided of a request that may go on: its
// attempt number (1 or more), its criticality as the core believes it, and
// its deadline.
type Entry struct {
	Attempt     int
	Criticality wire.Criticality
	Deadline    time.Time
}

// Arrive counts an arriving request (offered load; a retry if its attempt
// number is above 1) and returns its attempt number, 1 or more.
func (c *Core[T]) Arrive(r Request) int {
	c.c.arrived.Add(1)
	attempt := max(r.Attempt, 1)
	if attempt > 1 {
		c.c.retries.Add(1)
	}
	return attempt
}

// CheckAt is steps 2 and 3 of the package documentation for request r,
// arrived at now: its deadline is the earliest of now + MaxTimeout, now +
// its timeout from the wire, and ctxDeadline (the zero Time: none); if that
// leaves MinRemaining or less it is [Expired]; if r.Throttle says so it is
// [Throttled]. ok false: d says what to answer, and it has been counted.
// Otherwise e is what the request goes on with.
func (c *Core[T]) CheckAt(now time.Time, r Request, ctxDeadline time.Time) (e Entry, d Decision, ok bool) {
	budget := c.maxTimeout
	if r.HasTimeout && r.Timeout < budget {
		budget = r.Timeout
	}
	dl := now.Add(budget)
	if !ctxDeadline.IsZero() && ctxDeadline.Before(dl) {
		dl = ctxDeadline
	}
	// dl − now ≤ MinRemaining, as !now.Before(dl.Add(−MinRemaining)) with
	// one Time operation instead of two (dl is at most now + budget, so the
	// difference cannot saturate high; saturating low it is expired too).
	if dl.Sub(now) <= c.minRemaining {
		c.c.expired.Add(1)
		return Entry{}, Decision{Answer: Expired}, false
	}
	if r.Throttle != nil && r.Throttle() {
		return Entry{}, c.Refuse(ShedThrottled), false
	}
	crit := max(r.Criticality, wire.Sheddable)
	if r.TrustedCriticality {
		crit = min(crit, wire.CriticalPlus)
	} else {
		crit = min(crit, c.maxCrit)
	}
	return Entry{Attempt: max(r.Attempt, 1), Criticality: crit, Deadline: dl}, Decision{}, true
}

// AcquireAt admits a request at once at now if nobody is queued (a request
// never overtakes those waiting) and the limiter grants a slot. The caller
// then counts it with [Core.Admitted].
func (c *Core[T]) AcquireAt(now time.Time) (limit.Permit, bool) {
	if c.q.Len() > 0 {
		return limit.Permit{}, false
	}
	return c.lim.AcquireAt(now)
}

// Admitted counts a request admitted, at once or from the queue.
func (c *Core[T]) Admitted() { c.c.started.Add(1) }

// PushAt queues request h of entry e at now. If the queue refuses it, d
// says what to answer (counted: [InstanceOverloaded], or [Expired]). A
// queued request the queue gave up to make room (adm.HasVictim) is the
// caller's to answer, with Drop(adm.VictimReason, true).
func (c *Core[T]) PushAt(now time.Time, h T, e Entry) (adm shed.Admission[T], d Decision) {
	adm = c.q.PushAt(now, shed.Item[T]{Payload: h, Attempt: e.Attempt, Criticality: e.Criticality, Deadline: e.Deadline})
	if !adm.Admitted() {
		d = c.Drop(adm.Refused, false)
	}
	return adm, d
}

// ExpireAt takes out of the queue a request whose time is up at now, if
// any, and says why; answer it with Drop(why, true).
func (c *Core[T]) ExpireAt(now time.Time) (h T, why shed.Reason, ok bool) {
	it, why, ok := c.q.ExpireAt(now)
	return it.Payload, why, ok
}

// GrantAt hands a slot to the request the queue serves next, if one waits
// and the limiter grants a slot at now: it leaves the queue with permit p
// (why is shed.None; count it with [Core.Admitted] once the shell has
// admitted it). Run after ExpireAt has returned false at the same now, the
// queue never gives the request up instead; should it (why not None), p
// is the zero Permit, and the request is to be answered Drop(why, true).
func (c *Core[T]) GrantAt(now time.Time) (it shed.Item[T], p limit.Permit, why shed.Reason, ok bool) {
	if c.q.Len() == 0 {
		return it, p, shed.None, false
	}
	p, ok = c.lim.AcquireAt(now)
	if !ok {
		return it, p, shed.None, false
	}
	it, why, _ = c.q.PopAt(now)
	if why != shed.None {
		p.IgnoreAt(now)
		p = limit.Permit{}
	}
	return it, p, why, true
}

// TakeAt takes the next queued request out of the queue at now, whatever
// the limit and its deadline: for a shell that loses its queue (a crash, a
// shutdown) and answers each request itself. It counts nothing.
func (c *Core[T]) TakeAt(now time.Time) (T, bool) {
	it, _, ok := c.q.PopAt(now)
	return it.Payload, ok
}

// Remove takes a queued request out of the queue (its caller left).
func (c *Core[T]) Remove(h shed.Handle) (T, bool) {
	it, ok := c.q.Remove(h)
	return it.Payload, ok
}

// Swap puts x in the queued request's place (supersession), keeping its
// place and deadline; it returns the request it replaced.
func (c *Core[T]) Swap(h shed.Handle, x T) (T, bool) { return c.q.Swap(h, x) }

// Refuse counts a request shed for reason and returns its decision:
// Throttled for a throttled client or a key with too many waiters;
// ServiceOverloaded for the kill switch or when the service is saturated;
// else InstanceOverloaded.
func (c *Core[T]) Refuse(reason ShedReason) Decision {
	c.c.shed[reason].Add(1)
	switch {
	case reason == ShedThrottled || reason == ShedKeyBusy:
		return Decision{Answer: Throttled, Reason: reason}
	case reason == ShedKillSwitch || c.saturated != nil && c.saturated():
		return Decision{Answer: ServiceOverloaded, Reason: reason}
	default:
		return Decision{Answer: InstanceOverloaded, Reason: reason}
	}
}

// Drop counts and decides a request the queue refused (queued false) or
// gave up after it waited (queued true), for why.
func (c *Core[T]) Drop(why shed.Reason, queued bool) Decision {
	switch why {
	case shed.Expired:
		c.c.expired.Add(1)
		if queued {
			c.c.expiredQueued.Add(1)
		}
		return Decision{Answer: Expired}
	case shed.Evicted:
		return c.Refuse(ShedEvicted)
	case shed.QueueTimeout:
		return c.Refuse(ShedQueueTimeout)
	default: // shed.QueueFull
		return c.Refuse(ShedQueueFull)
	}
}

// ReleaseAt ends at now the permit p of an admitted request whose deadline
// is deadline and counts it, as [Ticket.Release] documents: a panic first,
// then a deadline that passed, then a caller that went away (gone), then
// o. The caller then hands the freed slot on (ExpireAt, GrantAt).
func (c *Core[T]) ReleaseAt(now time.Time, p limit.Permit, deadline time.Time, gone bool, o Outcome) {
	switch {
	case o == Panicked:
		c.c.failed.Add(1)
		p.IgnoreAt(now)
	case !now.Before(deadline): // the work outlived its deadline
		c.c.wasted.Add(1)
		c.c.wastedLate.Add(1)
		p.DroppedAt(now)
	case gone: // the caller went away
		c.c.wasted.Add(1)
		p.IgnoreAt(now)
	case o == Succeeded:
		c.c.goodput.Add(1)
		p.SuccessAt(now)
	case o == SucceededUntimed:
		c.c.goodput.Add(1)
		p.IgnoreAt(now)
	case o == FailedOverload:
		c.c.failed.Add(1)
		p.DroppedAt(now)
	default: // Failed
		c.c.failed.Add(1)
		p.IgnoreAt(now)
	}
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
	wastedLate, expiredQueued := c.c.wastedLate.Load(), c.c.expiredQueued.Load()
	st := Stats{
		WastedLate:    wastedLate,
		ExpiredQueued: expiredQueued,
		Goodput:       c.c.goodput.Load(),
		Failed:        c.c.failed.Load(),
		Wasted:        c.c.wasted.Load(),
		Expired:       c.c.expired.Load(),
		Canceled:      c.c.canceled.Load(),
		Superseded:    c.c.superseded.Load(),
		Joined:        c.c.joined.Load(),
	}
	for i := range st.Shed {
		st.Shed[i] = c.c.shed[i].Load()
	}
	started := c.c.started.Load()
	st.InFlight = int(started - st.Goodput - st.Failed - st.Wasted)
	st.Limit = c.lim.Limit()
	st.Retries = c.c.retries.Load()
	st.Arrived = c.c.arrived.Load()
	st.Joining = int(c.c.joining.Load())
	return st
}
