package httpx

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"stormguard/deadline"
	"stormguard/limit"
	"stormguard/shed"
	"stormguard/wire"
)

// guarded is a handler behind a Server: what [Server.Wrap] returns.
type guarded struct {
	s    *Server
	next http.Handler
}

// waiter is a request waiting in the queue. It receives exactly one grant
// on ch, sent under the server's mutex when it leaves the queue, unless it
// removes itself (Queue.Remove succeeds), in which case it receives none;
// so ch is empty again when the waiter goes back to the pool.
type waiter struct {
	ch     chan grant // buffered, capacity 1: a send never blocks
	handle shed.Handle
}

// grant is how a waiter's wait ended: with a permit to run (why is
// shed.None), or given up by the queue for why.
type grant struct {
	permit limit.Permit
	why    shed.Reason
}

// release kinds: how a permit is released, see the Server documentation.
const (
	releaseSuccess = iota
	releaseDropped
	releaseIgnore
)

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	s.c.arrived.Add(1)
	h := r.Header
	attempt := 1
	if v := h[wire.HeaderAttempt]; len(v) > 0 {
		if n, ok := wire.ParseAttempt(v[0]); ok {
			attempt = n
		}
	}
	if attempt > 1 {
		s.c.retries.Add(1)
	}
	if s.dials != nil {
		if ppm := s.dials.ShedPPM(); ppm > 0 && rand.Uint32N(1_000_000) < ppm {
			s.refuse(w, ShedKillSwitch)
			return
		}
	}

	now := time.Now()
	budget := s.maxTimeout
	if v := h[wire.HeaderTimeout]; len(v) > 0 {
		if d, ok := wire.ParseTimeout(v[0]); ok && d < budget { // malformed: ignored
			budget = d
		}
	}
	dl := now.Add(budget)
	if pdl, ok := r.Context().Deadline(); ok && pdl.Before(dl) {
		dl = pdl
	}
	if !now.Before(dl.Add(-s.minRemaining)) {
		s.expire(w)
		return
	}
	if s.throttle != nil && s.throttle(r) {
		s.refuse(w, ShedThrottled)
		return
	}
	crit := wire.DefaultCriticality
	if v := h[wire.HeaderCriticality]; len(v) > 0 {
		crit, _ = wire.ParseCriticality(v[0]) // malformed: the default
	}

	var p limit.Permit
	ok := false
	if s.waiting.Load() == 0 { // nobody to overtake: try the fast path
		p, ok = s.lim.AcquireAt(now)
	}
	if !ok {
		if p, ok = s.await(w, r, attempt, crit, dl); !ok {
			return
		}
	}
	s.serve(g.next, w, r, p, dl, attempt, crit)
}

// await queues the request until it gets a permit, and returns it. If the
// request does not get one it has been answered (or its client has gone),
// and await returns false.
func (s *Server) await(w http.ResponseWriter, r *http.Request, attempt int, crit wire.Criticality, dl time.Time) (limit.Permit, bool) {
	wt := s.waiters.Get().(*waiter)
	s.mu.Lock()
	now := time.Now() // read under the lock: the queue sees time move forward
	adm := s.q.PushAt(now, shed.Item[*waiter]{Payload: wt, Attempt: attempt, Criticality: crit, Deadline: dl})
	if adm.HasVictim() {
		adm.Victim.Payload.ch <- grant{why: adm.VictimReason}
	}
	if !adm.Admitted() {
		s.mu.Unlock()
		s.waiters.Put(wt)
		s.drop(w, adm.Refused)
		return limit.Permit{}, false
	}
	wt.handle = adm.Handle
	s.waiting.Store(int64(s.q.Len()))
	s.dispatchLocked(now)
	s.armLocked()
	s.mu.Unlock()

	var g grant
	select {
	case g = <-wt.ch:
	case <-r.Context().Done():
		s.mu.Lock()
		_, removed := s.q.Remove(wt.handle)
		if removed {
			s.waiting.Store(int64(s.q.Len()))
			s.armLocked()
		}
		s.mu.Unlock()
		if removed {
			s.waiters.Put(wt)
			s.c.canceled.Add(1)
			return limit.Permit{}, false
		}
		g = <-wt.ch // it left the queue under the lock: the grant is there
		if g.why == shed.None {
			// Admitted just as its client left: pass the slot on.
			s.waiters.Put(wt)
			s.c.canceled.Add(1)
			s.releaseAt(time.Now(), g.permit, releaseIgnore)
			return limit.Permit{}, false
		}
	}
	s.waiters.Put(wt)
	if g.why != shed.None {
		s.drop(w, g.why)
		return limit.Permit{}, false
	}
	return g.permit, true
}

