package httpx

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// Hedge documents how the Transport hedges; it is not meant to be called.
//
// When the Retrier's policy has a hedging policy ([retry.Policy].Hedge with
// MaxAttempts above 1), a request that is idempotent (GET, HEAD, OPTIONS or
// TRACE, or any method with an Idempotency-Key or X-Idempotency-Key header,
// the rule net/http uses for its own replays) and whose body can be replayed
// is hedged instead of retried, with gRFC A6's rules ([retry.HedgePolicy]):
// the first attempt is sent at once, another copy every Delay without a
// success, up to MaxAttempts in flight; a retryable failure sends the next
// copy at once (or after the server's pushback); the first success is
// returned and the other attempts are cancelled (their responses drained and
// closed); a fatal answer (a status the policy never retries, a signal that
// the service is overloaded) ends the call at once. Every copy after the
// first carries its attempt number in Stormguard-Attempt, so that a
// stormguard server sheds hedges before first tries, and is charged to the
// retry budget; the circuit breaker is asked for each. Other requests are
// retried as usual. What the caller gets follows RoundTrip's give-up
// contract.
func (t *Transport) Hedge() {}

// idempotent reports whether req may be sent more than once at a time.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// hedgeResult is how one hedged attempt ended.
type hedgeResult struct {
	n   int
	o   outcome
	end time.Time
}

// hedge sends req under the Retrier's hedging policy (see Hedge).
func (t *Transport) hedge(ctx context.Context, base http.RoundTripper, r *retry.Retrier, req *http.Request, now, deadline time.Time) (*http.Response, error) {
	h, ok := r.HedgeStartAt(now, deadline)
	if !ok {
		closeBody(req.Body)
		return nil, r.HedgeGiveUp(&h, retry.ErrBreakerOpen, nil)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	results := make(chan hedgeResult, retry.MaxHedgeAttempts) // never blocks a sender
	var cancels [retry.MaxHedgeAttempts]context.CancelFunc
	launch := func(n int, body io.ReadCloser) {
		actx, cancel := context.WithCancel(ctx)
		cancels[n-1] = cancel
		go func() {
			o := t.send(actx, false, deadline, base, r, req, body, n, nil)
			results <- hedgeResult{n: n, o: o, end: time.Now()}
		}()
	}
	launch(1, req.Body)

	var (
		timer *time.Timer
		last  outcome // the last failure
		d     retry.HedgeDecision
		win   *http.Response
		done  = ctx.Done()
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for !d.Done {
		var tc <-chan time.Time
		if next, ok := h.Next(); ok {
			if wait := time.Until(next); wait <= 0 {
				n, dd := r.HedgeAt(time.Now(), &h)
				if n > 0 {
					var body io.ReadCloser
					if hasBody {
						b, err := req.GetBody()
						if err != nil {
							// The hedge was granted but cannot be sent.
							r.HedgeCancelAt(time.Now(), &h, n)
							d = r.HedgeStopAt(time.Now(), &h, retry.ErrNotRetryable)
							continue
						}
						body = b
					}
					launch(n, body)
				}
				d = dd
				continue
			} else if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tc = timer.C
		}
		select {
		case res := <-results:
			if supersededCopy(res.o.resp) && otherRunning(&h, res.n) {
				// A later copy of this call took this one's place in a
				// superseding server's queue (it carries the same
				// Idempotency-Key): its answer is this call's. Not a
				// failure: the copy is cancelled, as a loser would be.
				r.HedgeCancelAt(res.end, &h, res.n)
				cancels[res.n-1]()
				discard(res.o.resp)
				continue
			}
			d = r.HedgeEndAt(res.end, &h, res.n, res.o.cls, res.o.sig)
			if res.o.cls == retry.Success {
				win = res.o.resp
				if win.Body != nil {
					win.Body = withCancel(win.Body, cancels[res.n-1])
				} else {
					cancels[res.n-1]()
				}
				break
			}
			cancels[res.n-1]()
			if last.resp != nil {
				discard(last.resp)
			}
			if res.o.resp != nil {
				keep(res.o.resp, res.o.err, nil)
			}
			last = res.o
		case <-tc:
		case <-done:
			// The attempts in flight end with the context and report;
			// with none in flight, the wait for a pushback ends here.
			done = nil
			if h.InFlight() == 0 {
				d = r.HedgeStopAt(time.Now(), &h, retry.ErrCanceled)
				last.err = fmt.Errorf("%w; then, waiting to hedge: %w", last.err, ctxErr(ctx))
			}
		}
	}
	// Cancel the attempts still in flight; a goroutine collects them and
	// closes their responses.
	if k := h.InFlight(); k > 0 {
		end := time.Now()
		for n := 1; n <= h.Sent(); n++ {
			if h.Running(n) {
				cancels[n-1]()
				r.HedgeCancelAt(end, &h, n)
			}
		}
		go func() {
			for range k {
				if res := <-results; res.o.resp != nil {
					discard(res.o.resp)
				}
			}
		}()
	}
	if d.Reason == nil {
		return win, nil
	}
	err := r.HedgeGiveUp(&h, d.Reason, last.err)
	if last.resp == nil {
		return nil, err
	}
	resp := last.resp
	markGivenUp(resp, d.Reason, h.Sent())
	if t.ResponseOnGiveUp || last.cls == retry.NeverRetry || t.Retrier == nil {
		return resp, nil
	}
	return nil, err
}

// supersededCopy reports whether resp is a superseding server's answer to
// a request a newer twin replaced in its queue (409 Conflict with
// Stormguard-Superseded: replaced).
func supersededCopy(resp *http.Response) bool {
	return resp != nil && resp.StatusCode == http.StatusConflict && first(resp.Header, HeaderSuperseded) == "replaced"
}

// otherRunning reports whether an attempt of h other than n is in flight.
func otherRunning(h *retry.Hedge, n int) bool {
	for m := 1; m <= h.Sent(); m++ {
		if m != n && h.Running(m) {
			return true
		}
	}
	return false
}
