package grpcx

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stormguard/stormguard/retry"
)

// StreamClientInterceptor returns an interceptor that puts stormguard's
// signals on streaming calls and retries them as r decides (nil r: never),
// as far as a stream can be retried safely:
//
//   - Opening the stream is retried for every kind of stream: an error
//     from grpc-go before the stream exists (UNAVAILABLE while the channel
//     cannot connect, say) is an attempt like a unary call's.
//   - A server-streaming call (the client sends one message) is retried
//     until its first response message arrives: if the stream fails before
//     that, the interceptor opens a new one, sends the request again and
//     goes on reading, without the caller seeing the failed attempt. Once a
//     message has arrived the stream is committed: a later failure is the
//     caller's, as it is, and is not retried.
//   - A client-streaming or bidirectional call is not retried once open
//     (replaying what the caller sent, while it may still be sending, is not
//     something an interceptor can do safely); it still gets the
//     criticality and the deadline (as a first try it carries no attempt
//     number), and its attempt counts as a success for the retrier once the
//     stream is open.
//
// Every attempt carries the metadata [UnaryClientInterceptor] describes,
// and its deadline is the caller's (the policy's AttemptTimeout does not
// bound streams: a stream lasts as long as its caller wants). A call whose
// ctx is already done or past its deadline fails at once, unsent. When
// retrying stops, the error the stream reports (from opening it, or from
// RecvMsg) is a *[retry.GiveUpError] as for unary calls.
//
// With a circuit breaker on the retrier every attempt asks it first, as for
// unary calls.
//
// With a hedging policy ([retry.Policy].Hedge), streams of every kind of
// retryable methods are hedged instead, with gRFC A6's rules for streams:
// until the call is committed, a new stream is opened every Delay, up to
// MaxAttempts, each after the first with its attempt number in the
// metadata and charged to the retry budget, as for unary hedges. The call is
// committed to the first stream that receives headers (a first message
// brings them) or ends successfully; the others are cancelled, and from
// then on the caller reads and writes that stream as it is, its later
// failure included. Until then SendMsg sends to every stream open and keeps
// the message in a replay buffer ([DefaultStreamHedgeBuffer], grpc-go's
// per-call default of 256 KiB, unless [WithStreamHedgeBuffer] sets
// another size): a new hedge gets every message sent so far, in order, and
// CloseSend if it was called. A message that does not fit (or is not a
// proto.Message) stops hedging, the streams open get it and the rest, none
// is dropped. A stream that fails before headers ends its attempt: a
// retryable status starts the next hedge at once (or after
// grpc-retry-pushback-ms), any other status ends the call. A call that
// fails gives up as a unary call does: RecvMsg returns a
// *[retry.GiveUpError] that wraps the last stream's status;
// SendMsg then returns io.EOF. Until the call is committed, RecvMsg and
// Header wait for it, Trailer returns nil and Context the caller's context;
// the caller's grpc.Header, grpc.Trailer and grpc.Peer options (which the
// streams do not share) get the winner's metadata and peer when its stream
// ends.
//
// While a server-streaming call may still be retried, Header and Trailer
// report the current attempt's metadata, and Context its context. A stream
// whose caller gives up on it (cancels ctx) before reading its first
// message ends its call in the retrier as cancelled.
func StreamClientInterceptor(r *retry.Retrier, opts ...ClientOption) grpc.StreamClientInterceptor {
	return newClient(r, opts).stream
}

func (cl *client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	r := cl.r
	now := time.Now()
	dl, _ := ctx.Deadline()
	if err := notSent(ctx, now, dl); err != nil {
		return nil, err
	}
	retryable := cl.retryable == nil || cl.retryable(method)
	st := newStamp(ctx)
	if r.Hedges() && retryable {
		return cl.hedgeStream(ctx, now, dl, st, desc, cc, method, streamer, opts)
	}
	c := r.StartContext(ctx, now, dl)
	var last error // the previous attempt's error
	for {
		if !r.AllowAt(now, &c) {
			return nil, r.GiveUp(&c, retry.ErrBreakerOpen, breakerLast(last))
		}
		cs, err := streamer(st.context(ctx, c.Attempt()), desc, cc, method, opts...)
		end := time.Now()
		if err == nil {
			if desc.ClientStreams {
				r.EndAt(end, &c, retry.Success, retry.Signal{}, 0)
				return cs, nil
			}
			s := &retryingStream{
				cl: cl, ctx: ctx, st: st, dl: dl, retryable: retryable,
				desc: desc, cc: cc, method: method, streamer: streamer, opts: opts,
				c: c, cur: cs,
			}
			s.stop = context.AfterFunc(ctx, s.abandon)
			return s, nil
		}
		var header metadata.MD
		if cs != nil {
			header, _ = cs.Header()
		}
		o := cl.classify(ctx, err, header, nil)
		if now, err = cl.next(ctx, dl, &c, retryable, o, end); err != nil {
			return nil, err
		}
		last = o.err
	}
}

