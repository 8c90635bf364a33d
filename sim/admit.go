package sim

import (
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
)

// Admission through a policy file's server block (ServerRef): each replica
// drives an admit.Core, the core of the production gate (httpx.Server,
// grpcx.Server), with virtual time. The calls below are the gate's, in the
// gate's order (admit/gate.go): Arrive, CheckAt, then AcquireAt (admitted at
// once) or PushAt (queued, or refused); when a permit is released or the
// queue's next expiry falls due, ExpireAt then GrantAt hand the slot on.
// With supersession, the supersede table is asked first, as the gate's
// admitKeyed asks it.

// admitAt is deliver's admission for a replica with a gate, after the kill
// switch.
func (w *world) admitAt(ai int32, v *service, ri int32) {
	a := &w.atts[ai]
	r := &v.reps[ri]
	g := r.gate
	now := wall(w.now())
	req := admit.Request{Attempt: int(a.number)}
	g.Arrive(req)
	var ctxDL engine.Time
	if a.deadline != 0 {
		ctxDL = a.deadline
	}
	e, d, ok := g.CheckAt(now, req, wallOrZero(ctxDL))
	if !ok {
		w.admitRefused(ai, v, d)
		return
	}
	a.admitDL = engine.Time(e.Deadline.UnixNano())
	if v.sup != nil && a.skey != 0 {
		got := false
		if _, _, held := v.sup.Held(a.skey); !held {
			a.permit, got = g.AcquireAt(now)
			a.hasPermit = got
		}
		if w.supersedeAt(ai, v, !got) {
			w.admitDispatch(v, ri) // a permit ignored may free a slot
			return
		}
		if got {
			g.Admitted()
			w.admitStart(ai, v, ri)
			return
		}
	} else if p, ok := g.AcquireAt(now); ok {
		a.permit, a.hasPermit = p, true
		g.Admitted()
		w.admitStart(ai, v, ri)
		return
	}
	adm, d := g.PushAt(now, ai, e)
	a.qh = adm.Handle
	if adm.HasVictim() {
		w.admitRefused(adm.Victim.Payload, v, g.Drop(adm.VictimReason, true))
	}
	if !adm.Admitted() {
		w.admitRefused(ai, v, d)
	}
	w.admitDispatch(v, ri)
	w.maybeCrash(v, ri)
}

// wallOrZero is wall(t), or the zero Time for 0 (no deadline).
func wallOrZero(t engine.Time) (z time.Time) {
	if t == 0 {
		return z
	}
	return wall(t)
}

// admitRefused answers an attempt the gate did not admit, as the gate
// decided: Expired is dropped without an answer (the server answers 504 to
// a caller who has gone); a refusal (queue full, evicted, queue timeout,
// throttled, kill switch) is shed at once.
func (w *world) admitRefused(ai int32, v *service, d admit.Decision) {
	switch d.Answer {
	case admit.Expired:
		w.expired(ai, v)
	default:
		cost := v.spec.FailureCost.Refuse
		if d.Reason == admit.ShedEvicted || d.Reason == admit.ShedQueueTimeout {
			cost = v.spec.FailureCost.Shed
		}
		w.reject(ai, v, cost)
	}
}

// admitStart gives an admitted attempt a worker, or a place in the run
// queue when none is free.
func (w *world) admitStart(ai int32, v *service, ri int32) {
	r := &v.reps[ri]
	a := &w.atts[ai]
	a.rep = ri
	if r.busy < v.workers && v.paused == 0 && r.queue.Len() == 0 && r.debt == 0 {
		v.meter.started++
		w.start(ai, v, ri)
		return
	}
	adm := r.queue.PushAt(wall(w.now()), shed.Item[int32]{Payload: ai, Attempt: int(a.number)})
	if !adm.Admitted() { // the run queue is full (DefaultQueueCapacity)
		w.reject(ai, v, v.spec.FailureCost.Refuse)
	}
}

// admitDispatch is the gate's dispatch at now on replica ri: the queued
// attempts whose time is up are answered, then freed slots go to queued
// attempts in the queue's order; then the next expiry is scheduled. It is
// a guard small enough to inline: most replicas have no gate.
func (w *world) admitDispatch(v *service, ri int32) {
	if r := &v.reps[ri]; r.gate != nil && !r.down {
		w.admitDispatchGate(v, ri)
	}
}

// admitDispatchGate is admitDispatch for a replica with a gate, up.
func (w *world) admitDispatchGate(v *service, ri int32) {
	r := &v.reps[ri]
	g := r.gate
	now := wall(w.now())
	for {
		ai, why, ok := g.ExpireAt(now)
		if !ok {
			break
		}
		w.admitLeft(ai, v)
		w.admitRefused(ai, v, g.Drop(why, true))
	}
	for {
		it, p, why, ok := g.GrantAt(now)
		if !ok {
			break
		}
		ai := it.Payload
		w.admitLeft(ai, v)
		if why != shed.None {
			w.admitRefused(ai, v, g.Drop(why, true))
			continue
		}
		a := &w.atts[ai]
		a.permit, a.hasPermit = p, true
		if a.tracked {
			// It may have taken an older twin's place, and with it the
			// twin's deadline in the queue: its own may have passed first.
			if a.admitDL != 0 && w.now().Add(v.gateMinRemain()) >= a.admitDL {
				w.expired(ai, v)
				continue
			}
			// In service from now on, for the table, as the gate has it,
			// though it may wait for a worker in the run queue.
			v.sup.StartAt(now, a.skey)
		}
		g.Admitted()
		if v.meter.on {
			v.meter.waits += float64(now.Sub(it.Enqueued))
		}
		w.admitStart(ai, v, ri)
	}
	w.admitArm(v, ri)
}

// admitLeft: attempt ai leaves the gate's queue (its handle means nothing
// now).
func (w *world) admitLeft(ai int32, v *service) {
	w.atts[ai].qh = shed.Handle{}
}

// admitArm schedules an evExpire when replica ri's gate's next queued
// attempt falls due (onExpire runs admitDispatch).
func (w *world) admitArm(v *service, ri int32) {
	r := &v.reps[ri]
	t, ok := r.gate.NextExpiry()
	if !ok {
		return
	}
	at := max(engine.Time(t.UnixNano()), w.now())
	if r.expiryAt != 0 && r.expiryAt <= at && r.expiryAt >= w.now() {
		return
	}
	r.expiryAt = at
	w.eng.At(at, engine.Event{Kind: evExpire, Target: uint32(v.idx), A: int64(ri)})
}

// gateMinRemain is the gate's min_remaining.
func (v *service) gateMinRemain() time.Duration {
	if v.spec.Server != nil {
		return v.spec.Server.WithDefaults().MinRemaining
	}
	return 0
}
