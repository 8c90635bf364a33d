package sim

import (
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/wire"
)

// shedPushback is the Retry-After a service with stormguard's defenses
// sends with a rejection.
const shedPushback = time.Second

// Handle dispatches one event; the engine's clock reads ev.At.
func (w *world) Handle(e *engine.Engine, ev engine.Event) {
	switch ev.Kind {
	case evArrive:
		w.onArrive(int32(ev.Target))
	case evThink:
		w.newUserRequest(int32(ev.Target), int32(ev.A))
	case evDeliver:
		if a := w.att(ev.A, ev.B); a != nil {
			w.deliver(int32(ev.A))
		}
	case evWorkDone:
		if a := w.att(ev.A, ev.B); a != nil {
			w.workDone(int32(ev.A))
		}
	case evReply:
		if a := w.att(ev.A, ev.B>>8); a != nil {
			w.onReply(int32(ev.A), int(ev.B&0xff))
		}
	case evTimeout:
		if a := w.att(ev.A, ev.B); a != nil && a.waiting {
			w.onTimeout(int32(ev.A))
		}
	case evRetry:
		if r := &w.reqs[ev.A]; r.live && r.gen == uint32(ev.B) {
			w.sendAttempt(int32(ev.A))
		}
	case evExpire:
		w.onExpire(int32(ev.Target), int32(ev.A))
	case evBin:
		w.onBin()
	case evTriggerOn:
		w.trigger(int(ev.Target), true)
	case evTriggerOff:
		w.trigger(int(ev.Target), false)
	case evFleetSync:
		w.onFleetSync(int32(ev.Target), ev.A, ev.B)
	case evFleetGrant:
		w.onFleetGrant(int32(ev.Target), ev.A, ev.B)
	case evPSDone:
		w.onPSDone(int32(ev.Target), int32(ev.A))
	case evOverheadDone:
		w.onOverheadDone(int32(ev.Target), int32(ev.A), uint32(ev.B))
	case evRelease:
		if a := w.att(ev.A, ev.B); a != nil {
			w.onRelease(int32(ev.A))
		}
	case evRestart:
		w.onRestart(int32(ev.Target), int32(ev.A), uint32(ev.B))
	case evAction:
		w.onAction(int(ev.Target))
		a := &w.sc.Actions[ev.Target]
		w.actions = append(w.actions, result.ActionMark{T: w.now().Seconds(), Kind: a.Kind, Label: a.Name()})
	case evAutoscale:
		w.onAutoscale(int32(ev.Target))
	case evReady:
		w.onReady(int32(ev.Target), int32(ev.A), uint32(ev.B))
	case evBoot:
		w.onBoot(int32(ev.Target), int32(ev.A), uint32(ev.B))
	case evHedge:
		if r := &w.reqs[ev.A]; r.live && r.gen == uint32(ev.B) && r.hedge != noID {
			w.onHedge(int32(ev.A))
		}
	case evPatience:
		w.onPatience(int32(ev.A), uint32(ev.B))
	case evCacheHit:
		if r := &w.reqs[ev.A]; r.live && r.gen == uint32(ev.B) {
			w.finishRequest(int32(ev.A), true, nil)
		}
	}
}

// att returns the live attempt id with generation gen, or nil if the slot
// has moved on (a stale event).
func (w *world) att(id int64, gen int64) *attempt {
	a := &w.atts[id]
	if !a.live || a.gen != uint32(gen) {
		return nil
	}
	return a
}

func (w *world) now() engine.Time { return w.eng.Now() }

// --- arrivals --------------------------------------------------------------

// rate returns a client's arrival rate at t, per second.
func (c *client) rate(t engine.Time) float64 {
	a := &c.spec.Arrivals
	r := a.Rate
	prevT, prevR := time.Duration(0), a.Rate
	for _, p := range a.Schedule {
		if time.Duration(t) < p.At {
			if p.Ramp && p.At > prevT {
				f := float64(time.Duration(t)-prevT) / float64(p.At-prevT)
				return (prevR + f*(p.Rate-prevR)) * c.load
			}
			return prevR * c.load
		}
		prevT, prevR, r = p.At, p.Rate, p.Rate
	}
	return r * c.load
}

