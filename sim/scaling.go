package sim

import (
	"math"
	"time"

	"github.com/stormguard/stormguard/autoscale"
	"github.com/stormguard/stormguard/sim/engine"
)

// Runbook actions and autoscaling: replicas that come and go, and the
// metrics an autoscaler reads.

// meter integrates what an autoscaler reads over its interval: per
// replica slot the time it served, its busy capacity (for cpu) and its
// attempts in service; for the service, queue waits and arrivals. It runs
// only for a service with an autoscaler.
type meter struct {
	on      bool
	last    engine.Time
	slots   []slotMeter // by replica slot
	up      float64     // ∫ replicas serving dt, draining ones included (for rate)
	waits   float64     // queue waits of the attempts that started, ns
	started int64
	arrived int64
}

// slotMeter is what one replica did in the interval.
type slotMeter struct {
	up    float64 // ∫ serving dt, ns
	work  float64 // ∫ busy capacity dt, in units of workers (cores) × ns
	inSvc float64 // ∫ attempts in service dt
}

// integrate brings the meter of v up to now; call it before anything the
// meter integrates changes. It is a guard small enough to inline: most
// services keep no meter.
func (w *world) integrate(v *service) {
	if v.meter.on {
		w.integrateOn(v)
	}
}

// integrateOn is integrate for a service that keeps its meter.
func (w *world) integrateOn(v *service) {
	m := &v.meter
	now := w.now()
	dt := float64(now - m.last)
	m.last = now
	if dt <= 0 {
		return
	}
	for len(m.slots) < len(v.reps) {
		m.slots = append(m.slots, slotMeter{})
	}
	for ri := range v.reps {
		r := &v.reps[ri]
		if r.down {
			continue
		}
		s := &m.slots[ri]
		m.up += dt
		s.up += dt
		s.inSvc += dt * float64(r.inSvc)
		if v.ps {
			s.work += dt * min(float64(len(r.ps.jobs)), v.cores) / v.cores
		} else {
			s.work += dt * float64(r.working) / float64(v.workers)
		}
	}
}

// observe returns what the autoscaler reads over the interval — the
// replicas asked for, those whose metric counts, and the metric — and
// resets the meter. A replica's metric counts when it serves, is not
// draining, and has served long enough for the policy (autoscale's
// Policy.Counts: with cpu, its readiness delay); cpu and concurrency are
// averaged over the time those replicas served, rate is the service's
// arrivals over the time all its replicas served, queue-delay the mean
// wait of the attempts that started.
func (w *world) observe(v *service) autoscale.Observation {
	w.integrate(v)
	m := &v.meter
	p := v.scaler.Policy()
	now := w.now()
	o := autoscale.Observation{Replicas: v.replicasWanted()}
	var up, work, inSvc float64
	for ri := range v.reps {
		r := &v.reps[ri]
		if r.retired || r.draining || r.down || !p.Counts(time.Duration(now-r.upAt)) {
			continue
		}
		o.Ready++
		if ri < len(m.slots) {
			s := &m.slots[ri]
			up, work, inSvc = up+s.up, work+s.work, inSvc+s.inSvc
		}
	}
	o.Value = math.NaN()
	switch p.Metric {
	case autoscale.CPU:
		if up > 0 {
			o.Value = work / up
		}
	case autoscale.Concurrency:
		if up > 0 {
			o.Value = inSvc / up
		}
	case autoscale.QueueDelay:
		o.Value = 0
		if m.started > 0 {
			o.Value = m.waits / float64(m.started) / 1e9
		}
	case autoscale.Rate:
		if m.up > 0 {
			o.Value = float64(m.arrived) / (m.up / 1e9)
		}
	}
	slots := m.slots
	clear(slots)
	*m = meter{on: true, last: now, slots: slots}
	return o
}

// onAutoscale: the autoscaler's evaluation.
func (w *world) onAutoscale(si int32) {
	v := &w.services[si]
	o := w.observe(v)
	d := v.scaler.DecideAt(wall(w.now()), o)
	if d.Replicas != o.Replicas {
		w.setReplicas(v, d.Replicas, v.scaleDelay)
	}
	if next := w.now().Add(v.scaler.Policy().Interval); next < w.end {
		w.eng.At(next, engine.Event{Kind: evAutoscale, Target: uint32(si)})
	}
}

// replicasWanted counts the replicas that are serving, starting or
// restarting: all but those scaled away or draining.
func (v *service) replicasWanted() int {
	n := 0
	for ri := range v.reps {
		if r := &v.reps[ri]; !r.retired && !r.draining {
			n++
		}
	}
	return n
}

// setReplicas makes v run n replicas: new ones serve delay later (after
// their start-up calls); of the surplus, those not serving are dropped,
// then the newest serving ones drain.
func (w *world) setReplicas(v *service, n int, delay time.Duration) {
	w.integrate(v)
	cur := v.replicasWanted()
	for ; cur < n; cur++ {
		ri := int32(noID)
		for j := range v.reps {
			if r := &v.reps[j]; r.retired {
				ri = int32(j)
				break
			}
		}
		if ri == noID {
			v.reps = append(v.reps, replica{})
			ri = int32(len(v.reps) - 1)
		}
		w.bootReplica(v, ri, delay)
	}
	// Those not serving (starting, or crashed) go first, as a ReplicaSet
	// removes its unready pods first; then the newest serving ones.
	for pass := 0; pass < 2 && cur > n; pass++ {
		for j := len(v.reps) - 1; j >= 0 && cur > n; j-- {
			r := &v.reps[j]
			if r.retired || r.draining || r.down != (pass == 0) {
				continue
			}
			cur--
			if r.down {
				// It never comes up.
				r.retired = true
				r.epoch++
				v.meter.clear(j)
				continue
			}
			r.draining = true
			w.maybeRetire(v, int32(j))
		}
	}
}

