package grpcx

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/stormguard/stormguard/retry"
)

// DefaultStreamHedgeBuffer is the default bound, in bytes, of the
// messages a hedged stream keeps to replay to its hedges
// ([WithStreamHedgeBuffer]): grpc-go's default per-call retry buffer,
// 256 KiB. Each message counts its encoded size and the 5 bytes of its
// gRPC frame header. A message that would go past the bound, or whose
// size cannot be known (not a proto.Message), stops hedging: the attempts
// already running get it and every later message, none is dropped, and no
// new hedge starts.
const DefaultStreamHedgeBuffer = 256 << 10

// streamFrameHeader is the size of a gRPC message's frame header.
const streamFrameHeader = 5

// hedgedStream is a streaming call hedged under the retrier's hedging
// policy (see StreamClientInterceptor). Until it is committed, a
// coordinator goroutine (loop) owns the retry.Hedge: it starts the
// hedges, each in its own goroutine (run), and learns from them which
// attempt received headers first (the winner) or how each failed. The
// caller's messages go to every attempt open and into a replay buffer
// for the hedges to come. Once decided is closed, the stream is either
// committed to the winner, which then serves every method directly, or
// failed with err.
type hedgedStream struct {
	cl       *client
	ctx      context.Context // the caller's
	st       stamp
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     hedgeOpts // the attempts' options, and the caller's Header, Trailer and Peer, set from the winner
	limit    int       // the replay buffer's bound, in bytes

	h        retry.Hedge                            // owned by loop
	all      [retry.MaxHedgeAttempts]*streamAttempt // the attempts started; owned by loop
	events   chan streamEvent                       // one per attempt started; never blocks a sender
	overflow chan struct{}                          // closed when the replay buffer overflows

	decided chan struct{}  // closed when the call is committed or has failed
	winner  *streamAttempt // the committed attempt; set before decided is closed
	err     error          // the give-up error; set before decided is closed
	trailer metadata.MD    // the last failed attempt's trailer; set before decided is closed
	filled  atomic.Bool    // the caller's Header, Trailer and Peer options are set

	sendMu     sync.Mutex                             // held while sending to attempts; guards the fields below
	open       [retry.MaxHedgeAttempts]*streamAttempt // the attempts opened and replayed to
	buf        []any                                  // the messages sent, to replay; nil once overflowed
	size       int                                    // the bytes in buf
	overflowed bool
	closed     bool // the caller called CloseSend
}

// streamAttempt is one attempt of a hedged stream.
type streamAttempt struct {
	n      int
	ctx    context.Context
	cancel context.CancelFunc
	cs     grpc.ClientStream // set once opened, under sendMu
	opts   []grpc.CallOption // the call options it is opened with
	peer   *peer.Peer        // its own Peer option's; nil unless the caller asked
	// ended: the attempt ended successfully without headers (a
	// trailers-only OK); as the winner, its RecvMsg reports io.EOF.
	ended bool
	done  atomic.Bool // its stream has ended: send it nothing more
}

// streamEvent is how an attempt of a hedged stream ended its uncommitted
// part: with headers (won), without being sent (aborted), or failed (o).
type streamEvent struct {
	n       int
	won     bool
	aborted bool
	o       outcome
	trailer metadata.MD
	end     time.Time
}

// hedgeStream starts a streaming call under the retrier's hedging policy:
// it opens the first attempt and leaves the rest to the coordinator.
func (cl *client) hedgeStream(ctx context.Context, now, dl time.Time, st stamp,
	desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption) (grpc.ClientStream, error) {
	r := cl.r
	h, ok := r.HedgeStartAt(now, dl)
	if !ok {
		return nil, r.HedgeGiveUp(&h, retry.ErrBreakerOpen, breakerLast(nil))
	}
	s := &hedgedStream{
		cl: cl, ctx: ctx, st: st, desc: desc, cc: cc, method: method, streamer: streamer,
		opts:     splitHedgeOpts(opts),
		limit:    cl.streamHedgeBuffer,
		h:        h,
		events:   make(chan streamEvent, retry.MaxHedgeAttempts),
		overflow: make(chan struct{}),
		decided:  make(chan struct{}),
	}
	// The first attempt is opened before the caller can send, so that it
	// needs no replay.
	a := s.attempt(1)
	cs, err := streamer(a.ctx, desc, cc, method, a.opts...)
	if err == nil {
		a.cs = cs
		s.open[0] = a
	}
	go s.watch(a, err)
	go s.loop()
	return s, nil
}

