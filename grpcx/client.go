package grpcx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// ErrAttemptTimeout is wrapped by the error of an attempt that ran past the
// policy's AttemptTimeout while the caller's context was still live. Such an
// attempt is of class [retry.Timeout]; its error also wraps the attempt's
// status (DEADLINE_EXCEEDED, as status.Code reports).
var ErrAttemptTimeout = errors.New("grpcx: attempt timed out")

// ClientOption configures the client interceptors.
type ClientOption func(*client)

// WithRetryableMethods limits retries to the methods for which f, given the
// full method name ("/pkg.Service/Method"), returns true: the calls of other
// methods get stormguard's metadata and count in the retrier's budget and
// hooks, but are made once. Use it to keep non-idempotent methods from being
// retried. Without it every method is retried as the retrier decides.
func WithRetryableMethods(f func(fullMethod string) bool) ClientOption {
	return func(c *client) { c.retryable = f }
}

// WithStreamHedgeBuffer bounds, to bytes, the messages a hedged stream
// keeps to replay to the hedges it may still start (the equivalent of
// grpc-go's perRPCBufferLimit, its service config's per-call retry buffer).
// Each message counts its encoded size and the 5 bytes of its gRPC frame
// header; the first message that would go past the bound stops hedging the
// call (the streams open get it, none is dropped; see
// [StreamClientInterceptor]). 0 keeps the default,
// [DefaultStreamHedgeBuffer] (256 KiB). It applies only to streams with a
// hedging policy: a unary hedge sends its one request to every attempt,
// and a stream that is retried, not hedged, keeps only its first message.
//
// A negative size is a programming error: WithStreamHedgeBuffer panics
// with an error that says so.
func WithStreamHedgeBuffer(bytes int) ClientOption {
	if bytes < 0 {
		panic(fmt.Errorf("grpcx: WithStreamHedgeBuffer(%d): the size must not be negative (0 keeps the default, %d bytes)", bytes, DefaultStreamHedgeBuffer))
	}
	return func(c *client) {
		c.streamHedgeBuffer = bytes
		if bytes == 0 {
			c.streamHedgeBuffer = DefaultStreamHedgeBuffer
		}
	}
}

// client is the state the client interceptors share.
type client struct {
	r                 *retry.Retrier
	retryable         func(string) bool
	streamHedgeBuffer int // the replay buffer of a hedged stream, in bytes
}

// single makes one attempt per call; it is the Retrier of interceptors
// built without one. Its policy needs no budget and learns nothing, so
// sharing it shares no state.
var single = retry.MustNew(retry.Policy{MaxAttempts: 1})

func newClient(r *retry.Retrier, opts []ClientOption) *client {
	if r == nil {
		r = single
	}
	c := &client{r: r, streamHedgeBuffer: DefaultStreamHedgeBuffer}
	for _, o := range opts {
		o(c)
	}
	return c
}

// DialOptions returns the dial options a stormguard client needs, to pass to
// grpc.NewClient: grpc.WithDisableRetry (so that retries happen in one
// place, the retrier, and grpc-go neither retries by a service config nor
// retries transparently) and both client interceptors, chained after
// interceptors installed before them.
func DialOptions(r *retry.Retrier, opts ...ClientOption) []grpc.DialOption {
	c := newClient(r, opts)
	return []grpc.DialOption{
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(c.unary()),
		grpc.WithChainStreamInterceptor(c.stream),
	}
}

