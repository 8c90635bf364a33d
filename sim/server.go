package sim

import (
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
)

// The server side: admission, workers, downstream calls and answers, per
// replica (see replica.go for the balancer, crashes, failure work and
// processor sharing).

func (w *world) allocAttempt() int32 {
	var id int32
	if n := len(w.freeAtt); n > 0 {
		id = w.freeAtt[n-1]
		w.freeAtt = w.freeAtt[:n-1]
	} else {
		w.atts = append(w.atts, attempt{})
		id = int32(len(w.atts) - 1)
	}
	a := &w.atts[id]
	*a = attempt{gen: a.gen + 1, live: true}
	return id
}

func (w *world) srvDone(ai int32) {
	w.atts[ai].srvDone = true
	w.maybeFree(ai)
}

func (w *world) maybeFree(ai int32) {
	a := &w.atts[ai]
	if a.cliDone && a.srvDone && a.live {
		a.live = false
		w.freeAtt = append(w.freeAtt, ai)
	}
}

// deliver: an attempt reaches its service; the balancer picks a replica;
// admission.
func (w *world) deliver(ai int32) {
	a := &w.atts[ai]
	v := &w.services[a.svc]
	now := w.now()
	b := w.binOf(int64(now))
	if c := v.spec.Capacity; c != nil {
		w.arrived(a, v, b)
		w.tickAdmit(ai, v, c)
		return
	}
	ri := v.pickReplica()
	if ri == noID {
		// No replica up: the balancer refuses the connection.
		v.stats.total.Lost++
		a.srvDone = true
		w.eng.After(0, engine.Event{Kind: evReply, A: int64(ai), B: int64(a.gen)<<8 | codeRefused})
		return
	}
	a.rep = ri
	w.arrived(a, v, b)
	r := &v.reps[ri]
	if v.dials.ShedPPM() > 0 && v.dials.Shed(uint32(v.rng.Float64()*1e6)) {
		// The kill switch sheds a fraction first, as the production gate does.
		w.reject(ai, v, v.spec.FailureCost.Refuse)
		return
	}
	if r.gate != nil {
		w.admitAt(ai, v, ri) // the production gate's core (ServerRef)
		return
	}
	if v.expire && a.deadline != 0 && now.Add(v.minRemain) >= a.deadline {
		w.expired(ai, v)
		return
	}
	if r.limiter != nil {
		p, ok := r.limiter.AcquireAt(wall(now))
		if !ok {
			w.reject(ai, v, v.spec.FailureCost.Refuse)
			return
		}
		a.permit, a.hasPermit = p, true
	}
	now0 := r.busy < v.workers && v.paused == 0 && r.queue.Len() == 0 && r.debt == 0
	if v.sup != nil && a.skey != 0 && w.supersedeAt(ai, v, !now0) {
		return // it took a queued twin's place, or waits for one in service
	}
	if now0 {
		v.meter.started++
		w.start(ai, v, ri)
		return
	}
	// The item and the outcome live in w (PushTo), so that neither is
	// copied whole right after being written field by field: the wide
	// loads of such a copy stall on the narrow stores.
	it, adm := &w.pushItem, &w.pushAdm
	it.Payload, it.Attempt = ai, int(a.number) // PushTo sets Enqueued in the queue
	it.Deadline = time.Time{}
	if v.expire && a.deadline != 0 {
		it.Deadline = wall(a.deadline)
	}
	r.queue.PushTo(wall(now), it, adm)
	a.qh = adm.Handle
	// Read before answering anyone: an answer may lead to another push.
	refused, vr, victim := adm.Refused, adm.VictimReason, adm.Victim.Payload
	if vr != shed.None {
		w.leaveQueue(victim, vr, v, v.spec.FailureCost.Shed)
	}
	if refused != shed.None {
		w.leaveQueue(ai, refused, v, v.spec.FailureCost.Refuse)
	}
	w.scheduleExpiry(v, ri)
	w.maybeCrash(v, ri)
}