// scheduleArrival schedules a client's next open-loop arrival
// (Arrivals.NextArrival).
func (w *world) scheduleArrival(ci int32) {
	c := &w.clients[ci]
	if c.plain > 0 {
		// NextArrival's first draw, which it returns when the rate never
		// changes: the same value, without the search for rate changes.
		next := w.now() + engine.Time(time.Duration(c.rng.ExpFloat64()/c.plain*1e9))
		if next < w.end {
			w.eng.At(next, engine.Event{Kind: evArrive, Target: uint32(ci)})
		}
		return
	}
	next, ok := c.spec.Arrivals.NextArrival(time.Duration(w.now()), w.sc.Triggers, &c.rng)
	if ok && engine.Time(next) < w.end {
		w.eng.At(engine.Time(next), engine.Event{Kind: evArrive, Target: uint32(ci)})
	}
}

func (w *world) onArrive(ci int32) {
	c := &w.clients[ci]
	switch c.spec.Arrivals.Kind {
	case "burst":
		for range c.spec.Arrivals.Count {
			w.newUserRequest(ci, noID)
		}
	default:
		w.newUserRequest(ci, noID)
		w.scheduleArrival(ci)
	}
}

// newUserRequest starts a request of client ci (of closed-loop user u).
func (w *world) newUserRequest(ci, u int32) {
	c := &w.clients[ci]
	now := w.now()
	b := w.binOf(int64(now))
	c.stats.demand[b]++
	c.stats.total.Requests++
	e := &w.edges[c.edge]
	proc := c.nextProc
	c.nextProc = (c.nextProc + 1) % int32(len(e.retriers))
	if c.spec.Humans != nil {
		w.startIntent(ci, proc)
		return
	}
	var deadline engine.Time
	if e.deadline > 0 {
		deadline = now.Add(e.deadline)
	}
	w.newRequest(c.edge, proc, origin{parent: noID, user: u, boot: noID, intent: noID}, deadline)
}

// --- requests and attempts (caller side) ----------------------------------

// origin says who makes a request: a service's attempt (parent), a
// closed-loop user, a booting replica, a person's intent; noID for none.
type origin struct {
	parent    int32
	parentGen uint32
	user      int32
	boot      int32
	intent    int32
	intentGen uint32
}

func (w *world) newRequest(ei, proc int32, o origin, deadline engine.Time) int32 {
	var id int32
	if n := len(w.freeReq); n > 0 {
		id = w.freeReq[n-1]
		w.freeReq = w.freeReq[:n-1]
	} else {
		w.reqs = append(w.reqs, request{})
		id = int32(len(w.reqs) - 1)
	}
	now := w.now()
	r := &w.reqs[id]
	gen := r.gen + 1
	// Cleared in place, then filled in field by field: a composite literal
	// is built on the stack and copied over, which costs more.
	*r = request{}
	r.edge, r.proc = ei, proc
	r.parent, r.parentGen = o.parent, o.parentGen
	r.user, r.boot = o.user, o.boot
	r.intent, r.intentGen = o.intent, o.intentGen
	r.cur, r.key, r.hedge = noID, noID, noID
	r.skey = w.requestKey(ei, o.intent)
	r.gen, r.arrival, r.deadline, r.live = gen, now, deadline, true
	if c := w.edges[ei].cache; c != nil {
		// Look-aside: the cache first; only a miss reaches the service.
		v := &w.services[w.edges[ei].target]
		b := w.binOf(int64(now))
		key, hit := c.lookup(now)
		if hit {
			v.stats.cacheHits[b]++
			v.stats.total.CacheHits++
			if lat := sample(&c.spec.Latency, &c.rng); lat > 0 {
				w.eng.After(lat, engine.Event{Kind: evCacheHit, A: int64(id), B: int64(gen)})
			} else {
				w.finishRequest(id, true, nil)
			}
			return id
		}
		v.stats.cacheMisses[b]++
		v.stats.total.CacheMisses++
		r.key = key
	}
	var dl time.Time
	if deadline != 0 {
		dl = wall(deadline)
	}
	if w.edges[ei].hedged {
		w.startHedge(id, dl)
		return id
	}
	w.edges[ei].retriers[proc].StartInto(&r.call, wall(now), dl)
	if deadline != 0 && now >= deadline {
		// Nothing left of the caller's deadline: fail locally, send nothing.
		d := w.edges[ei].retriers[proc].EndAt(wall(now), &r.call, retry.Canceled, retry.Signal{}, 0)
		w.finishRequest(id, false, d.Reason)
		return id
	}
	w.sendAttempt(id)
	return id
}