// attempt makes attempt n, with its metadata and its own cancellation.
func (s *hedgedStream) attempt(n int) *streamAttempt {
	ctx, cancel := context.WithCancel(s.st.context(s.ctx, n))
	a := &streamAttempt{n: n, ctx: ctx, cancel: cancel}
	a.peer, a.opts = s.opts.attempt()
	s.all[n-1] = a
	return a
}

// loop is the coordinator: gRFC A6's hedging over the attempts' events,
// as the unary hedge does it, until the call is committed or has failed.
func (s *hedgedStream) loop() {
	r := s.cl.r
	h := &s.h
	var (
		timer    *time.Timer
		last     error
		d        retry.HedgeDecision
		win      int
		done     = s.ctx.Done()
		overflow = s.overflow
	)
	for !d.Done {
		tc, due := nextHedge(h, &timer)
		if due {
			var n int
			n, d = r.HedgeAt(time.Now(), h)
			if n > 0 {
				go s.run(s.attempt(n))
			}
			continue
		}
		select {
		case ev := <-s.events:
			switch {
			case ev.won:
				win = ev.n
				d = r.HedgeEndAt(ev.end, h, ev.n, retry.Success, retry.Signal{})
			case ev.aborted:
				// Granted, but the replay buffer had overflowed: never sent.
				s.all[ev.n-1].cancel()
				r.HedgeCancelAt(ev.end, h, ev.n)
				d = r.HedgeStopAt(ev.end, h, retry.ErrNotRetryable)
			case supersededCopy(ev.o.err, ev.trailer) && otherRunning(h, ev.n):
				// A later copy took this one's place in a superseding
				// server's queue: not a failure (see the unary hedge).
				s.all[ev.n-1].cancel()
				r.HedgeCancelAt(ev.end, h, ev.n)
			default:
				s.all[ev.n-1].cancel()
				d = r.HedgeEndAt(ev.end, h, ev.n, ev.o.cls, ev.o.sig)
				last, s.trailer = ev.o.err, ev.trailer
			}
		case <-overflow:
			overflow = nil
			d = r.HedgeStopAt(time.Now(), h, retry.ErrNotRetryable)
		case <-tc:
		case <-done:
			done = nil
			d, last = canceledWaiting(r, h, s.ctx, d, last)
		}
	}
	if timer != nil {
		timer.Stop()
	}
	end := time.Now()
	for n := 1; n <= h.Sent(); n++ {
		if n == win && d.Reason == nil {
			continue
		}
		s.all[n-1].cancel()
		if h.Running(n) {
			r.HedgeCancelAt(end, h, n)
		}
	}
	// The losers' goroutines end with their contexts; their events, if
	// any are still to come, go into the buffered channel and are dropped.
	if d.Reason != nil {
		s.err = r.HedgeGiveUp(h, d.Reason, last)
	} else {
		s.winner = s.all[win-1]
	}
	close(s.decided)
}

// run opens hedge a, replays to it what the caller has sent and watches
// it.
func (s *hedgedStream) run(a *streamAttempt) {
	s.sendMu.Lock()
	overflowed := s.overflowed
	s.sendMu.Unlock()
	if overflowed { // not even opened
		s.events <- streamEvent{n: a.n, aborted: true, end: time.Now()}
		return
	}
	cs, err := s.streamer(a.ctx, s.desc, s.cc, s.method, a.opts...)
	if err == nil {
		s.sendMu.Lock()
		if s.overflowed || a.ctx.Err() != nil {
			s.sendMu.Unlock()
			a.cancel()
			s.events <- streamEvent{n: a.n, aborted: true, end: time.Now()}
			return
		}
		for _, m := range s.buf {
			if cs.SendMsg(m) != nil {
				break // the stream has ended: watch reports how
			}
		}
		if s.closed {
			_ = cs.CloseSend()
		}
		a.cs = cs
		s.open[a.n-1] = a
		s.sendMu.Unlock()
	}
	s.watch(a, err)
}

// watch waits until attempt a, opened with err, receives headers or ends,
// and reports it to the coordinator.
func (s *hedgedStream) watch(a *streamAttempt, err error) {
	ev := streamEvent{n: a.n}
	if err != nil {
		ev.o = s.cl.classify(s.ctx, err, nil, nil)
	} else if md, _ := a.cs.Header(); md != nil {
		ev.won = true
	} else {
		// The stream ended without headers; RecvMsg reports its status
		// (no message can come without headers).
		err := a.cs.RecvMsg(new(emptypb.Empty))
		a.done.Store(true)
		if err == nil { // not grpc-go's behaviour; never taken as a success
			err = status.Error(codes.Internal, "grpcx: a message arrived without headers")
		}
		if err == io.EOF {
			ev.won, a.ended = true, true
		} else {
			ev.trailer = a.cs.Trailer()
			ev.o = s.cl.classify(s.ctx, err, nil, ev.trailer)
		}
	}
	ev.end = time.Now()
	s.events <- ev
}

