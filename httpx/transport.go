package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Transport is an http.RoundTripper that retries requests as a
// [retry.Retrier] decides and puts stormguard's signals on the wire (see the
// package documentation). It is the net/http shell around the retry core,
// the equivalent of [retry.Do].
//
// The request's context carries the call's signals to the next hop: its
// deadline becomes Stormguard-Timeout (see PropagateDeadline), and a
// criticality set with [deadline.WithCriticality] (as the [Server]
// middleware does for the handler's context) becomes Stormguard-Criticality
// unless the request already has that header or the criticality is the
// default. Retries carry their attempt number in Stormguard-Attempt ("2",
// "3" …); a first try carries none, which every stormguard server reads as
// attempt 1. The attempt number is the Transport's own, never inherited: a
// Stormguard-Attempt the caller's request carries is not sent on.
//
// Build one with [NewTransport]. The zero Transport is usable: it sends each
// request once through http.DefaultTransport, as the caller made it (a
// first try, without the deadline header). A Transport is safe for
// concurrent use; do not change its fields once it is in use.
type Transport struct {
	// Base sends each attempt; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Retrier decides whether and when to retry, and keeps the state shared
	// by all requests (the retry budget, the learned attempt time). Its
	// policy's AttemptTimeout bounds each attempt. Nil means a single attempt
	// per request, and every response returned as it came (there is no
	// retrying to give up on).
	Retrier *retry.Retrier
	// PropagateDeadline stamps Stormguard-Timeout on every attempt whose
	// context has a deadline: the caller's, or AttemptTimeout from now if
	// that is sooner. [NewTransport] sets it. Whatever its value, a request
	// whose deadline has already passed fails locally, unsent.
	PropagateDeadline bool
	// Throttle, when set, is client-side adaptive throttling (Google SRE
	// book, "Handling Overload"), consulted before every attempt: an attempt
	// it refuses fails locally, unsent, with an error that wraps
	// [ErrThrottled], of class [retry.Throttling] (the Retrier may retry it
	// after its throttling backoff, through the throttle again). An attempt
	// counts as accepted when it gets any response but 429 or a 503 with
	// Stormguard-Overload; a transport error or a timeout is not an accept.
	// Share one per backend. Nil means no throttling, at no cost.
	Throttle *AdaptiveThrottle
	// ResponseOnGiveUp returns the last failure response with a nil error
	// when retrying stops on one, as it came from the server (the header
	// Stormguard-Retries-Exhausted aside), instead of a *retry.GiveUpError
	// that carries it. For reverse proxies that relay responses as they
	// are; the caller must then close the body, and learns why retrying
	// stopped only from the hooks.
	ResponseOnGiveUp bool
}

// NewTransport returns a Transport that sends attempts through base (nil:
// http.DefaultTransport), retries as r decides (nil: never) and propagates
// deadlines.
func NewTransport(base http.RoundTripper, r *retry.Retrier) *Transport {
	return &Transport{Base: base, Retrier: r, PropagateDeadline: true}
}

// Client returns an *http.Client whose transport is NewTransport(base, r).
// Redirects, cookies and the client's own Timeout work as usual; each
// request of a redirect chain is retried on its own.
func Client(base http.RoundTripper, r *retry.Retrier) *http.Client {
	return &http.Client{Transport: NewTransport(base, r)}
}

var _ http.RoundTripper = (*Transport)(nil)

// single makes one attempt per request; it is the Retrier of a Transport
// without one. Its policy needs no budget and learns nothing, so sharing it
// shares no state.
var single = retry.MustNew(retry.Policy{MaxAttempts: 1})

