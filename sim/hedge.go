package sim

import (
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/engine"
)

// Hedged requests (retry.Policy.Hedge, gRFC A6): the retrier's hedging core
// decides when each copy goes out and when the request is over; the
// simulator sends the copies, times them out and cancels the losers.

// hedgeState is a hedged request's state: the retrier's Hedge and the
// attempts in flight by number.
type hedgeState struct {
	h     retry.Hedge
	atts  [retry.MaxHedgeAttempts]int32
	gens  [retry.MaxHedgeAttempts]uint32
	timer engine.Handle
}

// startHedge begins hedged request ri and sends its first copy.
func (w *world) startHedge(ri int32, deadline time.Time) {
	r := &w.reqs[ri]
	ret := w.edges[r.edge].retriers[r.proc]
	h, ok := ret.HedgeStartAt(wall(w.now()), deadline)
	if !ok {
		w.finishRequest(ri, false, retry.ErrBreakerOpen)
		return
	}
	var hi int32
	if n := len(w.freeHedge); n > 0 {
		hi = w.freeHedge[n-1]
		w.freeHedge = w.freeHedge[:n-1]
	} else {
		w.hedges = append(w.hedges, hedgeState{})
		hi = int32(len(w.hedges) - 1)
	}
	w.hedges[hi] = hedgeState{h: h}
	r.hedge = hi
	r.sent = true
	w.sendHedge(ri, 1)
}

// sendHedge sends copy n and arms the timer for the next.
func (w *world) sendHedge(ri, n int32) {
	hi := w.reqs[ri].hedge
	ai := w.launch(ri, n)
	if w.reqs[ri].hedge != hi {
		return // the copy's answer came in this same instant and ended it
	}
	hs := &w.hedges[hi]
	if hs.h.Running(int(n)) {
		hs.atts[n-1], hs.gens[n-1] = ai, w.atts[ai].gen
	}
	w.armHedge(ri)
}

// armHedge schedules the next hedge, when one may still be sent.
func (w *world) armHedge(ri int32) {
	r := &w.reqs[ri]
	hs := &w.hedges[r.hedge]
	w.eng.Cancel(hs.timer)
	hs.timer = engine.Handle{}
	if t, ok := hs.h.Next(); ok {
		at := max(engine.Time(t.UnixNano()), w.now())
		hs.timer = w.eng.AtCancelable(at, engine.Event{Kind: evHedge, A: int64(ri), B: int64(r.gen)})
	}
}

// onHedge: the next hedge is due.
func (w *world) onHedge(ri int32) {
	r := &w.reqs[ri]
	hs := &w.hedges[r.hedge]
	hs.timer = engine.Handle{}
	n, d := w.edges[r.edge].retriers[r.proc].HedgeAt(wall(w.now()), &hs.h)
	if n > 0 {
		w.sendHedge(ri, int32(n))
		return
	}
	if d.Done {
		w.finishRequest(ri, false, d.Reason)
	}
}

// hedgeEnded: copy n of hedged request ri ended with class cls.
func (w *world) hedgeEnded(ri, n int32, cls retry.Class, sig retry.Signal, degraded bool) {
	r := &w.reqs[ri]
	hs := &w.hedges[r.hedge]
	ret := w.edges[r.edge].retriers[r.proc]
	now := wall(w.now())
	hs.atts[n-1] = noID
	d := ret.HedgeEndAt(now, &hs.h, int(n), cls, sig)
	if !d.Done {
		w.armHedge(ri)
		return
	}
	// Over: the copies still in flight are cancelled; their callers stop
	// waiting (the servers may still work on them: wasted work).
	w.eng.Cancel(hs.timer)
	for m := range int32(retry.MaxHedgeAttempts) {
		if !hs.h.Running(int(m + 1)) {
			continue
		}
		if a := w.att(int64(hs.atts[m]), int64(hs.gens[m])); a != nil && a.waiting {
			w.eng.Cancel(a.timeout)
			w.callerLeft(hs.atts[m])
			w.maybeFree(hs.atts[m])
		}
		ret.HedgeCancelAt(now, &hs.h, int(m+1))
	}
	if cls == retry.Success && d.Reason == nil {
		r.degraded = r.degraded || degraded
		w.finishRequest(ri, true, nil)
		return
	}
	w.finishRequest(ri, false, d.Reason)
}