// sendAttempt sends the request's next attempt over the network.
func (w *world) sendAttempt(ri int32) {
	r := &w.reqs[ri]
	e := &w.edges[r.edge]
	now := w.now()
	if r.sent {
		e.retriers[r.proc].NextAt(wall(now), &r.call)
	}
	if e.breaker && !e.retriers[r.proc].AllowAt(wall(now), &r.call) {
		// The circuit breaker refused the attempt: nothing is sent.
		w.finishRequest(ri, false, retry.ErrBreakerOpen)
		return
	}
	r.cur = w.launch(ri, int32(r.call.Attempt()))
}

// launch sends attempt number n of request ri over its edge and returns
// the attempt.
func (w *world) launch(ri, n int32) int32 {
	r := &w.reqs[ri]
	e := &w.edges[r.edge]
	now := w.now()
	ai := w.allocAttempt()
	a := &w.atts[ai]
	a.req, a.reqGen = ri, r.gen
	a.number = n
	a.skey = r.skey
	a.svc = e.target
	a.waiting = true
	if e.propagate {
		a.deadline = now.Add(e.timeout)
		if r.deadline != 0 && r.deadline < a.deadline {
			a.deadline = r.deadline
		}
	}
	a.timeout = e.timeoutQ.Add(engine.Event{Kind: evTimeout, A: int64(ai), B: int64(a.gen)})
	if e.client >= 0 {
		w.clients[e.client].stats.total.Attempts++
		if a.number > 1 {
			w.clients[e.client].stats.total.Retries++
		}
	}
	w.transmit(ai, e, false, 0)
	return ai
}

// transmit carries a message over edge e: an attempt to its service
// (reply false) or a reply back to the caller. Outages on the service's
// network hold or drop it.
func (w *world) transmit(ai int32, e *edge, reply bool, code int) {
	a := &w.atts[ai]
	v := &w.services[a.svc]
	if !reply {
		w.reqs[a.req].sent = true
	}
	if e.paused && !reply {
		// A runbook paused the edge: refused before it reaches the service.
		v.stats.total.Lost++
		w.eng.After(0, engine.Event{Kind: evReply, A: int64(ai), B: int64(a.gen)<<8 | codeRefused})
		a.srvDone = true
		return
	}
	if v.outages > 0 {
		if !v.dropMode {
			v.held = append(v.held, message(ai, a.gen, reply, code))
			return
		}
		if reply {
			// The answer is lost; the caller will time out.
			w.srvDone(ai)
			return
		}
		// Connection refused, at once; the service never sees it.
		v.stats.total.Lost++
		w.eng.After(0, engine.Event{Kind: evReply, A: int64(ai), B: int64(a.gen)<<8 | codeRefused})
		a.srvDone = true // no server side: the refusal is the network's
		return
	}
	lat := e.latency.Mean // a constant, the default (Dist.sample), without the call
	if e.latency.Kind != "" {
		lat = sample(&e.latency, &e.rng)
	}
	if !reply {
		lat += v.addLat
	}
	if lat == 0 {
		// No time passes on the wire: the message arrives in this same
		// event, as a call in the same process would, instead of
		// after every other event already due now. It is handled as
		// Handle would handle its message, without the dispatch: the
		// message's attempt is a, so only a's being live is left to check.
		if !a.live {
			return
		}
		if reply {
			w.onReply(ai, code)
		} else {
			w.deliver(ai)
		}
		return
	}
	w.eng.After(lat, message(ai, a.gen, reply, code))
}

// message is the event that carries attempt ai (generation gen) to its
// service, or its answer with code back to the caller when reply is set.
func message(ai int32, gen uint32, reply bool, code int) engine.Event {
	if reply {
		return engine.Event{Kind: evReply, A: int64(ai), B: int64(gen)<<8 | int64(code)}
	}
	return engine.Event{Kind: evDeliver, A: int64(ai), B: int64(gen)}
}

// onReply: an answer reaches the caller.
func (w *world) onReply(ai int32, code int) {
	a := &w.atts[ai]
	a.srvDone = true
	if !a.waiting {
		w.maybeFree(ai)
		return
	}
	a.waiting = false
	a.cliDone = true
	w.eng.Cancel(a.timeout)
	ri := a.req
	degraded := code == codeDegraded
	var cls retry.Class
	var sig retry.Signal
	switch code {
	case codeOK, codeDegraded:
		cls = retry.Success
	case codeShed:
		cls = retry.Transient
		if w.services[a.svc].signals {
			sig = retry.Signal{Overload: wire.OverloadInstance, HasPushback: true, Pushback: shedPushback}
		}
	case codeExhausted:
		cls = retry.Transient
		sig = retry.Signal{Exhausted: true}
	case codeSuperseded:
		cls = retry.NeverRetry
	default:
		cls = retry.Transient
	}
	n := a.number
	w.maybeFree(ai)
	w.attemptEnded(ri, n, cls, sig, degraded)
}