// arrived counts an attempt that reached service v in bin b.
func (w *world) arrived(a *attempt, v *service, b int) {
	a.arrived = true
	v.stats.total.Arrived++
	v.meter.arrived++
	if a.number > 1 {
		v.stats.retries[b]++
	} else {
		v.stats.first[b]++
	}
}

// leaveQueue answers an item the queue gave up for reason why; a rejection
// costs cost of failure work.
func (w *world) leaveQueue(ai int32, why shed.Reason, v *service, cost time.Duration) {
	if why == shed.Expired {
		w.expired(ai, v)
		return
	}
	w.reject(ai, v, cost)
}

// reject answers an attempt at once: shed. cost is the failure work it
// takes.
func (w *world) reject(ai int32, v *service, cost time.Duration) {
	a := &w.atts[ai]
	if a.hasPermit {
		a.permit.IgnoreAt(wall(w.now()))
		a.hasPermit = false
	}
	a.decided = true
	v.stats.shed[w.binOf(int64(w.now()))]++
	v.stats.total.Shed++
	ri := a.rep
	w.settle(ai, v, codeShed)
	w.reply(ai, v, codeShed) // a may be reused from here on
	w.charge(v, ri, cost)
}

// expired drops an attempt whose deadline passed: nobody waits, no answer.
func (w *world) expired(ai int32, v *service) {
	a := &w.atts[ai]
	if a.hasPermit {
		a.permit.IgnoreAt(wall(w.now()))
		a.hasPermit = false
	}
	a.decided = true
	v.stats.expired[w.binOf(int64(w.now()))]++
	v.stats.total.Expired++
	ri := a.rep
	w.settle(ai, v, codeNone)
	w.srvDone(ai)
	w.charge(v, ri, v.spec.FailureCost.Expire)
}

// reply sends an attempt's answer back to its caller.
func (w *world) reply(ai int32, v *service, code int) {
	a := &w.atts[ai]
	r := &w.reqs[a.req]
	var e *edge
	if r.live && r.gen == a.reqGen {
		e = &w.edges[r.edge]
	} else {
		// The request is over (its caller moved on); the answer still
		// travels, on some edge into this service.
		e = &w.edges[w.anyEdgeInto(a.svc)]
	}
	w.transmit(ai, e, true, code)
}

func (w *world) anyEdgeInto(svc int32) int32 {
	for i := range w.edges {
		if w.edges[i].target == svc {
			return int32(i)
		}
	}
	return 0
}

// start puts an attempt on a worker of replica ri.
func (w *world) start(ai int32, v *service, ri int32) {
	r := &v.reps[ri]
	a := &w.atts[ai]
	w.integrate(v)
	r.busy++
	if v.ps && v.psByN {
		w.psAdvance(v, ri)
	}
	r.inSvc++
	a.inSvc = true
	if a.tracked {
		v.sup.StartAt(wall(w.now()), a.skey)
	}
	if v.hangP > 0 && v.rng.Float64() < v.hangP {
		w.hang(ai, v)
		if v.ps && v.psByN {
			w.psReschedule(v, ri)
		}
		return
	}
	st := v.spec.ServiceTime.sample(&v.rng)
	if v.perRequest > 0 {
		st += time.Duration(r.inSvc) * v.perRequest
	}
	if s := v.spec.Slowdown; s.Factor > 0 && s.Queue > 0 {
		st = time.Duration(float64(st) * (1 + s.Factor*min(1, float64(r.queue.Len())/float64(s.Queue))))
	}
	if v.ps {
		w.psStart(v, ri, ai, st)
		return
	}
	r.working++
	f := w.speed(v, r)
	if l := v.spec.Law; l != nil {
		f *= l.speed(r.inSvc) // a nil law's speed is 1: f stays f
	}
	if f != 1 {
		st = time.Duration(float64(st) / f)
	}
	w.eng.After(st, engine.Event{Kind: evWorkDone, A: int64(ai), B: int64(a.gen)})
}