// clear forgets what the replica in slot ri did in the interval (it is
// gone; a new replica may take the slot).
func (m *meter) clear(ri int) {
	if ri < len(m.slots) {
		m.slots[ri] = slotMeter{}
	}
}

// bootReplica starts a new replica in slot ri: down until its delay has
// passed and its start-up calls have succeeded.
func (w *world) bootReplica(v *service, ri int32, delay time.Duration) {
	r, err := v.newReplica()
	if err != nil {
		panic("sim: a service that started once cannot start a replica: " + err.Error())
	}
	r.epoch = v.reps[ri].epoch + 1
	r.down, r.booting = true, true
	if st := v.spec.Autoscale; st != nil && st.Startup != nil {
		r.bootLeft = st.Startup.Calls
	}
	v.reps[ri] = r
	w.eng.After(delay, engine.Event{Kind: evReady, Target: uint32(v.idx), A: int64(ri), B: int64(r.epoch)})
	if r.bootLeft > 0 {
		w.bootCall(v, ri)
	}
}

// bootCall makes the replica's next start-up call.
func (w *world) bootCall(v *service, ri int32) {
	w.newRequest(v.bootEdge, 0, origin{parent: noID, parentGen: v.reps[ri].epoch, user: noID, boot: ri, intent: noID}, 0)
}

// onReady: a booting replica's delay has passed.
func (w *world) onReady(si, ri int32, epoch uint32) {
	v := &w.services[si]
	r := &v.reps[ri]
	if r.epoch != epoch || !r.booting {
		return
	}
	r.delayed = true
	w.maybeUp(v, ri)
}

// bootDone: a start-up call of replica ri (of epoch) ended.
func (w *world) bootDone(si, ri int32, epoch uint32, ok bool) {
	v := &w.services[si]
	r := &v.reps[ri]
	if r.epoch != epoch || !r.booting {
		return
	}
	if !ok {
		w.eng.After(v.spec.Autoscale.Startup.RetryAfter, engine.Event{Kind: evBoot, Target: uint32(si), A: int64(ri), B: int64(epoch)})
		return
	}
	r.bootLeft--
	if r.bootLeft > 0 {
		w.bootCall(v, ri)
		return
	}
	w.maybeUp(v, ri)
}

func (w *world) onBoot(si, ri int32, epoch uint32) {
	v := &w.services[si]
	if r := &v.reps[ri]; r.epoch == epoch && r.booting {
		w.bootCall(v, ri)
	}
}

// maybeUp brings a booting replica into service once both its delay and
// its start-up calls are done.
func (w *world) maybeUp(v *service, ri int32) {
	r := &v.reps[ri]
	if !r.delayed || r.bootLeft > 0 {
		return
	}
	w.integrate(v)
	r.booting, r.down = false, false
	r.upAt = w.now()
}

// maybeRetire ends a draining replica once it holds nothing.
func (w *world) maybeRetire(v *service, ri int32) {
	r := &v.reps[ri]
	if !r.draining || r.busy > 0 || r.queued() > 0 || r.debt > 0 {
		return
	}
	w.integrate(v)
	r.draining, r.retired, r.down = false, true, true
	r.epoch++
	v.meter.clear(int(ri))
}

// --- runbook actions -------------------------------------------------------

// startRunbook schedules the actions (after the triggers of the same
// instant) and every autoscaler's first evaluation.
func (w *world) startRunbook() {
	for i, a := range w.sc.Actions {
		if engine.Time(a.At) <= w.end {
			w.eng.At(engine.Time(a.At), engine.Event{Kind: evAction, Target: uint32(i)})
		}
	}
	for i := range w.services {
		if v := &w.services[i]; v.scaler != nil {
			w.eng.At(engine.Time(v.scaler.Policy().Interval), engine.Event{Kind: evAutoscale, Target: uint32(i)})
		}
	}
}

// onAction applies an operator's runbook step.
func (w *world) onAction(i int) {
	a := &w.sc.Actions[i]
	si, isSvc := w.svcIdx[a.Target]
	var v *service
	if isSvc {
		v = &w.services[si]
	}
	switch a.Kind {
	case "retries-off", "retries-on":
		off := a.Kind == "retries-off"
		if isSvc {
			v.dials.SetRetriesDisabled(off)
		} else {
			w.clients[w.cliIdx[a.Target]].dials.SetRetriesDisabled(off)
		}
	case "shed":
		_ = v.dials.SetShedFraction(a.Value)
	case "limit":
		_ = v.dials.SetLimitOverride(int(a.Value))
	case "replicas":
		delay := a.Delay
		if delay == 0 {
			delay = v.scaleDelay
		}
		w.setReplicas(v, int(a.Value), delay)
	case "capacity":
		w.psAdvanceAll(v)
		v.opSpeed = a.Value
		w.psRescheduleAll(v)
	case "pause", "resume":
		paused := a.Kind == "pause"
		switch {
		case a.Call != "":
			for _, ei := range v.calls {
				if e := &w.edges[ei]; w.services[e.target].spec.Name == a.Call {
					e.paused = paused
				}
			}
		case isSvc:
			// Every call into the service, from clients and services.
			for ei := range w.edges {
				if w.edges[ei].target == si {
					w.edges[ei].paused = paused
				}
			}
		default:
			w.edges[w.clients[w.cliIdx[a.Target]].edge].paused = paused
		}
	}
}