// UnaryClientInterceptor returns an interceptor that retries unary calls as
// r decides (nil r: one attempt per call) and puts stormguard's signals on
// the wire. It is the gRPC shell around the retry core, the equivalent of
// [retry.Do] and of httpx.Transport. Dial with grpc.WithDisableRetry (or
// use [DialOptions]) so that grpc-go does not retry as well.
//
// It adds to the outgoing metadata (the caller's is kept):
//
//	stormguard-attempt           the attempt number, on retries (2, 3 …);
//	grpc-previous-rpc-attempts   the attempts before this one, on retries
//	                             (gRFC A6);
//	stormguard-criticality       on every attempt, the criticality of ctx
//	                             ([deadline.WithCriticality], as a [Server]
//	                             sets it for its handlers), unless it is the
//	                             default or the caller set the key.
//
// A first try carries no attempt number: an absent stormguard-attempt (and
// grpc-previous-rpc-attempts) means attempt 1 at every stormguard server,
// as it does under gRFC A6. A first try with the default criticality is
// sent with the caller's context as it is, at no cost; an attempt number
// the caller's own metadata carries (a proxy that passes its incoming
// metadata on) is never passed on.
//
// The deadline travels in grpc-timeout, which grpc-go derives from the
// attempt's context: the caller's deadline, or the policy's AttemptTimeout
// from the attempt's start if that is sooner. If ctx is already done, or its
// deadline has passed, the call fails at once, unsent and uncounted, with
// DEADLINE_EXCEEDED or CANCELLED; the error also wraps ctx.Err().
//
// An attempt's error is classified by the retrier ([retry.Retrier.Classify])
// as a [*StatusError], whose code [retry.ClassifyGRPCCode] maps: UNAVAILABLE
// and ABORTED are transient, RESOURCE_EXHAUSTED is throttling,
// DEADLINE_EXCEEDED is a timeout, the rest is not retried. An error while
// ctx is done is of class Canceled and never retried; a CANCELLED the caller
// did not cause counts as a timeout. The server's signals, read from the
// header and trailer metadata by [ParseSignal], go to the retrier with the
// class:
//
//	grpc-retry-pushback-ms         the delay, moved within the retrier's
//	                               pushback clamp; negative, malformed or
//	                               repeated: do not retry;
//	stormguard-overload            service: do not retry; instance (or a
//	                               value this version does not know): retry,
//	                               after a delay;
//	stormguard-retries-exhausted   a layer below already retried: do not retry.
//
// The call returns nil, or a *[retry.GiveUpError] that says why retrying
// stopped and wraps the last attempt's error: status.Code(err) and
// status.FromError(err) report that attempt's status (or CANCELLED or
// DEADLINE_EXCEEDED when ctx ended while waiting to retry), errors.As finds
// the *StatusError with its metadata, and the GiveUpError's RetryClass tells
// a layer above not to retry a call this layer already retried. With a
// circuit breaker on the retrier ([retry.WithBreaker]) every attempt asks it
// first; one it refuses is not sent, and the call gives up with
// [retry.ErrBreakerOpen], its status UNAVAILABLE when no attempt was made.
// This is the same give-up contract as httpx.Transport's.
//
// With a hedging policy ([retry.Policy].Hedge), calls of retryable methods
// whose reply is a proto.Message are hedged instead of retried, with gRFC
// A6's rules ([retry.HedgePolicy]): a copy of the call every Delay without a
// success, up to MaxAttempts in flight, each after the first with its
// attempt number in stormguard-attempt and grpc-previous-rpc-attempts (so
// that a stormguard server sheds hedges first) and charged to the retry
// budget; a retryable failure sends the next copy at once (or after
// grpc-retry-pushback-ms); the first success is copied into reply (and its
// header, trailer and peer into the caller's grpc.Header, grpc.Trailer and
// grpc.Peer options, which the attempts do not share) and the rest are
// cancelled; a fatal status ends the call at once.
// Streams are hedged with the same rules until they are committed (see
// [StreamClientInterceptor]).
func UnaryClientInterceptor(r *retry.Retrier, opts ...ClientOption) grpc.UnaryClientInterceptor {
	return newClient(r, opts).unary()
}

