package sim

import (
	"encoding/binary"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
)

// Admission: every replica admits through an admit.Core, the core of the
// production gate (httpx.Server, grpcx.Server), built from the service's
// policy file server block or from the scenario's own admission (see
// service.admission). The core takes every decision, in its order, from
// the kill switch to the release; the functions below only carry out the
// actions it returns, in virtual time, as admit.Gate carries them out with
// goroutines. An admitted attempt then takes a worker, or waits for one in
// the replica's run queue: that queue, the workers and their failure work
// are the model's, not admission's.

// hold carries on with an attempt the core's EnterAt held at now (see
// deliver): its QueueAt, with the attempt's key if keyed.
func (w *world) hold(ai int32, v *service, ri int32, now time.Time, keyed bool) {
	var key *admit.Key
	if keyed {
		k := keyOf(w.atts[ai].skey)
		key = &k
	}
	w.exec(v, ri, v.reps[ri].core.QueueAt(now, ai, w.entered.Entry, key))
	if a := &w.atts[ai]; a.held && !a.waiting {
		// Its caller left while it was on the way: the gate's shell sees
		// the context already done, and takes it out at once.
		w.cancel(ai)
	}
}

// keyOf is the core's Key of the simulator's key number k.
func keyOf(k uint64) (key admit.Key) {
	binary.LittleEndian.PutUint64(key[:], k)
	return key
}

// engineTime is t as virtual time, 0 for the zero Time (none).
func engineTime(t time.Time) engine.Time {
	if t.IsZero() {
		return 0
	}
	return engine.Time(t.UnixNano())
}

// wallOrZero is wall(t), or the zero Time for 0 (none).
func wallOrZero(t engine.Time) (z time.Time) {
	if t == 0 {
		return z
	}
	return wall(t)
}

// exec carries out the actions a step of replica ri's core returned.
// Carrying one out can lead, in the same instant, to another step of the
// same core (an answer whose caller sends again at once, over a network
// of no latency): so the actions are copied onto a stack first, and each
// is read from there.
func (w *world) exec(v *service, ri int32, acts []admit.Action[int32]) {
	if len(acts) == 0 {
		return
	}
	base := len(w.acts)
	w.acts = append(w.acts, acts...)
	for i := base; i < base+len(acts); i++ {
		act := &w.acts[i]
		ai := act.H
		switch act.Kind {
		case admit.Start:
			a := &w.atts[ai]
			a.held, a.ref = false, act.Ref
			a.permit, a.hasPermit = act.Permit, true
			if v.meter.on {
				v.meter.waits += float64(act.Waited)
			}
			w.admitStart(ai, v, ri)
		case admit.Respond:
			a := &w.atts[ai]
			a.held, a.ref = false, admit.Ref{}
			w.answer(ai, v, v.reps[ri].core.Resolve(act.Decision))
		case admit.Wait, admit.Join:
			a := &w.atts[ai]
			a.held, a.ref = true, act.Ref
		case admit.Arm:
			w.armExpiry(v, ri, engine.Time(act.At.UnixNano()))
		}
	}
	w.acts = w.acts[:base]
}

// answer answers an attempt the core did not admit, as it decided: Expired
// (and Canceled: its caller has gone) is dropped without an answer (the
// server answers 504 to a caller who has gone); Superseded and Joined are
// supersession's answers; a refusal (kill switch, limit, queue full,
// evicted, queue timeout, throttled, key busy) is shed at once.
func (w *world) answer(ai int32, v *service, d admit.Decision) {
	if w.traceAnswer != nil {
		w.traceAnswer(ai, d)
	}
	switch d.Answer {
	case admit.Expired, admit.Canceled:
		w.expired(ai, v)
	case admit.Superseded:
		w.superseded(ai, v)
	case admit.Joined:
		w.joined(ai, v, d.Result.(int))
	default:
		cost := v.spec.FailureCost.Refuse
		if d.Reason == admit.ShedEvicted || d.Reason == admit.ShedQueueTimeout {
			cost = v.spec.FailureCost.Shed
		}
		w.reject(ai, v, cost)
	}
}

