package grpcx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stormguard/stormguard/deadline"
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
		grpc.WithChainUnaryInterceptor(c.unary),
		grpc.WithChainStreamInterceptor(c.stream),
	}
}

// UnaryClientInterceptor returns an interceptor that retries unary calls as
// r decides (nil r: one attempt per call) and puts stormguard's signals on
// the wire. It is the gRPC shell around the retry core, the equivalent of
// [retry.Do] and of httpx.Transport. Dial with grpc.WithDisableRetry (or
// use [DialOptions]) so that grpc-go does not retry as well.
//
// On every attempt it adds to the outgoing metadata (the caller's is kept):
//
//	stormguard-attempt           the attempt number, 1 for the first try;
//	grpc-previous-rpc-attempts   the attempts before this one, from the
//	                             second on (gRFC A6);
//	stormguard-criticality       the criticality of ctx
//	                             ([deadline.WithCriticality], as a [Server]
//	                             sets it for its handlers), unless it is the
//	                             default or the caller set the key.
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
// success, up to MaxAttempts in flight, each with its attempt number in
// stormguard-attempt and grpc-previous-rpc-attempts (so that a stormguard
// server sheds hedges first) and each after the first charged to the retry
// budget; a retryable failure sends the next copy at once (or after
// grpc-retry-pushback-ms); the first success is copied into reply (and its
// header, trailer and peer into the caller's grpc.Header, grpc.Trailer and
// grpc.Peer options, which the attempts do not share) and the rest are
// cancelled; a fatal status ends the call at once.
// Streams are hedged with the same rules until they are committed (see
// [StreamClientInterceptor]).
func UnaryClientInterceptor(r *retry.Retrier, opts ...ClientOption) grpc.UnaryClientInterceptor {
	return newClient(r, opts).unary
}

func (cl *client) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r := cl.r
	now := time.Now()
	dl, _ := ctx.Deadline() // the zero Time when there is none
	if err := notSent(ctx, now, dl); err != nil {
		return err
	}
	retryable := cl.retryable == nil || cl.retryable(method)
	base, crit := outgoing(ctx)
	callOpts := make([]grpc.CallOption, len(opts), len(opts)+2)
	copy(callOpts, opts) // never append to the caller's slice

	if h := r.Policy().Hedge; h != nil && h.MaxAttempts > 1 && retryable {
		if pm, ok := reply.(proto.Message); ok {
			return cl.hedge(ctx, now, dl, base, crit, method, req, pm, cc, invoker, callOpts)
		}
	}

	c := r.StartContext(ctx, now, dl)
	var last error // the previous attempt's error
	for {
		if !r.AllowAt(now, &c) {
			return r.GiveUp(&c, retry.ErrBreakerOpen, breakerLast(last))
		}
		o := cl.invoke(ctx, attemptContext(ctx, base, c.Attempt(), crit), method, req, reply, cc, invoker, callOpts)
		end := time.Now()
		if o.cls == retry.Success {
			r.EndAt(end, &c, retry.Success, retry.Signal{}, 0)
			return nil
		}
		if err := cl.next(ctx, dl, &c, retryable, o, end); err != nil {
			return err
		}
		now, last = time.Now(), o.err
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
// bounded by the policy's AttemptTimeout, and classifies its result.
func (cl *client) invoke(ctx, actx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) outcome {
	o, _, _ := cl.invokeMD(ctx, actx, method, req, reply, cc, invoker, opts)
	return o
}

// invokeMD is invoke that also returns the attempt's header and trailer
// metadata.
func (cl *client) invokeMD(ctx, actx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (outcome, metadata.MD, metadata.MD) {
	timeout := cl.r.Policy().AttemptTimeout
	if timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(actx, timeout)
		defer cancel()
	}
	var header, trailer metadata.MD
	// opts may be shared by concurrent attempts (hedges) and have room to
	// spare: the full slice expression makes append copy, not write into
	// the shared array.
	err := invoker(actx, method, req, reply, cc, append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))...)
	if err == nil {
		return outcome{cls: retry.Success}, header, trailer
	}
	o := cl.classify(ctx, err, header, trailer)
	if timeout > 0 && o.cls != retry.Canceled && actx.Err() == context.DeadlineExceeded {
		o.err = fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, timeout, o.err)
		o.cls = retry.Timeout
	}
	return o, header, trailer
}

// classify gives the outcome of an attempt of a call made with ctx that
// failed with err, the header and trailer metadata it received.
func (cl *client) classify(ctx context.Context, err error, header, trailer metadata.MD) outcome {
	if st, ok := status.FromError(err); ok {
		err = &StatusError{Status: st, Header: header, Trailer: trailer}
	}
	if ctx.Err() != nil {
		return outcome{err: err, cls: retry.Canceled}
	}
	cls := cl.r.Classify(err)
	if cls == retry.Canceled {
		// A deadline or cancellation the caller did not cause: the
		// attempt's own timeout, or a server that gave up on it.
		cls = retry.Timeout
	}
	return outcome{err: err, cls: cls, sig: ParseSignal(header, trailer)}
}

// next decides, after the attempt of call c that ended at end with the
// failure o, whether to retry. If so it waits the delay, starts the next
// attempt in the retrier and returns nil; otherwise the call is over and
// next returns the give-up error.
func (cl *client) next(ctx context.Context, dl time.Time, c *retry.Call, retryable bool, o outcome, end time.Time) error {
	r := cl.r
	if !retryable && o.cls.Retryable() {
		// A method the caller does not want retried: report the attempt,
		// never ask for (or pay for) a retry.
		r.FinishAt(end, c, o.cls)
		return r.GiveUp(c, retry.ErrNotRetryable, o.err)
	}
	d := r.EndAt(end, c, o.cls, o.sig, r.Sample())
	if !d.Retry {
		return r.GiveUp(c, d.Reason, o.err)
	}
	if err := wait(ctx, dl, d.Delay); err != nil {
		r.AbandonAt(time.Now(), c)
		return r.GiveUp(c, retry.ErrCanceled, fmt.Errorf("%w, while waiting to retry after: %w", contextStatus(err), o.err))
	}
	r.NextAt(time.Now(), c)
	return nil
}

// outgoing returns the caller's outgoing metadata and the criticality to
// propagate: that of ctx, unless it is the default or the caller set the
// key itself.
func outgoing(ctx context.Context) (metadata.MD, wire.Criticality) {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy, keys in lower case
	crit := deadline.Criticality(ctx)
	if len(md[keyCriticality]) > 0 {
		crit = wire.DefaultCriticality
	}
	return md, crit
}

// attemptContext returns ctx with the outgoing metadata of attempt n: the
// caller's (base) and stormguard's keys. The attempt number is this
// layer's own, never inherited from the caller's metadata.
func attemptContext(ctx context.Context, base metadata.MD, n int, crit wire.Criticality) context.Context {
	md := make(metadata.MD, len(base)+3)
	for k, v := range base {
		md[k] = v // grpc-go never modifies a value slice
	}
	md[keyAttempt] = []string{wire.FormatAttempt(n)}
	if n > 1 {
		md[wire.KeyGRPCPreviousAttempts] = []string{strconv.Itoa(n - 1)}
	} else {
		delete(md, wire.KeyGRPCPreviousAttempts)
	}
	if crit != wire.DefaultCriticality {
		md[keyCriticality] = []string{crit.String()}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// notSent reports, before anything is sent, a context that is already done
// or whose deadline has passed, as a status error that also wraps the
// context's error.
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
