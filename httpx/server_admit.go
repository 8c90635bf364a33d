package httpx

import (
	"net/http"
	"time"

	"github.com/stormguard/stormguard/admit"
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
	t, d := s.gate.Admit(r.Context(), time.Now(), req)
	if !d.Admitted() {
		s.refuse(w, d)
		return
	}
	serve(g.next, w, r, t, s.maxReplay)
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

// serve runs the handler under the request's deadline and signals, then
// releases its ticket with the handler's outcome and, if others may join
// it, a replayable copy of its response of at most maxReplay bytes.
func serve(next http.Handler, w http.ResponseWriter, r *http.Request, t admit.Ticket, maxReplay int) {
	// Bind is context.WithDeadline with the two values, in one allocation
	// and without a timer unless the handler waits on the context.
	ctx, cancel := t.Bind(r.Context())
	rw := &statusWriter{ResponseWriter: w}
	if t.Joinable() {
		rw.rec = &recording{max: maxReplay}
	}
	returned := false
	defer func() {
		o := handlerOutcome(rw, !returned)
		if rw.rec != nil && returned {
			if rp := rw.rec.result(rw); rp != nil {
				t.ReleaseWith(r.Context(), time.Now(), o, rp)
				cancel()
				return
			}
		}
		t.Release(r.Context(), time.Now(), o)
		cancel()
	}()
	next.ServeHTTP(rw, r.WithContext(ctx))
	returned = true
}

// handlerOutcome tells how a handler ended from what it wrote, as the Server
// documentation's table says.
func handlerOutcome(rw *statusWriter, panicked bool) admit.Outcome {
	switch st := rw.code(); {
	case panicked:
		return admit.Panicked
	case rw.hijacked:
		return admit.SucceededUntimed
	case st < 500:
		return admit.Succeeded
	case st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout:
		return admit.FailedOverload
	default:
		return admit.Failed
	}
}
