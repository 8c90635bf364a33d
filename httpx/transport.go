package httpx

import (
	"bytes"
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
// default. The attempt number is the Transport's own, never inherited.
//
// Build one with [NewTransport]. The zero Transport is usable: it sends each
// request once through http.DefaultTransport, with the attempt header but
// without the deadline header. A Transport is safe for concurrent use; do not
// change its fields once it is in use.
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
//   - req is never modified: every attempt sends a clone (req.Clone), to
//     which the Transport adds its headers;
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
// Stormguard-Retries-Exhausted: 1 when more than one attempt was made, or
// when the retry budget or the kill switch refused the retry, so that a
// proxy relaying it tells its own callers not to retry. Set
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
	now := time.Now()
	deadline, _ := ctx.Deadline() // the zero Time when there is none
	if err := expired(ctx, now, deadline); err != nil {
		closeBody(req.Body)
		return nil, err
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	replayable := !hasBody || req.GetBody != nil
	if h := r.Policy().Hedge; h != nil && h.MaxAttempts > 1 && replayable && idempotent(req) {
		return t.hedge(ctx, base, r, req, now, deadline)
	}

	c := r.StartContext(ctx, now, deadline)
	body := req.Body // the first attempt sends the caller's body
	var last error   // the previous attempt's error
	for {
		if !r.AllowAt(now, &c) {
			closeBody(body)
			return nil, r.GiveUp(&c, retry.ErrBreakerOpen, last)
		}
		o := t.send(ctx, base, r, req, body, c.Attempt())
		end := time.Now()
		if o.cls == retry.Success {
			r.EndAt(end, &c, retry.Success, retry.Signal{}, 0)
			return o.resp, nil
		}
		if !replayable {
			// A body that cannot be sent again: report the attempt, never
			// ask for (or pay for) a retry.
			r.FinishAt(end, &c, o.cls)
			return t.stop(r, &c, retry.ErrNotRetryable, o)
		}
		d := r.EndAt(end, &c, o.cls, o.sig, r.Sample())
		if !d.Retry {
			return t.stop(r, &c, d.Reason, o)
		}
		if o.resp != nil {
			keep(o.resp, o.err) // drained and closed; the caller may still see it in a give-up
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
		now = time.Now()
		r.NextAt(now, &c)
		last = o.err
	}
}

// stop ends a call that failed, after its attempt c, for reason: the
// give-up error, or the last response itself (see RoundTrip).
func (t *Transport) stop(r *retry.Retrier, c *retry.Call, reason error, o outcome) (*http.Response, error) {
	err := r.GiveUp(c, reason, o.err) // also runs the OnGiveUp hook
	if o.resp == nil {
		return nil, err
	}
	if c.Attempt() > 1 || errors.Is(reason, retry.ErrBudgetExhausted) || errors.Is(reason, retry.ErrRetriesDisabled) {
		if o.resp.Header == nil {
			o.resp.Header = make(http.Header)
		}
		o.resp.Header[wire.HeaderRetriesExhausted] = []string{wire.ExhaustedValue}
	}
	if t.ResponseOnGiveUp || o.cls == retry.NeverRetry || t.Retrier == nil {
		return o.resp, nil
	}
	keep(o.resp, o.err)
	return nil, err
}

// keep reads a failure response's body into memory (up to drainLimit) and
// closes the connection's body, then hands the response to its
// StatusError: a give-up error that carries it leaks nothing.
func keep(resp *http.Response, err error) {
	var se *StatusError
	if !errors.As(err, &se) || se.Response != nil {
		discard(resp)
		return
	}
	se.Response = resp
	if resp.Body == nil || resp.Body == http.NoBody {
		return
	}
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, drainLimit+1))
	_ = resp.Body.Close()
	var tail io.Reader = eofReader{}
	switch {
	case len(data) > drainLimit:
		data, tail = data[:drainLimit], errReader{ErrBodyTruncated}
	case rerr != nil:
		tail = errReader{rerr}
	}
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), tail))
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// outcome is how one attempt ended.
type outcome struct {
	resp *http.Response // nil after a transport error
	err  error          // the transport error, or a *StatusError for a failure response
	cls  retry.Class
	sig  retry.Signal
}

// send makes attempt n of req with the given body, under a child context
// when the policy bounds attempts, and classifies what came back.
func (t *Transport) send(ctx context.Context, base http.RoundTripper, r *retry.Retrier, req *http.Request, body io.ReadCloser, n int) outcome {
	if t.Throttle != nil && !t.Throttle.Allow() {
		closeBody(body)
		return outcome{err: fmt.Errorf("httpx: attempt %d not sent: %w", n, ErrThrottled), cls: retry.Throttling}
	}
	actx, cancel := ctx, context.CancelFunc(nil)
	timeout := r.Policy().AttemptTimeout
	if timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, timeout)
	}
	out := req.Clone(actx)
	out.Body = body
	if out.Header == nil {
		out.Header = make(http.Header, 2)
	}
	out.Header[wire.HeaderAttempt] = []string{wire.FormatAttempt(n)}
	if c := deadline.Criticality(ctx); c != wire.DefaultCriticality && len(out.Header[wire.HeaderCriticality]) == 0 {
		out.Header[wire.HeaderCriticality] = criticalityValue(c)
	}
	if t.PropagateDeadline {
		if dl, ok := actx.Deadline(); ok {
			v, ok := wire.FormatTimeout(time.Until(dl))
			if !ok { // the caller's deadline passed since the last check
				if cancel != nil {
					cancel()
				}
				closeBody(body)
				return outcome{err: fmt.Errorf("httpx: deadline passed before attempt %d was sent: %w", n, context.DeadlineExceeded), cls: retry.Canceled}
			}
			out.Header[wire.HeaderTimeout] = []string{v}
		}
	}

	resp, err := base.RoundTrip(out)
	if t.Throttle != nil && err == nil && backendAccepted(resp.StatusCode, resp.Header) {
		t.Throttle.Accept()
	}

	if err != nil {
		timedOut := cancel != nil && actx.Err() != nil && ctx.Err() == nil
		if cancel != nil {
			cancel()
		}
		switch {
		case ctx.Err() != nil:
			if !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%w)", err, ctxErr(ctx))
			}
			return outcome{err: err, cls: retry.Canceled}
		case timedOut:
			return outcome{err: fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, timeout, err), cls: retry.Timeout}
		}
		cls := r.Classify(err)
		if cls == retry.Canceled {
			// A deadline or cancellation the caller did not cause.
			cls = retry.Timeout
		}
		return outcome{err: err, cls: cls}
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
	return outcome{resp: resp, err: se, cls: cls, sig: ParseSignal(resp.Header, time.Now())}
}

// expired reports, before anything is sent, a context that is already done
// or whose deadline has passed.
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