// RoundTrip sends req, retrying as the Retrier decides. It implements
// http.RoundTripper and keeps its contract:
//
//   - req is never modified: an attempt with headers to add (a retry's
//     attempt number, the deadline, the criticality) or an attempt bound
//     sends a shallow copy with a header map of its own, to which the
//     Transport adds them; a first try with none of these is req itself;
//   - req.Body is always closed, also on errors (by the base transport for
//     the attempt it was given to, by RoundTrip otherwise);
//   - a retry sends a fresh body from req.GetBody. A request with a body but
//     no GetBody is sent once: a body that cannot be replayed is not
//     retried (http.NewRequest sets GetBody for the usual in-memory bodies);
//   - a response that is retried is drained (up to 64 KiB, so that its
//     connection can be reused) and closed; the caller never sees it.
//
// The context of req bounds the whole call. If its deadline has already
// passed, or it is already done, RoundTrip fails at once with an error that
// wraps ctx.Err() (context.DeadlineExceeded for a deadline), sends nothing and
// counts no attempt. When the context ends during an attempt, the attempt is
// of class [retry.Canceled] and never retried; when it ends while waiting to
// retry, RoundTrip returns at once.
//
// Each attempt runs under a child context bounded by the policy's
// AttemptTimeout, if any; an attempt that runs past it is of class
// [retry.Timeout] and its error wraps [ErrAttemptTimeout]. As with
// http.Client's Timeout, the bound covers reading the returned body too: the
// child context ends when the caller closes the body or reads it to the end.
//
// Responses are classified by status: below 400 is [retry.Success];
// otherwise the Retrier's classifiers see a [*StatusError] (one may accept a
// status by answering Success) and the default is [retry.ClassifyHTTPStatus].
// The server's signals ([ParseSignal]) go to the Retrier with the class.
// Transport errors are classified by the Retrier ([retry.Retrier.Classify]).
// With a circuit breaker on the Retrier ([retry.WithBreaker]) every attempt
// asks it first; an attempt it refuses is not sent.
//
// What the caller gets, the give-up contract (the same as grpcx's):
//
//   - a success, or a failure response the policy never retries (class
//     [retry.NeverRetry]: 400, 404, 501 …, the server's definitive answer):
//     the response, with a nil error, as net/http gives it;
//   - whenever retrying stopped on anything else: a nil response and a
//     [*retry.GiveUpError] (http.Client wraps it in a *url.Error, which
//     errors.Is and errors.As see through). errors.Is(err, reason) says why
//     it stopped: [retry.ErrAttemptsExhausted], [retry.ErrBudgetExhausted],
//     [retry.ErrDeadline], [retry.ErrServerSaidStop],
//     [retry.ErrRetriesDisabled], [retry.ErrBreakerOpen], [retry.ErrCanceled],
//     [retry.ErrNotRetryable] (a body that cannot be replayed) …; when the
//     last attempt got a response, errors.As(err, &se) finds its
//     [*StatusError], whose StatusCode, Header and Response (body already
//     read into memory and closed: nothing to close, nothing leaks) describe
//     it, and otherwise errors.Is and errors.As see the transport error.
//
// A failure response the caller gets (either way) carries the header
// Stormguard-Retries-Exhausted: 1 when the layers above must not retry it
// ([retry.StopsAbove]: more than one attempt was made, the retry budget,
// the kill switch or the circuit breaker refused the retry, or the server
// said not to retry), so that a proxy relaying it ([RelayExhausted]) tells
// its own callers not to retry. Set
// ResponseOnGiveUp to get every failure response back as a response with a
// nil error instead (a reverse proxy that relays responses as they are).
//
// With a hedging policy ([retry.Policy].Hedge), idempotent requests are
// hedged instead of retried: see [Transport.Hedge].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	r := t.Retrier
	if r == nil {
		r = single
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	deadline, hasDL := ctx.Deadline() // the zero Time when there is none
	// The clock is read when something needs it, as retry.Do reads it: a
	// deadline to check, propagate and retry within, or a retrier whose
	// success path is timed. A failed attempt always reads it.
	timed := hasDL || r.NeedsClock()
	var now time.Time
	if timed {
		now = time.Now()
	}
	if ctx.Err() != nil || hasDL && !now.Before(deadline) {
		closeBody(req.Body)
		return nil, expired(ctx, now, deadline)
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	replayable := !hasBody || req.GetBody != nil
	if r.Hedges() && replayable && idempotent(req) {
		if !timed {
			now = time.Now()
		}
		return t.hedge(ctx, base, r, req, now, deadline)
	}

	// The first attempt, when the retrier needs no Call for a first
	// attempt that succeeds (no breaker to ask, no hooks, a token bucket
	// to reward), as retry.Do does: made at once, the Call started only if
	// it fails; its round trip inline when it goes as the caller made it
	// (see send).
	var o outcome
	made := false // the attempt o is made; the Call not yet started
	if r.SkipsCall() {
		if t.asIs(r, req, hasDL) {
			resp, err := base.RoundTrip(req)
			if err == nil && resp.StatusCode < 400 {
				var end time.Time
				if timed {
					end = time.Now()
				}
				r.SucceededFirstAt(now, end)
				return resp, nil
			}
			o = t.result(ctx, ctx, nil, 0, r, req, false, resp, err)
		} else {
			o = t.send(ctx, true, deadline, base, r, req, req.Body, 1, nil)
		}
		if o.cls == retry.Success { // or a classifier took the status for one
			var end time.Time
			if timed {
				end = time.Now()
			}
			r.SucceededFirstAt(now, end)
			return o.resp, nil
		}
		made = true
	}
	c := r.StartContext(ctx, now, deadline)
	body := req.Body // the first attempt sends the caller's body
	var (
		prev  outcome       // the previous attempt's
		spare *http.Request // a request of ours whose response is closed, to send again
		kb    *keptBody     // the call's kept body, for one retried response after another
	)
	for {
		if !made {
			if !r.AllowAt(now, &c) {
				closeBody(body)
				return t.stop(r, &c, retry.ErrBreakerOpen, prev, kb)
			}
			o = t.send(ctx, true, deadline, base, r, req, body, c.Attempt(), spare)
			spare = nil
			if o.cls == retry.Success {
				var end time.Time
				if timed {
					end = time.Now()
				}
				r.EndAt(end, &c, retry.Success, retry.Signal{}, 0)
				return o.resp, nil
			}
		}
		made = false
		end := time.Now()
		if !replayable {
			// A body that cannot be sent again: report the attempt, never
			// ask for (or pay for) a retry.
			r.FinishAt(end, &c, o.cls)
			return t.stop(r, &c, retry.ErrNotRetryable, o, kb)
		}
		d := r.EndAt(end, &c, o.cls, o.sig, r.Sample())
		if !d.Retry {
			return t.stop(r, &c, d.Reason, o, kb)
		}
		if o.resp != nil {
			// Drained and closed; the caller may still see it in a
			// give-up, until the next attempt is sent. Its body is then
			// out of reach, and its buffer is the next one's; its request,
			// if it is ours, is the next attempt's (a RoundTripper is done
			// with a request once its response's body is closed).
			kb = keep(o.resp, o.err, kb)
			spare = o.spare
		}
		if err := wait(ctx, deadline, d.Delay); err != nil {
			r.AbandonAt(time.Now(), &c)
			return nil, r.GiveUp(&c, retry.ErrCanceled, fmt.Errorf("%w; then, waiting to retry: %w", o.err, err))
		}
		if hasBody {
			b, err := req.GetBody()
			if err != nil {
				r.AbandonAt(time.Now(), &c)
				return nil, r.GiveUp(&c, retry.ErrNotRetryable, fmt.Errorf("%w; then, replaying the body: %w", o.err, err))
			}
			body = b
		}
		now = end // no wait: the next attempt starts as this one ended
		if d.Delay > 0 || hasBody {
			now = time.Now()
		}
		r.NextAt(now, &c)
		prev = o
	}
}

// stop ends a call that failed, after its attempt c, for reason, with o
// the last attempt's outcome (the zero outcome when none was sent): the
// give-up error, or the last response itself (see RoundTrip).
//
// kb, if not nil, is a kept body of the call that is out of the caller's
// reach, for stop to reuse.
func (t *Transport) stop(r *retry.Retrier, c *retry.Call, reason error, o outcome, kb *keptBody) (*http.Response, error) {
	err := r.GiveUp(c, reason, o.err) // also runs the OnGiveUp hook
	if o.resp == nil {
		return nil, err
	}
	markGivenUp(o.resp, reason, c.Attempt())
	if t.ResponseOnGiveUp || o.cls == retry.NeverRetry || t.Retrier == nil {
		return o.resp, nil
	}
	keep(o.resp, o.err, kb)
	return nil, err
}

// markGivenUp sets Stormguard-Retries-Exhausted: 1 on resp, the last
// failure response of a call that gave up for reason after attempts
// attempts, when the layers above must not retry it ([retry.StopsAbove]),
// so that a proxy relaying it ([RelayExhausted]) tells its own callers so.
func markGivenUp(resp *http.Response, reason error, attempts int) {
	if _, stop := retry.StopsAbove(reason, attempts); !stop {
		return
	}
	if resp.Header == nil {
		resp.Header = make(http.Header)
	}
	resp.Header[wire.HeaderRetriesExhausted] = hdrExhausted
}

// keep reads a failure response's body into memory (up to drainLimit) and
// closes the connection's body, then hands the response to its
// StatusError (err): a give-up error that carries it leaks nothing. A
// response already kept is left as it is. kb, if not nil, is a kept body
// nobody reads any more, whose struct and buffer keep reuses; keep returns
// the kept body it used, if any, else kb.
func keep(resp *http.Response, err error, kb *keptBody) *keptBody {
	se, _ := err.(*StatusError) // send's error for every failure response
	if se == nil || se.Response != nil {
		if se == nil || se.Response != resp {
			discard(resp)
		}
		return kb
	}
	se.Response = resp
	if resp.Body == nil || resp.Body == http.NoBody {
		return kb
	}
	size := 512 // a failure's body is usually short
	if n := resp.ContentLength; n >= 0 && n < drainLimit {
		size = int(n) + 1 // room to see the end
	}
	var buf []byte
	if kb != nil {
		buf = kb.buf[:0]
	} else {
		kb = new(keptBody)
	}
	data, rerr := readUpTo(resp.Body, drainLimit, size, buf)
	_ = resp.Body.Close()
	kb.buf, kb.data, kb.err = data, data, io.EOF
	switch {
	case len(data) > drainLimit:
		kb.data, kb.err = data[:drainLimit], ErrBodyTruncated
	case rerr != nil:
		kb.err = rerr
	}
	resp.Body = kb
	return kb
}

// readUpTo reads r to its end or until it has more than limit bytes, into
// buf, grown to size bytes at first if it has less room.
func readUpTo(r io.Reader, limit, size int, buf []byte) ([]byte, error) {
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	for len(buf) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// keptBody is a response body read into memory: data, then err (io.EOF,
// ErrBodyTruncated, or the error that ended the reading). Closing it does
// nothing: the connection's body is already closed.
type keptBody struct {
	data []byte
	err  error
	buf  []byte // all of what was read, for reuse
}

func (b *keptBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *keptBody) Close() error { return nil }

// outcome is how one attempt ended.
type outcome struct {
	resp  *http.Response // nil after a transport error
	err   error          // the transport error, or a *StatusError for a failure response
	cls   retry.Class
	sig   retry.Signal
	spare *http.Request // with a failure response: the attempt's request if it is a copy of ours, to reuse
}

// send makes attempt n of req with the given body, under a child context
// when the policy bounds attempts, and classifies what came back. own says
// that ctx is req's own context, not one derived from it; dl is ctx's
// deadline (the zero Time: none). The first attempt
// of a request whose context is its own, with no deadline to propagate, no
// criticality to send and no attempt bound, goes as the caller made it:
// Stormguard-Attempt is absent on a first try. spare, if not nil, is an
// earlier attempt's request of ours (see attemptRequest) that its base
// transport is done with, for this attempt to reuse.
func (t *Transport) send(ctx context.Context, own bool, dl time.Time, base http.RoundTripper, r *retry.Retrier, req *http.Request, body io.ReadCloser, n int, spare *http.Request) outcome {
	if t.Throttle != nil && !t.Throttle.Allow() {
		closeBody(body)
		return outcome{err: fmt.Errorf("httpx: attempt %d not sent: %w", n, ErrThrottled), cls: retry.Throttling}
	}
	actx, cancel := ctx, context.CancelFunc(nil)
	timeout := r.AttemptTimeout()
	if timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, timeout)
	}
	var st stamps
	if n > 1 {
		st.attempt = attemptValue(n)
	}
	if c := deadline.Criticality(ctx); c != wire.DefaultCriticality && len(req.Header[wire.HeaderCriticality]) == 0 {
		st.crit = criticalityValue(c)
	}
	if t.PropagateDeadline {
		adl := dl // the caller's, as ctx has it
		if cancel != nil {
			adl, _ = actx.Deadline()
		}
		if !adl.IsZero() {
			v, ok := wire.FormatTimeout(time.Until(adl))
			if !ok { // the caller's deadline passed since the last check
				if cancel != nil {
					cancel()
				}
				closeBody(body)
				return outcome{err: fmt.Errorf("httpx: deadline passed before attempt %d was sent: %w", n, context.DeadlineExceeded), cls: retry.Canceled}
			}
			st.timeout = v
		}
	}
	out, ours := req, false
	if !own || cancel != nil || st.any() || req.Header == nil || req.Header[wire.HeaderAttempt] != nil {
		out, ours = attemptRequest(actx, req, body, st, spare)
	}

	resp, err := base.RoundTrip(out)
	return t.result(ctx, actx, cancel, timeout, r, out, ours, resp, err)
}