// hang makes an attempt hold its worker without answering until its
// deadline or the release, whichever is sooner.
func (w *world) hang(ai int32, v *service) {
	a := &w.atts[ai]
	a.hung = true
	at := engine.Never
	if a.deadline != 0 {
		at = a.deadline
	}
	if v.hangRel > 0 {
		at = min(at, w.now().Add(v.hangRel))
	}
	if at < w.end {
		w.eng.At(max(at, w.now()), engine.Event{Kind: evRelease, A: int64(ai), B: int64(a.gen)})
	}
}

// onRelease: a hung attempt lets its worker go, without an answer.
func (w *world) onRelease(ai int32) {
	a := &w.atts[ai]
	if !a.inSvc {
		return // lost in a crash meanwhile
	}
	v := &w.services[a.svc]
	a.decided = true
	v.stats.hung[w.binOf(int64(w.now()))]++
	v.stats.total.Hung++
	w.settle(ai, v, codeNone)
	if a.hasPermit {
		a.permit.DroppedAt(wall(w.now()))
		a.hasPermit = false
	}
	w.leaveService(ai, v)
	w.srvDone(ai)
	w.startNext(v, a.rep)
}

// leaveService frees the worker an attempt held.
func (w *world) leaveService(ai int32, v *service) {
	a := &w.atts[ai]
	r := &v.reps[a.rep]
	w.integrate(v)
	if v.ps && v.psByN {
		w.psAdvance(v, a.rep)
	}
	a.inSvc = false
	r.busy--
	r.inSvc--
	if v.ps && v.psByN {
		w.psReschedule(v, a.rep)
	}
}

// workDone: the local work is over; make the calls, then answer.
func (w *world) workDone(ai int32) {
	a := &w.atts[ai]
	v := &w.services[a.svc]
	if v.spec.Capacity != nil {
		w.complete(ai, v, codeOK)
		return
	}
	if !a.inSvc {
		return // lost in a crash meanwhile
	}
	if !v.ps {
		w.integrate(v)
		v.reps[a.rep].working--
	}
	w.nextCall(ai, v)
}

func (w *world) nextCall(ai int32, v *service) {
	a := &w.atts[ai]
	if int(a.nextCall) >= len(v.calls) {
		code := codeOK
		if a.degraded {
			code = codeDegraded
		}
		w.complete(ai, v, code)
		return
	}
	ei := v.calls[a.nextCall]
	a.nextCall++
	var deadline engine.Time
	if w.edges[ei].propagate {
		deadline = a.deadline
	}
	w.newRequest(ei, 0, origin{parent: ai, parentGen: a.gen, user: noID, boot: noID, intent: noID}, deadline)
}

// callDone: a downstream call of attempt ai ended.
func (w *world) callDone(ai int32, ok, degraded bool, attempts int32, reason error) {
	a := &w.atts[ai]
	v := &w.services[a.svc]
	switch {
	case ok:
		a.degraded = a.degraded || degraded
	case v.spec.OnCallFailure == "fallback":
		a.degraded = true
	default:
		code := codeError
		if attempts > 1 || reasonStopsAbove(reason) {
			code = codeExhausted
		}
		w.complete(ai, v, code)
		return
	}
	w.nextCall(ai, v)
}

// reasonStopsAbove: give-ups after which the layers above must not retry
// (see retry.GiveUpError.RetryClass).
func reasonStopsAbove(reason error) bool {
	switch reason {
	case retry.ErrBudgetExhausted, retry.ErrRetriesDisabled, retry.ErrServerSaidStop:
		return true
	}
	return false
}