// onTimeout: the caller stops waiting for the attempt. A service that
// notices one of its downstream attempts time out pays its timeout cost.
func (w *world) onTimeout(ai int32) {
	a := &w.atts[ai]
	ri, n := a.req, a.number
	w.callerLeft(ai)
	w.maybeFree(ai)
	if r := &w.reqs[ri]; w.edges[r.edge].noticeTO > 0 {
		if p := w.att(int64(r.parent), int64(r.parentGen)); p != nil && p.inSvc {
			e := &w.edges[r.edge]
			w.charge(&w.services[e.from], p.rep, e.noticeTO)
		}
	}
	w.attemptEnded(ri, n, retry.Timeout, retry.Signal{}, false)
}

// callerLeft: the caller of attempt ai stops waiting for it (a timeout, a
// hedge that lost). Its server learns it at once, as a server learns that
// a connection was reset: if the attempt is queued there, or waits for its
// twin, its admission core takes it out.
func (w *world) callerLeft(ai int32) {
	a := &w.atts[ai]
	a.waiting, a.cliDone = false, true
	if a.held {
		w.cancel(ai)
	}
}

// attemptEnded runs the retry policy after the request's current attempt
// ended with class cls.
func (w *world) attemptEnded(ri, n int32, cls retry.Class, sig retry.Signal, degraded bool) {
	r := &w.reqs[ri]
	if r.hedge != noID {
		w.hedgeEnded(ri, n, cls, sig, degraded)
		return
	}
	r.cur = noID
	e := &w.edges[r.edge]
	now := w.now()
	d := e.retriers[r.proc].EndAt(wall(now), &r.call, cls, sig, e.rng.Float64())
	switch {
	case cls == retry.Success:
		r.degraded = r.degraded || degraded
		w.finishRequest(ri, true, nil)
	case d.Retry:
		w.eng.After(d.Delay, engine.Event{Kind: evRetry, A: int64(ri), B: int64(r.gen)})
	default:
		w.finishRequest(ri, false, d.Reason)
	}
}

// finishRequest ends a request with its one outcome.
func (w *world) finishRequest(ri int32, ok bool, reason error) {
	r := &w.reqs[ri]
	e := &w.edges[r.edge]
	now := w.now()
	attempts := int32(r.call.Attempt())
	if r.hedge != noID {
		attempts = int32(w.hedges[r.hedge].h.Sent())
		w.freeHedge = append(w.freeHedge, r.hedge)
		r.hedge = noID
	}
	degraded := r.degraded
	parent, parentGen, user, boot := r.parent, r.parentGen, r.user, r.boot
	if ok && r.key != noID {
		// A miss that succeeded in time fills the cache.
		w.services[e.target].cache.store(r.key, now)
	}
	r.live = false
	w.freeReq = append(w.freeReq, ri)
	if e.client >= 0 {
		c := &w.clients[e.client]
		if r.intent != noID {
			// One tap of a person: the person's outcome decides.
			w.tapDone(r.intent, r.intentGen, ok, degraded, reason)
			return
		}
		w.clientOutcome(c, r.arrival, now, ok, degraded, reason)
		if user != noID {
			th := sample(&c.spec.Arrivals.Think, &c.rng)
			if t := now.Add(th); t < w.end {
				w.eng.At(t, engine.Event{Kind: evThink, Target: uint32(e.client), A: int64(user)})
			}
		}
		return
	}
	if boot != noID {
		w.bootDone(e.from, boot, parentGen, ok)
		return
	}
	// A service's downstream call: resume the attempt it serves, unless
	// its replica crashed meanwhile.
	if p := w.att(int64(parent), int64(parentGen)); p != nil && p.inSvc {
		w.callDone(parent, ok, degraded, attempts, reason)
	}
}

// clientOutcome counts the one outcome, at now, of a client's request (or
// a person's intent) that arrived at arrival.
func (w *world) clientOutcome(c *client, arrival, now engine.Time, ok, degraded bool, reason error) {
	w.clientOutcomeIn(c, w.binOf(int64(now)), arrival, now, ok, degraded, reason)
}

// clientOutcomeIn is clientOutcome for a caller that has now's bin, b.
func (w *world) clientOutcomeIn(c *client, b int, arrival, now engine.Time, ok, degraded bool, reason error) {
	if ok {
		w.clientServed(c, b, arrival, now, degraded)
		return
	}
	c.stats.failArr[w.binIndex(int64(arrival))]++
	c.stats.total.Failed++
	c.stats.total.FailureLatencyS += now.Sub(arrival).Seconds()
	c.stats.gaveUpFor(b, reason)
}