// cancel tells the core of attempt ai's replica that its caller left while
// it was queued there or waited for its twin.
func (w *world) cancel(ai int32) {
	a := &w.atts[ai]
	v := &w.services[a.svc]
	ri := a.rep
	d, ok, acts := v.reps[ri].core.CancelAt(wall(w.now()), a.ref)
	if !ok {
		return
	}
	a.held, a.ref = false, admit.Ref{}
	w.answer(ai, v, d)
	w.exec(v, ri, acts)
}

// admitStart gives an admitted attempt a worker, or a place in the run
// queue when none is free.
func (w *world) admitStart(ai int32, v *service, ri int32) {
	r := &v.reps[ri]
	a := &w.atts[ai]
	if r.busy < v.workers && v.paused == 0 && r.queue.Len() == 0 && r.debt == 0 {
		v.meter.started++
		w.start(ai, v, ri)
		return
	}
	// The item and the outcome live in w (PushTo), so that neither is
	// copied whole right after being written field by field: the wide
	// loads of such a copy stall on the narrow stores.
	it, adm := &w.pushItem, &w.pushAdm
	it.Payload, it.Attempt = uint64(ai), int(a.number) // PushTo sets Enqueued in the queue
	it.Deadline = time.Time{}
	if v.expire && a.deadline != 0 {
		it.Deadline = wall(a.deadline)
	}
	r.queue.PushTo(wall(w.now()), it, adm)
	// Read before answering anyone: an answer may lead to another push.
	refused, vr, victim := adm.Refused, adm.VictimReason, int32(adm.Victim.Payload)
	if vr != shed.None {
		w.dropRun(victim, v, vr)
	}
	if refused != shed.None {
		w.dropRun(ai, v, refused)
	}
	w.scheduleExpiry(v, ri)
}

// dropRun answers an admitted attempt that the run queue refused or gave
// up for why: the core takes back its slot, and answers it as a queue
// that gave it up would be answered.
func (w *world) dropRun(ai int32, v *service, why shed.Reason) {
	a := &w.atts[ai]
	ri := a.rep
	d, acts := v.reps[ri].core.AbandonAt(wall(w.now()), a.ref, &a.permit, wallOrZero(a.admitDL), why)
	a.hasPermit, a.ref = false, admit.Ref{}
	w.answer(ai, v, d)
	w.exec(v, ri, acts)
}

// releaseAttempt ends an admitted attempt's hold on its core at now (its
// work ended: completed with outcome o and its answer's code; or hung and
// let go, code codeNone) and returns how it counts. The core hands the
// freed slot on, and answers the attempts that joined it, or sends them
// through again.
func (w *world) releaseAttempt(ai int32, v *service, now time.Time, o admit.Outcome, code int) admit.Fate {
	a := &w.atts[ai]
	if a.ref.Keyed() {
		return w.releaseKeyed(ai, v, now, o, code)
	}
	a.hasPermit = false
	core := v.reps[a.rep].core
	f, handOn := core.ReleaseAt(now, &a.permit, wallOrZero(a.admitDL), !a.waiting, o)
	if handOn {
		w.exec(v, a.rep, core.DispatchAt(now))
	}
	return f
}

// releaseKeyed is releaseAttempt for an attempt its core's supersession
// table may hold.
func (w *world) releaseKeyed(ai int32, v *service, now time.Time, o admit.Outcome, code int) admit.Fate {
	a := &w.atts[ai]
	ri := a.rep
	a.hasPermit = false
	var result any // the answer to replay to its twins
	if code != codeNone {
		result = code
	}
	f, acts := v.reps[ri].core.EndAt(now, a.ref, &a.permit, wallOrZero(a.admitDL), !a.waiting, o, result)
	a.ref = admit.Ref{}
	w.exec(v, ri, acts)
	return f
}

// armExpiry sets replica ri's core timer for at: an evExpire then, whose
// onExpire calls the core's TickAt.
func (w *world) armExpiry(v *service, ri int32, at engine.Time) {
	r := &v.reps[ri]
	at = max(at, w.now())
	if r.coreTimer == at {
		return
	}
	r.coreTimer = at
	w.eng.At(at, engine.Event{Kind: evExpire, Target: uint32(v.idx), A: int64(ri)})
}

// tick fires replica ri's core timer if it is due.
func (w *world) tick(v *service, ri int32) {
	r := &v.reps[ri]
	if r.coreTimer == 0 || r.coreTimer > w.now() || r.down {
		return
	}
	r.coreTimer = 0
	w.exec(v, ri, r.core.TickAt(wall(w.now())))
}