// result is the outcome of an attempt whose request out (ours: a copy with
// a header map of this layer's) got resp, err from the base transport,
// under the attempt context actx (cancel: its cancel func, nil when it is
// ctx itself; timeout: the attempt bound).
func (t *Transport) result(ctx, actx context.Context, cancel context.CancelFunc, timeout time.Duration, r *retry.Retrier,
	out *http.Request, ours bool, resp *http.Response, err error) outcome {
	if t.Throttle != nil && err == nil && backendAccepted(resp.StatusCode, resp.Header) {
		t.Throttle.Accept()
	}
	if err != nil {
		timedOut := cancel != nil && actx.Err() != nil && ctx.Err() == nil
		if cancel != nil {
			cancel()
		}
		switch cls := r.ClassifyAttempt(ctx, err); {
		case cls == retry.Canceled: // the caller's context is done
			if !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%w)", err, ctxErr(ctx))
			}
			return outcome{err: err, cls: cls}
		case timedOut:
			return outcome{err: fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, timeout, err), cls: retry.Timeout}
		default:
			return outcome{err: err, cls: cls}
		}
	}
	if cancel != nil {
		if resp.Body != nil {
			resp.Body = withCancel(resp.Body, cancel)
		} else {
			cancel()
		}
	}
	if resp.StatusCode < 400 {
		return outcome{resp: resp, cls: retry.Success}
	}
	se := &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
	cls := r.Classify(se)
	if cls == retry.Success { // a classifier may accept a status, 404 say
		return outcome{resp: resp, cls: retry.Success}
	}
	o := outcome{resp: resp, err: se, cls: cls, sig: ParseSignal(resp.Header, time.Now())}
	if ours {
		o.spare = out
	}
	return o
}