// clientServed is clientOutcomeIn for a request served.
func (w *world) clientServed(c *client, b int, arrival, now engine.Time, degraded bool) {
	c.stats.okArr[w.binIndex(int64(arrival))]++
	c.stats.goodput[b]++
	c.stats.total.Succeeded++
	if degraded {
		c.stats.degraded[b]++
		c.stats.total.Degraded++
	}
	l := now.Sub(arrival).Seconds()
	c.stats.lat = append(c.stats.lat, l)
	c.stats.total.SuccessLatencyS += l
}

// --- triggers and bins -----------------------------------------------------

func (w *world) trigger(ti int, on bool) {
	t := &w.sc.Triggers[ti]
	var v *service
	for i := range w.services {
		if w.services[i].spec.Name == t.Target {
			v = &w.services[i]
		}
	}
	switch t.Kind {
	case "outage":
		if on {
			v.outages++
			v.dropMode = t.Mode == "drop"
			return
		}
		v.outages--
		if v.outages == 0 {
			// Everything held arrives together, in the order it was sent.
			held := v.held
			v.held = nil
			for _, ev := range held {
				w.eng.After(0, ev)
			}
		}
	case "latency":
		if on {
			v.addLat += t.Add
		} else {
			v.addLat -= t.Add
		}
	case "capacity":
		w.psAdvanceAll(v)
		if on {
			v.capacity *= t.Factor
		} else {
			v.capacity /= t.Factor
		}
		w.psRescheduleAll(v)
	case "load":
		// The arrivals follow the load factor by themselves
		// (Arrivals.NextArrival); c.load is the rate as rate() reports it.
		for i := range w.clients {
			if on {
				w.clients[i].load *= t.Factor
			} else {
				w.clients[i].load /= t.Factor
			}
		}
	case "errors":
		if on {
			v.errRate = t.Factor
		} else {
			v.errRate = v.spec.ErrorRate
		}
	case "pause":
		if on {
			v.paused++
		} else {
			v.paused--
			for ri := range v.reps {
				w.startNext(v, int32(ri))
			}
		}
	case "hang":
		if on {
			v.hangP, v.hangRel = t.Factor, t.Release
		} else if h := v.spec.Hang; h != nil {
			v.hangP, v.hangRel = h.Probability, h.Release
		} else {
			v.hangP, v.hangRel = 0, 0
		}
	case "cache-flush":
		c := v.cache
		switch {
		case c.cdf != nil && on:
			c.flush(t.Keys)
		case c.cdf == nil && on:
			c.down++
		case c.cdf == nil:
			c.down--
		}
	}
}

// onBin closes the statistics bin that ends now.
func (w *world) onBin() {
	now := w.now()
	w.closeBins(now)
	if next := now.Add(w.bin); next <= w.end {
		w.eng.At(next, engine.Event{Kind: evBin})
	}
}

// closeBins closes the statistics bin that ends at now: each client's
// latency percentiles and budget level, each service's queue, busy
// workers, limit and replicas up.
//
// With a spool, the bin then goes to it, unless it is the last, which
// events at the end of the run may still count in (see flushBins).
func (w *world) closeBins(now engine.Time) {
	if w.spool != nil {
		defer w.flushBins(w.binIndex(int64(now)-1), false)
	}
	b := w.binOf(int64(now) - 1)
	for i := range w.clients {
		c := &w.clients[i]
		c.stats.closeBin(b)
		e := &w.edges[c.edge]
		sum, n := 0.0, 0
		for _, r := range e.retriers {
			if l := budgetLevel(r.Budget()); l >= 0 {
				sum += l
				n++
			}
		}
		c.stats.budget[b] = -1
		switch {
		case c.fleet != nil:
			c.stats.budget[b] = c.fleet.level()
		case n > 0:
			c.stats.budget[b] = sum / float64(n)
		}
	}
	for i := range w.services {
		v := &w.services[i]
		var queue, busy, lim, up int
		for j := range v.reps {
			r := &v.reps[j]
			queue += r.queued()
			busy += r.busy
			if l := r.core.Limiter(); l != nil {
				lim += l.Limit()
			}
			if !r.down && !r.draining {
				up++
			}
		}
		v.stats.queue[b] = float64(queue)
		v.stats.busy[b] = float64(busy)
		v.stats.limit[b] = float64(lim)
		v.stats.up[b] = float64(up)
	}
}