// unary returns cl's unary interceptor, a closure (the method value of a
// method would add a frame that copies the call's arguments). It is not
// inlined, so that the closure is compiled here, with the retry core's
// small methods inlined into it, rather than copied into its caller's
// package without them.
//
//go:noinline
func (cl *client) unary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r := cl.r
		dl, hasDL := ctx.Deadline() // the zero Time when there is none
		// The clock is read when something needs it, as retry.Do reads it: a
		// deadline to check and to retry within, or a retrier whose success
		// path is timed. A failed attempt always reads it.
		timed := hasDL || r.NeedsClock()
		var now time.Time
		if timed {
			now = clock(dl)
		}
		if ctx.Err() != nil || hasDL && !now.Before(dl) {
			return notSent(ctx, now, dl)
		}
		st := newStamp(ctx)
		if r.Hedges() && cl.retries(method) {
			if pm, ok := reply.(proto.Message); ok {
				if !timed {
					now = time.Now()
				}
				callOpts := make([]grpc.CallOption, len(opts), len(opts)+2)
				copy(callOpts, opts) // never append to the caller's slice
				return cl.hedge(ctx, now, dl, st, method, req, pm, cc, invoker, callOpts)
			}
		}
		cp := getCapture(opts)
		var err error
		if r.SkipsCall() {
			// The retrier needs no Call for a first attempt that succeeds
			// (no breaker to ask, no hooks, a token bucket to reward), as
			// retry.Do does: the first attempt at once, inline without an
			// attempt bound, with the caller's context as it is when there
			// is nothing to stamp (the default criticality), and a Call only
			// if it fails.
			var o outcome
			if r.AttemptTimeout() == 0 {
				actx := ctx
				if st.mode == stampCopy || st.crit != wire.DefaultCriticality {
					actx = st.context(ctx, 1)
				}
				if err = invoker(actx, method, req, reply, cc, cp.opts...); err != nil {
					o = cl.classify(ctx, err, cp.header, cp.trailer)
				}
			} else {
				o = cl.invoke(ctx, st.context(ctx, 1), method, req, reply, cc, invoker, cp)
			}
			if o.cls == retry.Success { // or a classifier took the error for one
				cp.put()
				var end time.Time
				if timed {
					end = clock(dl)
				}
				r.SucceededFirstAt(now, end)
				return nil
			}
			c := r.StartContext(ctx, now, dl)
			err = cl.retry(ctx, dl, &c, o, st, method, req, reply, cc, invoker, cp)
		} else {
			err = cl.call(ctx, now, dl, timed, st, method, req, reply, cc, invoker, cp)
		}
		cp.put()
		return err
	}
}

// clock reads the clock for a call with the deadline dl (the zero Time:
// none). With a deadline that has a monotonic reading, as those of
// context.WithTimeout and WithDeadline(time.Now()…) do, it is the time
// left before dl, time.Until, which reads only the monotonic clock, taken
// from dl: the same instant as time.Now, for about half its cost (one
// clock_gettime instead of two). The success of a first attempt that
// learns the attempt time (retry.Policy's LearnAttemptTime) reads it
// twice. Otherwise, and for a deadline too far away for a Duration, it is
// time.Now.
func clock(dl time.Time) time.Time {
	if !dl.IsZero() {
		if left := time.Until(dl); left != math.MaxInt64 && left != math.MinInt64 {
			return dl.Add(-left)
		}
	}
	return time.Now()
}

// retries reports whether the calls of method may be retried (see
// WithRetryableMethods).
func (cl *client) retries(method string) bool { return cl.retryable == nil || cl.retryable(method) }

// call makes a unary call whose first attempt starts at now, with its
// Call from the start: the circuit breaker is asked, the first attempt
// may have a bound, a success ends in EndAt.
func (cl *client) call(ctx context.Context, now, dl time.Time, timed bool, st stamp,
	method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, cp *capture) error {
	r := cl.r
	c := r.StartContext(ctx, now, dl)
	if !r.AllowAt(now, &c) {
		return r.GiveUp(&c, retry.ErrBreakerOpen, breakerLast(nil))
	}
	o := cl.invoke(ctx, st.context(ctx, 1), method, req, reply, cc, invoker, cp)
	if o.cls == retry.Success {
		var end time.Time
		if timed {
			end = clock(dl)
		}
		r.EndAt(end, &c, retry.Success, retry.Signal{}, 0)
		return nil
	}
	return cl.retry(ctx, dl, &c, o, st, method, req, reply, cc, invoker, cp)
}

// retry goes on with call c after its attempt failed with o: retries as
// the retrier decides and returns the call's error.
func (cl *client) retry(ctx context.Context, dl time.Time, c *retry.Call, o outcome, st stamp,
	method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, cp *capture) error {
	r := cl.r
	retryable := cl.retries(method)
	for {
		now, err := cl.next(ctx, dl, c, retryable, o, time.Now())
		if err != nil {
			return err
		}
		if !r.AllowAt(now, c) {
			return r.GiveUp(c, retry.ErrBreakerOpen, breakerLast(o.err))
		}
		o = cl.invoke(ctx, st.context(ctx, c.Attempt()), method, req, reply, cc, invoker, cp)
		if o.cls == retry.Success {
			var end time.Time
			if !dl.IsZero() || r.NeedsClock() {
				end = time.Now()
			}
			r.EndAt(end, c, retry.Success, retry.Signal{}, 0)
			return nil
		}
	}
}

// breakerLast is the last error of a call the circuit breaker stopped:
// the previous attempt's, or, when none was sent, an UNAVAILABLE status, so
// that status.Code reports UNAVAILABLE for every give-up of a refused call.
func breakerLast(last error) error {
	if last != nil {
		return last
	}
	return &StatusError{Status: status.New(codes.Unavailable, "grpcx: circuit breaker open, call not sent")}
}