// asIs reports whether the first attempt of req (whose context has a
// deadline: hasDL) goes as the caller made it, as send would send it:
// no throttle to ask, no attempt bound, no deadline to propagate, no
// criticality to send, and a header map without a Stormguard-Attempt of
// its own.
func (t *Transport) asIs(r *retry.Retrier, req *http.Request, hasDL bool) bool {
	if t.Throttle != nil || r.AttemptTimeout() > 0 || t.PropagateDeadline && hasDL || req.Header == nil || req.Header[wire.HeaderAttempt] != nil {
		return false
	}
	return deadline.Criticality(req.Context()) == wire.DefaultCriticality || len(req.Header[wire.HeaderCriticality]) > 0
}

// stamps are the headers this layer puts on one attempt: each nil or ""
// when the attempt does not carry it.
type stamps struct {
	attempt []string // Stormguard-Attempt: retries only (absent means 1)
	crit    []string // Stormguard-Criticality
	timeout string   // Stormguard-Timeout
}

func (s *stamps) any() bool { return s.attempt != nil || s.crit != nil || s.timeout != "" }

// attemptRequest returns the request of one attempt of req: a shallow copy
// with context ctx and body and, when there are stamps to add, the
// caller's request carries a Stormguard-Attempt of its own (a proxy that
// passes its incoming headers on: the attempt number is this layer's,
// never inherited) or no header map at all (net/http's Transport refuses
// a nil Header; http.Client never sends one), a new header map with req's
// entries and st; ours reports that it has such a map. req itself is never
// modified; the copy shares req's URL and header values, which neither
// this layer nor a base transport keeping the RoundTripper contract
// writes. spare, if not nil, is such a copy from an earlier attempt of
// req, with its map, that its base transport is done with: it is
// rewritten for this attempt instead of allocating another.
func attemptRequest(ctx context.Context, req *http.Request, body io.ReadCloser, st stamps, spare *http.Request) (out *http.Request, ours bool) {
	if spare != nil {
		h := spare.Header
		*spare = *req.WithContext(ctx)
		spare.Body, spare.Header = body, h
		st.put(h)
		return spare, true
	}
	out = req.WithContext(ctx)
	out.Body = body
	if !st.any() && req.Header != nil && req.Header[wire.HeaderAttempt] == nil {
		return out, false
	}
	h := make(http.Header, len(req.Header)+3)
	for k, v := range req.Header {
		h[k] = v
	}
	st.put(h)
	out.Header = h
	return out, true
}