// The states of a retryingStream's call in the retrier. The goroutine that
// moves the state out of live owns the retry.Call until it moves it back.
const (
	streamLive int32 = iota // an attempt is open; nobody is using the Call
	streamBusy              // RecvMsg is deciding on, or waiting for, a retry
	streamDone              // the call has ended in the retrier
)

// retryingStream is a server-streaming call that is retried until its
// first message arrives.
type retryingStream struct {
	cl        *client
	ctx       context.Context // the caller's
	st        stamp
	dl        time.Time
	retryable bool
	desc      *grpc.StreamDesc
	cc        *grpc.ClientConn
	method    string
	streamer  grpc.Streamer
	opts      []grpc.CallOption

	state atomic.Int32 // streamLive, streamBusy or streamDone
	c     retry.Call   // owned as state says
	stop  func() bool  // stops the AfterFunc that abandons the call

	mu     sync.Mutex // guards cur, req, hasReq and closed
	cur    grpc.ClientStream
	req    any // the message the caller sent, for replay
	hasReq bool
	closed bool // the caller called CloseSend
}

func (s *retryingStream) current() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Header returns the current attempt's header metadata.
func (s *retryingStream) Header() (metadata.MD, error) { return s.current().Header() }

// Trailer returns the current attempt's trailer metadata.
func (s *retryingStream) Trailer() metadata.MD { return s.current().Trailer() }

// Context returns the current attempt's context.
func (s *retryingStream) Context() context.Context { return s.current().Context() }

// SendMsg sends m on the current attempt and keeps it to send again on a
// retry. gRPC forbids modifying a message after SendMsg, so keeping it is
// safe.
func (s *retryingStream) SendMsg(m any) error {
	s.mu.Lock()
	if !s.hasReq {
		s.req, s.hasReq = m, true
	}
	cs := s.cur
	s.mu.Unlock()
	return cs.SendMsg(m)
}

// CloseSend closes the sending side of the current attempt, and of the
// attempts to come.
func (s *retryingStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cs := s.cur
	s.mu.Unlock()
	return cs.CloseSend()
}

// RecvMsg receives the next message. Until the first one arrives, a failed
// attempt is retried as the retrier decides.
func (s *retryingStream) RecvMsg(m any) error {
	for {
		cs := s.current()
		err := cs.RecvMsg(m)
		if !s.state.CompareAndSwap(streamLive, streamBusy) {
			return err // committed, or abandoned by its caller
		}
		r := s.cl.r
		end := time.Now()
		if err == nil || err == io.EOF {
			// The first message (or a clean end without one): the attempt
			// succeeded, and the stream is committed.
			r.EndAt(end, &s.c, retry.Success, retry.Signal{}, 0)
			s.done()
			return err
		}
		header, _ := cs.Header() // the stream has ended: this does not block
		o := s.cl.classify(s.ctx, err, header, cs.Trailer())
		for {
			now, err := s.cl.next(s.ctx, s.dl, &s.c, s.retryable, o, end)
			if err != nil {
				s.done()
				return err
			}
			if !r.AllowAt(now, &s.c) {
				s.done()
				return r.GiveUp(&s.c, retry.ErrBreakerOpen, o.err)
			}
			next, err := s.open()
			if err == nil {
				s.mu.Lock()
				s.cur = next
				s.mu.Unlock()
				break
			}
			end = time.Now()
			o = s.cl.classify(s.ctx, err, nil, nil)
		}
		s.state.Store(streamLive)
	}
}

// open starts the current attempt: a new stream, to which it sends again
// what the caller sent.
func (s *retryingStream) open() (grpc.ClientStream, error) {
	cs, err := s.streamer(s.st.context(s.ctx, s.c.Attempt()), s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// For a stream whose client sends one message, grpc-go reports a
	// failure to send on RecvMsg, not here.
	if s.hasReq {
		if err := cs.SendMsg(s.req); err != nil && err != io.EOF {
			return nil, err
		}
	}
	if s.closed {
		if err := cs.CloseSend(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// done marks the call ended in the retrier; the caller owns the Call.
func (s *retryingStream) done() {
	s.state.Store(streamDone)
	s.stop()
}

// abandon ends the call as cancelled when the caller's context ends while
// nobody is using it (no RecvMsg is deciding on a retry).
func (s *retryingStream) abandon() {
	if s.state.CompareAndSwap(streamLive, streamDone) {
		r := s.cl.r
		r.FinishAt(time.Now(), &s.c, retry.Canceled)
		_ = r.GiveUp(&s.c, retry.ErrCanceled, ctxErr(s.ctx))
	}
}