// dispatchLocked answers the queued requests whose time is up at now, then
// hands permits to queued requests, in the queue's order, while the limiter
// grants them. s.mu must be held.
func (s *Server) dispatchLocked(now time.Time) {
	for {
		it, why, ok := s.q.ExpireAt(now)
		if !ok {
			break
		}
		it.Payload.ch <- grant{why: why}
	}
	for s.q.Len() > 0 {
		p, ok := s.lim.AcquireAt(now)
		if !ok {
			break
		}
		it, why, _ := s.q.PopAt(now)
		if why != shed.None { // not expected: ExpireAt just ran at the same now
			p.IgnoreAt(now)
		}
		it.Payload.ch <- grant{permit: p, why: why}
	}
	s.waiting.Store(int64(s.q.Len()))
}

// armLocked sets the timer to fire at the queue's next expiry, unless it is
// already set to fire no later; it stops the timer when nothing can expire.
// A timer that fires early finds nothing due and sets itself again. s.mu
// must be held.
func (s *Server) armLocked() {
	at, ok := s.q.NextExpiry()
	if !ok {
		if s.armed {
			s.timer.Stop()
			s.armed = false
		}
		return
	}
	if s.armed && !at.Before(s.armedAt) {
		return
	}
	s.armed, s.armedAt = true, at
	s.timer.Reset(time.Until(at))
}

// onTimer is the timer's function: it drops the requests whose time is up
// and sets the timer for the next.
func (s *Server) onTimer() {
	s.mu.Lock()
	s.armed = false
	s.dispatchLocked(time.Now())
	s.armLocked()
	s.mu.Unlock()
}

// releaseAt ends a permit at now as kind says and, if requests are
// waiting, hands the freed slot on.
func (s *Server) releaseAt(now time.Time, p limit.Permit, kind int) {
	switch kind {
	case releaseSuccess:
		p.SuccessAt(now)
	case releaseDropped:
		p.DroppedAt(now)
	default:
		p.IgnoreAt(now)
	}
	// The release above and this load pair with await's store of waiting
	// and its acquire: one of the two sides sees the other, so a freed slot
	// never goes unnoticed by a waiter.
	if s.waiting.Load() > 0 {
		s.mu.Lock()
		s.dispatchLocked(time.Now())
		s.armLocked()
		s.mu.Unlock()
	}
}

// serve runs the handler under the request's deadline and signals, then
// accounts for it and releases its permit.
func (s *Server) serve(next http.Handler, w http.ResponseWriter, r *http.Request, p limit.Permit, dl time.Time, attempt int, crit wire.Criticality) {
	// Bind is context.WithDeadline with the two values, in one allocation
	// and without a timer unless the handler waits on the context.
	ctx, cancel := deadline.Bind(r.Context(), dl, attempt, crit)
	rw := &statusWriter{ResponseWriter: w}
	s.c.started.Add(1)
	returned := false
	defer func() {
		s.finish(r.Context(), dl, rw, p, !returned)
		cancel()
	}()
	next.ServeHTTP(rw, r.WithContext(ctx))
	returned = true
}

// finish accounts for a handler that returned (or panicked) and releases
// its permit, as the Server documentation's table says. parent is the
// request's own context, dl the deadline of the handler's.
func (s *Server) finish(parent context.Context, dl time.Time, rw *statusWriter, p limit.Permit, panicked bool) {
	now := time.Now()
	kind := releaseSuccess
	switch {
	case panicked:
		s.c.failed.Add(1)
		kind = releaseIgnore
	case parent.Err() != nil: // the client went away
		s.c.wasted.Add(1)
		kind = releaseIgnore
	case !now.Before(dl): // the handler's context ended at its deadline
		s.c.wasted.Add(1)
		kind = releaseDropped
	case rw.hijacked:
		s.c.goodput.Add(1)
		kind = releaseIgnore
	default:
		switch st := rw.code(); {
		case st < 500:
			s.c.goodput.Add(1)
		case st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout:
			s.c.failed.Add(1)
			kind = releaseDropped
		default:
			s.c.failed.Add(1)
			kind = releaseIgnore
		}
	}
	s.releaseAt(now, p, kind)
}