// outcome is how one attempt ended.
type outcome struct {
	err error // nil on success
	cls retry.Class
	sig retry.Signal
}

// invoke makes one attempt of a unary call with the attempt context actx,
// bounded by the policy's AttemptTimeout, and the call options of cp, and
// classifies its result; cp then holds the attempt's header and trailer.
func (cl *client) invoke(ctx, actx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, cp *capture) outcome {
	timeout := cl.r.AttemptTimeout()
	if timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(actx, timeout)
		defer cancel()
	}
	cp.header, cp.trailer = nil, nil
	err := invoker(actx, method, req, reply, cc, cp.opts...)
	if err == nil {
		return outcome{cls: retry.Success}
	}
	o := cl.classify(ctx, err, cp.header, cp.trailer)
	if timeout > 0 && o.cls != retry.Canceled && actx.Err() == context.DeadlineExceeded {
		o.err = fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, timeout, o.err)
		o.cls = retry.Timeout
	}
	return o
}

// invokeMD is invoke with call options opts (which concurrent attempts may
// share), returning the attempt's header and trailer metadata.
func (cl *client) invokeMD(ctx, actx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (outcome, metadata.MD, metadata.MD) {
	cp := getCapture(opts)
	defer cp.put()
	o := cl.invoke(ctx, actx, method, req, reply, cc, invoker, cp)
	return o, cp.header, cp.trailer
}

// classify gives the outcome of an attempt of a call made with ctx that
// failed with err, the header and trailer metadata it received.
func (cl *client) classify(ctx context.Context, err error, header, trailer metadata.MD) outcome {
	if st, ok := status.FromError(err); ok {
		err = &StatusError{Status: st, Header: header, Trailer: trailer}
	}
	cls := cl.r.ClassifyAttempt(ctx, err)
	if cls == retry.Canceled { // the caller's context is done
		return outcome{err: err, cls: cls}
	}
	return outcome{err: err, cls: cls, sig: ParseSignal(header, trailer)}
}

// next decides, after the attempt of call c that ended at end with the
// failure o, whether to retry. If so it waits the delay, starts the next
// attempt in the retrier and returns the time it started; otherwise the
// call is over and next returns the give-up error.
func (cl *client) next(ctx context.Context, dl time.Time, c *retry.Call, retryable bool, o outcome, end time.Time) (time.Time, error) {
	r := cl.r
	if !retryable && o.cls.Retryable() {
		// A method the caller does not want retried: report the attempt,
		// never ask for (or pay for) a retry.
		r.FinishAt(end, c, o.cls)
		return end, r.GiveUp(c, retry.ErrNotRetryable, o.err)
	}
	d := r.EndAt(end, c, o.cls, o.sig, r.Sample())
	if !d.Retry {
		return end, r.GiveUp(c, d.Reason, o.err)
	}
	if err := wait(ctx, dl, d.Delay); err != nil {
		r.AbandonAt(time.Now(), c)
		return end, r.GiveUp(c, retry.ErrCanceled, fmt.Errorf("%w, while waiting to retry after: %w", contextStatus(err), o.err))
	}
	now := end // no wait: the next attempt starts as this one ended
	if d.Delay > 0 {
		now = time.Now()
	}
	r.NextAt(now, c)
	return now, nil
}

// notSent reports, before anything is sent, a context that is already done
// or whose deadline has passed, as a status error that also wraps the
// context's error; nil if neither.
func notSent(ctx context.Context, now, dl time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("grpcx: call not sent: %w (%w)", contextStatus(err), ctxErr(ctx))
	}
	if !dl.IsZero() && !now.Before(dl) {
		return fmt.Errorf("grpcx: call not sent, its deadline has passed: %w (%w)", contextStatus(context.DeadlineExceeded), context.DeadlineExceeded)
	}
	return nil
}

// contextStatus is the status a context error maps to: DEADLINE_EXCEEDED
// or CANCELLED.
func contextStatus(err error) *StatusError {
	return &StatusError{Status: status.FromContextError(err)}
}

// ctxErr is ctx.Err(), also wrapping the cause when one was given.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

// wait sleeps for d; it returns early, with the reason, when ctx ends, and
// fails if the deadline dl has passed by the end of the wait.
func wait(ctx context.Context, dl time.Time, d time.Duration) error {
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	if !dl.IsZero() && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