// committed returns the winner once the call is decided (nil if it
// failed), and whether it is decided.
func (s *hedgedStream) committed() (*streamAttempt, bool) {
	select {
	case <-s.decided:
		return s.winner, true
	default:
		return nil, false
	}
}

// SendMsg sends m. Until the call is committed, m goes to every attempt
// open and is kept for the hedges to come (gRPC forbids modifying a
// message after SendMsg, so keeping it is safe); SendMsg then reports no
// error of an attempt (each attempt's end is the coordinator's to judge).
// After a failure it returns io.EOF, and RecvMsg the error.
func (s *hedgedStream) SendMsg(m any) error {
	if w, ok := s.committed(); ok {
		return s.sendCommitted(w, m)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if w, ok := s.committed(); ok {
		return s.sendCommitted(w, m)
	}
	if !s.overflowed {
		n := -1
		if pm, ok := m.(proto.Message); ok {
			n = proto.Size(pm) + streamFrameHeader
		}
		if n < 0 || s.size+n > s.limit {
			s.overflowed, s.buf, s.size = true, nil, 0
			close(s.overflow)
		} else {
			s.buf = append(s.buf, m)
			s.size += n
		}
	}
	for _, a := range s.open {
		if a != nil && !a.done.Load() {
			_ = a.cs.SendMsg(m)
		}
	}
	return nil
}

func (s *hedgedStream) sendCommitted(w *streamAttempt, m any) error {
	if w == nil || w.ended {
		return io.EOF
	}
	return w.cs.SendMsg(m)
}

// CloseSend closes the sending side of the attempts open, and of those
// to come.
func (s *hedgedStream) CloseSend() error {
	if w, ok := s.committed(); ok {
		return s.closeCommitted(w)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if w, ok := s.committed(); ok {
		return s.closeCommitted(w)
	}
	s.closed = true
	for _, a := range s.open {
		if a != nil && !a.done.Load() {
			_ = a.cs.CloseSend()
		}
	}
	return nil
}

func (s *hedgedStream) closeCommitted(w *streamAttempt) error {
	if w == nil || w.ended {
		return nil
	}
	return w.cs.CloseSend()
}

// RecvMsg waits until the call is committed, then receives from the
// winner; a failed call reports its give-up error.
func (s *hedgedStream) RecvMsg(m any) error {
	<-s.decided
	w := s.winner
	if w == nil {
		return s.err
	}
	if w.ended {
		s.finish(w)
		return io.EOF
	}
	err := w.cs.RecvMsg(m)
	if err != nil || !s.desc.ServerStreams {
		s.finish(w) // the stream has ended
	}
	return err
}

// finish releases the winner's context and gives the caller's Header,
// Trailer and Peer options the winner's metadata and peer (grpc-go wrote
// the winner's own Peer option when its stream ended, before RecvMsg
// reported the end).
func (s *hedgedStream) finish(w *streamAttempt) {
	w.cancel()
	o := &s.opts
	if len(o.headers)+len(o.trailers)+len(o.peers) == 0 || !s.filled.CompareAndSwap(false, true) {
		return
	}
	hd, _ := w.cs.Header()
	o.fill(hd, w.cs.Trailer(), w.peer)
}

// Header waits until the call is committed and returns the winner's
// header metadata; nil, nil when the call failed or ended without headers
// (RecvMsg reports how).
func (s *hedgedStream) Header() (metadata.MD, error) {
	<-s.decided
	if s.winner == nil {
		return nil, nil
	}
	return s.winner.cs.Header()
}

// Trailer returns the winner's trailer metadata, or the last failed
// attempt's when the call failed.
func (s *hedgedStream) Trailer() metadata.MD {
	w, ok := s.committed()
	switch {
	case !ok:
		return nil
	case w == nil:
		return s.trailer
	}
	return w.cs.Trailer()
}

// Context returns the winner's context once the call is committed, and
// the caller's before.
func (s *hedgedStream) Context() context.Context {
	if w, ok := s.committed(); ok && w != nil {
		return w.cs.Context()
	}
	return s.ctx
}
