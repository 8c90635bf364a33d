package httpx

import (
	"net/http"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/wire"
)

// guarded is a handler behind a Server: what [Server.Wrap] returns.
type guarded struct {
	s    *Server
	next http.Handler
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := g.s
	req := requestOf(r.Header)
	if req.Criticality > s.maxCrit && s.trust != nil {
		req.TrustedCriticality = s.trust(r)
	}
	if s.throttle != nil {
		req.Throttle = func() bool { return s.throttle(r) }
	}
	if s.supersede {
		req.Key, req.KeyScope = keyOf(r, s.scope)
	}
	now := s.clock.now()
	t, d := s.gate.Admit(r.Context(), now, req)
	if !d.Admitted() {
		s.refuse(w, d)
		return
	}
	serve(g.next, w, r, t, now, s.maxReplay)
}

// requestOf reads a request's signals from its headers: the attempt number
// (Stormguard-Attempt, else 1), the caller's timeout (Stormguard-Timeout)
// and the criticality (Stormguard-Criticality). A malformed value counts as
// absent.
func requestOf(h http.Header) admit.Request {
	req := admit.Request{Attempt: 1, Criticality: wire.DefaultCriticality}
	if v := h[wire.HeaderAttempt]; len(v) > 0 {
		if n, ok := wire.ParseAttempt(v[0]); ok {
			req.Attempt = n
		}
	}
	if v := h[wire.HeaderTimeout]; len(v) > 0 {
		req.Timeout, req.HasTimeout = wire.ParseTimeout(v[0])
	}
	if v := h[wire.HeaderCriticality]; len(v) > 0 {
		req.Criticality, _ = wire.ParseCriticality(v[0]) // malformed: the default
	}
	return req
}

// exchange is what the middleware allocates for a request it serves: the
// handler's context and the wrapper of its response writer, in one
// allocation. (The handler's *http.Request is the other: net/http copies it
// to carry a new context.)
type exchange struct {
	ctx deadline.Bound
	w   statusWriter
}

// serve runs the handler under the request's deadline and signals, then
// releases its ticket with the handler's outcome and, if others may join
// it, a replayable copy of its response of at most maxReplay bytes.
// arrived is the time the request was admitted at, a reading with a
// monotonic clock: the release is timed from it with one reading of that
// clock.
func serve(next http.Handler, w http.ResponseWriter, r *http.Request, t admit.Ticket, arrived time.Time, maxReplay int) {
	// The context is Ticket.Bind's (deadline.Bind: context.WithDeadline
	// with the two values, without a timer unless the handler waits on
	// it), made in the exchange's allocation.
	x := &exchange{w: statusWriter{ResponseWriter: w}}
	x.ctx.Init(r.Context(), t.Deadline(), t.Attempt(), t.Criticality())
	rw := &x.w
	if t.Joinable() {
		rw.rec = &recording{max: maxReplay}
	}
	returned := false
	defer func() {
		o := handlerOutcome(rw, !returned)
		if rw.rec != nil && returned {
			if rp := rw.rec.result(rw); rp != nil {
				t.ReleaseWith(r.Context(), since(arrived), o, rp)
				x.ctx.Cancel()
				return
			}
		}
		t.Release(r.Context(), since(arrived), o)
		x.ctx.Cancel()
	}()
	next.ServeHTTP(rw, r.WithContext(&x.ctx))
	returned = true
}

// handlerOutcome tells how a handler ended from what it wrote, as the Server
// documentation's table says.
func handlerOutcome(rw *statusWriter, panicked bool) admit.Outcome {
	switch {
	case panicked:
		return admit.Panicked
	case rw.hijacked:
		return admit.SucceededUntimed
	}
	return StatusOutcome(rw.code())
}

// StatusOutcome is how the Server tells its gate a handler's work ended
// from the status it answered: below 500 Succeeded; 503 or 504 (a call it
// made was refused or timed out below) FailedOverload; any other 5xx
// Failed. The release then counts it (goodput only for a success its
// caller still waited for) and teaches the limiter, as admit's
// documentation says. A handler behind another gate, or a test bench
// counting like one, reads its outcome here.
func StatusOutcome(status int) admit.Outcome {
	switch {
	case status < 500:
		return admit.Succeeded
	case status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		return admit.FailedOverload
	default:
		return admit.Failed
	}
}