// complete: the worker finishes the attempt and answers.
func (w *world) complete(ai int32, v *service, code int) {
	a := &w.atts[ai]
	now := w.now()
	b := w.binOf(int64(now))
	tick := v.spec.Capacity != nil
	if !tick {
		// The worker is free before the answer leaves: a retry that
		// arrives in the same instant may take it.
		w.leaveService(ai, v)
	}
	a.decided = true
	v.stats.completed[b]++
	v.stats.total.Completed++
	if a.waiting {
		v.stats.goodput[b]++
		v.stats.total.Goodput++
	} else {
		v.stats.wasted[b]++
		v.stats.total.Wasted++
	}
	if a.hasPermit {
		a.permit.SuccessAt(wall(now))
		a.hasPermit = false
	}
	if (code == codeOK || code == codeDegraded) && v.errRate > 0 && v.rng.Float64() < v.errRate {
		code = codeError
	}
	ri := a.rep
	w.settle(ai, v, code)
	w.reply(ai, v, code)
	if tick {
		return
	}
	if code == codeError || code == codeExhausted {
		w.charge(v, ri, v.spec.FailureCost.Error)
	}
	w.startNext(v, ri)
}

// startNext fills idle workers of replica ri: failure work first, then the
// queue.
func (w *world) startNext(v *service, ri int32) {
	r := &v.reps[ri]
	if r.down {
		return
	}
	w.admitDispatch(v, ri) // a gate hands freed slots on first (ServerRef)
	now := wall(w.now())
	for r.busy < v.workers && v.paused == 0 {
		if w.startOverhead(v, ri) {
			continue
		}
		it, why, ok := r.queue.PopAt(now)
		if !ok {
			break
		}
		if why != shed.None {
			w.leaveQueue(it.Payload, why, v, v.spec.FailureCost.Shed)
			continue
		}
		if v.meter.on {
			v.meter.waits += float64(now.Sub(it.Enqueued))
			v.meter.started++
		}
		w.start(it.Payload, v, ri)
	}
	if r.draining {
		w.maybeRetire(v, ri)
	}
}

// scheduleExpiry makes sure an evExpire fires when replica ri's queue's
// next item falls due.
func (w *world) scheduleExpiry(v *service, ri int32) {
	r := &v.reps[ri]
	t, ok := r.queue.NextExpiry()
	if !ok {
		return
	}
	at := engine.Time(t.UnixNano())
	if at < w.now() {
		at = w.now()
	}
	if r.expiryAt != 0 && r.expiryAt <= at && r.expiryAt >= w.now() {
		return
	}
	r.expiryAt = at
	w.eng.At(at, engine.Event{Kind: evExpire, Target: uint32(v.idx), A: int64(ri)})
}

func (w *world) onExpire(si, ri int32) {
	v := &w.services[si]
	r := &v.reps[ri]
	if r.expiryAt == w.now() {
		r.expiryAt = 0
	}
	now := wall(w.now())
	for {
		it, why, ok := r.queue.ExpireAt(now)
		if !ok {
			break
		}
		w.leaveQueue(it.Payload, why, v, v.spec.FailureCost.Shed)
	}
	w.scheduleExpiry(v, ri)
	w.admitDispatch(v, ri) // a gate's queued attempts fall due too (ServerRef)
}

// tickAdmit is the seed 004 virtual-capacity service: PerTick admissions
// per Tick, the rest fail at once.
func (w *world) tickAdmit(ai int32, v *service, c *TickCapacity) {
	now := w.now()
	tick := engine.Time(c.Tick)
	if start := now / tick * tick; start != v.tickStart {
		v.tickStart, v.tickCount = start, 0
	}
	if v.tickCount >= c.PerTick {
		w.atts[ai].decided = true
		v.stats.shed[w.binOf(int64(now))]++
		v.stats.total.Shed++
		w.reply(ai, v, codeError)
		return
	}
	v.tickCount++
	st := v.spec.ServiceTime.sample(&v.rng)
	w.eng.After(st, engine.Event{Kind: evWorkDone, A: int64(ai), B: int64(w.atts[ai].gen)})
}
