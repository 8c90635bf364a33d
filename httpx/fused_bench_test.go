package httpx_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/wire"
)

// fusedWrap is an experiment, not a product: stormguard's fast path for the
// default configuration written as one function with no abstraction between
// its steps (no Request, Entry, Ticket or Decision values, no gate, no
// queue: a request over the limit is refused at once). It reads the three
// headers, bounds the deadline by the header, MaxTimeout and the incoming
// context, drops an expired request, counts arrivals, starts and outcomes
// in atomics, takes and releases a Vegas permit with the latency sample,
// classifies the outcome by status and cancels the context: what
// httpx.Server does for a request it admits at once, at the least code.
// Between limiter and stormguard it says how much of the admission's cost
// a restructuring of the same semantics could remove.
func fusedWrap(tb testing.TB) func(http.Handler) http.Handler {
	alg, err := limit.Spec{}.New()
	if err != nil {
		tb.Fatal(err)
	}
	l := limit.NewLimiter(alg)
	var arrived, started, goodput, failed, wasted, expired atomic.Uint64
	const maxTimeout = 30 * time.Second
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := r.Header
			attempt, crit, budget := 1, wire.DefaultCriticality, maxTimeout
			if v := h[wire.HeaderAttempt]; len(v) > 0 {
				if n, ok := wire.ParseAttempt(v[0]); ok {
					attempt = n
				}
			}
			if v := h[wire.HeaderTimeout]; len(v) > 0 {
				if d, ok := wire.ParseTimeout(v[0]); ok && d < budget {
					budget = d
				}
			}
			if v := h[wire.HeaderCriticality]; len(v) > 0 {
				crit, _ = wire.ParseCriticality(v[0])
			}
			arrived.Add(1)
			now := time.Now()
			dl := now.Add(budget)
			ctx := r.Context()
			if pdl, ok := ctx.Deadline(); ok && pdl.Before(dl) {
				dl = pdl
			}
			if dl.Sub(now) <= 0 {
				expired.Add(1)
				w.WriteHeader(http.StatusGatewayTimeout)
				return
			}
			p, ok := l.AcquireAt(now)
			if !ok {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			started.Add(1)
			x := &floorExchange{w: floorWriter{ResponseWriter: w}}
			x.ctx.Init(ctx, dl, attempt, crit)
			next.ServeHTTP(&x.w, r.WithContext(&x.ctx))
			end := time.Now()
			switch st := x.w.status; {
			case !end.Before(dl):
				wasted.Add(1)
				p.DroppedAt(end)
			case ctx.Err() != nil:
				wasted.Add(1)
				p.IgnoreAt(end)
			case st < 500:
				goodput.Add(1)
				p.SuccessAt(end)
			case st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout:
				failed.Add(1)
				p.DroppedAt(end)
			default:
				failed.Add(1)
				p.IgnoreAt(end)
			}
			x.ctx.Cancel()
		})
	}
}
