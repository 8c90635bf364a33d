package sim

import (
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
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
// the replica's admission core decides.
func (w *world) deliver(ai int32) {
	a := &w.atts[ai]
	v := &w.services[a.svc]
	b := w.binOf(int64(w.now()))
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
	// Admission: the replica's core decides (see admit.go); written here,
	// not called, as this is every attempt's path.
	r := &v.reps[ri]
	now := wall(w.now())
	// The request and the core's answer live in w: neither is cleared and
	// built anew for every attempt (the core writes the answer's fields its
	// step reads out, and a request carries only its attempt number).
	req, in := &w.req, &w.entered
	req.Attempt = int(a.number)
	var ctxDL time.Time
	if a.deadline != 0 && v.deadlines {
		ctxDL = wall(a.deadline)
	}
	keyed := a.skey != 0 && r.core.Superseding()
	switch r.core.EnterAt(now, req, ctxDL, keyed, v.draw, in) {
	case admit.Go:
		a.permit, a.hasPermit = in.Permit, true
		a.admitDL = engineTime(in.Deadline)
		w.admitStart(ai, v, ri)
	case admit.Stop:
		w.answer(ai, v, in.Decision)
	default:
		a.admitDL = engineTime(in.Deadline)
		w.hold(ai, v, ri, now, keyed)
	}
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

// reject answers an attempt at once: shed. cost is the failure work it
// takes.
func (w *world) reject(ai int32, v *service, cost time.Duration) {
	a := &w.atts[ai]
	a.decided = true
	v.stats.shed[w.binOf(int64(w.now()))]++
	v.stats.total.Shed++
	ri := a.rep
	w.reply(ai, v, codeShed) // a may be reused from here on
	w.charge(v, ri, cost)
}

// expired drops an attempt whose deadline passed, or whose caller left:
// nobody waits, no answer.
func (w *world) expired(ai int32, v *service) {
	a := &w.atts[ai]
	a.decided = true
	v.stats.expired[w.binOf(int64(w.now()))]++
	v.stats.total.Expired++
	ri := a.rep
	w.srvDone(ai)
	w.charge(v, ri, v.spec.FailureCost.Expire)
}

// superseded answers an attempt a newer twin replaced in the core's queue.
func (w *world) superseded(ai int32, v *service) {
	w.atts[ai].decided = true
	v.stats.total.Superseded++
	v.stats.superseded[w.binOf(int64(w.now()))]++
	w.reply(ai, v, codeSuperseded)
}

// joined answers an attempt that waited for its twin with the twin's
// answer, code.
func (w *world) joined(ai int32, v *service, code int) {
	w.atts[ai].decided = true
	v.stats.total.Joined++
	w.reply(ai, v, code)
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
	if v.hangP > 0 && v.rng.Float64() < v.hangP {
		w.hang(ai, v)
		if v.ps && v.psByN {
			w.psReschedule(v, ri)
		}
		return
	}
	st := sample(&v.spec.ServiceTime, &v.rng)
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
		f *= l.Speed(r.inSvc) // a nil law's speed is 1: f stays f
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
	w.leaveService(ai, v)
	// Its handler gives up without an answer: an overload failure, or work
	// nobody waits for; nothing to replay to its twins.
	w.releaseAttempt(ai, v, wall(w.now()), admit.FailedOverload, codeNone)
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
		if _, stop := retry.StopsAbove(reason, int(attempts)); stop {
			code = codeExhausted
		}
		w.atts[ai].callFailed = true
		w.complete(ai, v, code)
		return
	}
	w.nextCall(ai, v)
}

// complete: the worker finishes the attempt and answers with code.
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
	if (code == codeOK || code == codeDegraded) && v.errRate > 0 && v.rng.Float64() < v.errRate {
		code = codeError
	}
	o := outcomeOf(code, a.callFailed)
	// The core counts it by the release rule, teaches the limiter what
	// production's would learn, and answers the attempts that joined it (or
	// sends them through again). releaseAttempt's work, written here for
	// the attempts without a key, as this is every attempt's path.
	var f admit.Fate
	switch t := wall(now); {
	case tick:
		f = admit.Classify(t, time.Time{}, !a.waiting, o)
	case a.ref.Keyed():
		f = w.releaseKeyed(ai, v, t, o, code)
	default:
		a.hasPermit = false
		core := v.reps[a.rep].core
		var handOn bool
		if f, handOn = core.ReleaseAt(t, &a.permit, wallOrZero(a.admitDL), !a.waiting, o); handOn {
			w.exec(v, a.rep, core.DispatchAt(t))
		}
	}
	v.stats.completed1(b, f)
	ri := a.rep
	w.reply(ai, v, code)
	if tick {
		return
	}
	if code == codeError || code == codeExhausted {
		w.charge(v, ri, v.spec.FailureCost.Error)
	}
	w.startNext(v, ri)
}

// outcomeOf is how an attempt's work ended, as its server's shell would tell
// its core: a success (a fallback's too); an overload failure when a call
// it made failed (its answer is 502, 503 or 504: a call refused or timed
// out below); else a failure that says nothing about load (an error of its
// own, error_rate's 500).
func outcomeOf(code int, callFailed bool) admit.Outcome {
	switch {
	case code == codeOK || code == codeDegraded:
		return admit.Succeeded
	case callFailed:
		return admit.FailedOverload
	default:
		return admit.Failed
	}
}

// startNext fills idle workers of replica ri: failure work first, then the
// queue.
func (w *world) startNext(v *service, ri int32) {
	r := &v.reps[ri]
	if r.down {
		return
	}
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
			w.dropRun(int32(it.Payload), v, why)
			continue
		}
		if v.meter.on {
			v.meter.waits += float64(now.Sub(it.Enqueued))
			v.meter.started++
		}
		w.start(int32(it.Payload), v, ri)
	}
	if r.draining {
		w.maybeRetire(v, ri)
	}
}

// scheduleExpiry makes sure an evExpire fires when replica ri's run
// queue's next item falls due.
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
		w.dropRun(int32(it.Payload), v, why)
	}
	w.scheduleExpiry(v, ri)
	w.tick(v, ri) // the core's queue falls due too
}

// tickAdmit is the seed 004 virtual-capacity service: PerTick admissions
// per Tick, the rest fail at once.
func (w *world) tickAdmit(ai int32, v *service, c *scenario.TickCapacity) {
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
	st := sample(&v.spec.ServiceTime, &v.rng)
	w.eng.After(st, engine.Event{Kind: evWorkDone, A: int64(ai), B: int64(w.atts[ai].gen)})
}