// put writes the stamps into h, a copy of the caller's header map (of
// this call's, whatever attempt it was made for): Stormguard-Attempt set
// or removed, the others set when there are.
func (s *stamps) put(h http.Header) {
	if s.attempt != nil {
		h[wire.HeaderAttempt] = s.attempt
	} else {
		delete(h, wire.HeaderAttempt)
	}
	if s.crit != nil {
		h[wire.HeaderCriticality] = s.crit
	}
	if s.timeout != "" {
		h[wire.HeaderTimeout] = []string{s.timeout}
	}
}

// attemptValues are Stormguard-Attempt's values for the first attempt
// numbers, shared: each has capacity 1, so an append by anyone copies it.
var attemptValues = func() (v [9][]string) {
	for n := range v {
		v[n] = []string{wire.FormatAttempt(n)}[:1:1]
	}
	return v
}()

// attemptValue is Stormguard-Attempt's value for attempt n.
func attemptValue(n int) []string {
	if n >= 1 && n < len(attemptValues) {
		return attemptValues[n]
	}
	return []string{wire.FormatAttempt(n)}
}

// expired reports, before anything is sent, a context that is already done
// or whose deadline has passed; nil if neither.
func expired(ctx context.Context, now, deadline time.Time) error {
	if ctx.Err() != nil {
		return fmt.Errorf("httpx: request not sent: %w", ctxErr(ctx))
	}
	if !deadline.IsZero() && !now.Before(deadline) {
		return fmt.Errorf("httpx: request not sent, its deadline has passed: %w", context.DeadlineExceeded)
	}
	return nil
}

// wait sleeps for d; it returns early, with the reason, when ctx ends, and
// fails if the deadline has passed by the end of the wait.
func wait(ctx context.Context, deadline time.Time, d time.Duration) error {
	if d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-ctx.Done():
			tm.Stop()
		case <-tm.C:
		}
	}
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has that method (http.Transport does). http.Client's method of the
// same name calls it.
func (t *Transport) CloseIdleConnections() {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
