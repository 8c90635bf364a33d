package grpcx

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stormguard/stormguard/retry"
)

// hedgeResult is how one hedged attempt ended.
type hedgeResult struct {
	n               int
	o               outcome
	reply           proto.Message
	header, trailer metadata.MD
	peer            *peer.Peer // nil unless the caller asked for the peer
	end             time.Time
}

// hedge makes a unary call under the retrier's hedging policy (see
// UnaryClientInterceptor).
func (cl *client) hedge(ctx context.Context, now, dl time.Time, st stamp,
	method string, req any, reply proto.Message, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	r := cl.r
	h, ok := r.HedgeStartAt(now, dl)
	if !ok {
		return r.HedgeGiveUp(&h, retry.ErrBreakerOpen, breakerLast(nil))
	}
	// The caller's Header, Trailer and Peer options get the winner's
	// metadata and peer; the attempts, running at once, get their own.
	ho := splitHedgeOpts(opts)
	results := make(chan hedgeResult, retry.MaxHedgeAttempts) // never blocks a sender
	var cancels [retry.MaxHedgeAttempts]context.CancelFunc
	launch := func(n int) {
		actx, cancel := context.WithCancel(st.context(ctx, n))
		cancels[n-1] = cancel
		rep := reply.ProtoReflect().New().Interface()
		p, aopts := ho.attempt()
		go func() {
			o, hd, tr := cl.invokeMD(ctx, actx, method, req, rep, cc, invoker, aopts)
			results <- hedgeResult{n: n, o: o, reply: rep, header: hd, trailer: tr, peer: p, end: time.Now()}
		}()
	}
	launch(1)

	var (
		timer *time.Timer
		last  error
		d     retry.HedgeDecision
		win   hedgeResult
		done  = ctx.Done()
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for !d.Done {
		tc, due := nextHedge(&h, &timer)
		if due {
			var n int
			n, d = r.HedgeAt(time.Now(), &h)
			if n > 0 {
				launch(n)
			}
			continue
		}
		select {
		case res := <-results:
			cancels[res.n-1]()
			if supersededCopy(res.o.err, res.trailer) && otherRunning(&h, res.n) {
				// A later copy of this call took this one's place in a
				// superseding server's queue (it carries the same
				// idempotency-key): its answer is this call's. Not a
				// failure: the copy is cancelled, as a loser would be.
				r.HedgeCancelAt(res.end, &h, res.n)
				continue
			}
			d = r.HedgeEndAt(res.end, &h, res.n, res.o.cls, res.o.sig)
			if res.o.cls == retry.Success {
				win = res
			} else {
				last = res.o.err
			}
		case <-tc:
		case <-done:
			done = nil
			d, last = canceledWaiting(r, &h, ctx, d, last)
		}
	}
	if k := h.InFlight(); k > 0 {
		end := time.Now()
		for n := 1; n <= h.Sent(); n++ {
			if h.Running(n) {
				cancels[n-1]()
				r.HedgeCancelAt(end, &h, n)
			}
		}
		go func() { // the losers end at once, cancelled
			for range k {
				<-results
			}
		}()
	}
	if d.Reason != nil {
		return r.HedgeGiveUp(&h, d.Reason, last)
	}
	proto.Reset(reply)
	proto.Merge(reply, win.reply)
	ho.fill(win.header, win.trailer, win.peer)
	return nil
}

// hedgeOpts are a hedged call's options: those its attempts share, and
// the caller's Header, Trailer and Peer options, which every attempt,
// running at once, would otherwise write; they get the winner's.
type hedgeOpts struct {
	shared   []grpc.CallOption // the caller's options but those below
	headers  []*metadata.MD
	trailers []*metadata.MD
	peers    []*peer.Peer
}

// splitHedgeOpts sorts the options of a hedged call.
func splitHedgeOpts(opts []grpc.CallOption) hedgeOpts {
	ho := hedgeOpts{shared: make([]grpc.CallOption, 0, len(opts))}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			ho.headers = append(ho.headers, o.HeaderAddr)
		case grpc.TrailerCallOption:
			ho.trailers = append(ho.trailers, o.TrailerAddr)
		case grpc.PeerCallOption:
			ho.peers = append(ho.peers, o.PeerAddr)
		default:
			ho.shared = append(ho.shared, o)
		}
	}
	return ho
}

// attempt returns an attempt's options: the shared ones and, if the
// caller asked for the peer, a Peer option of the attempt's own, p.
func (ho *hedgeOpts) attempt() (p *peer.Peer, opts []grpc.CallOption) {
	if len(ho.peers) == 0 {
		return nil, ho.shared
	}
	p = new(peer.Peer)
	// The full slice expression makes append copy, never write into the
	// shared array.
	return p, append(ho.shared[:len(ho.shared):len(ho.shared)], grpc.Peer(p))
}

// fill gives the caller's options the winner's header, trailer and peer
// (p, from attempt; nil if it has none).
func (ho *hedgeOpts) fill(header, trailer metadata.MD, p *peer.Peer) {
	for _, h := range ho.headers {
		*h = header
	}
	for _, t := range ho.trailers {
		*t = trailer
	}
	if p != nil {
		for _, cp := range ho.peers {
			*cp = *p
		}
	}
}

// supersededCopy reports whether an attempt ended with a superseding
// server's answer to a call a newer twin replaced in its queue
// (ALREADY_EXISTS with stormguard-superseded: replaced in the trailer).
func supersededCopy(err error, trailer metadata.MD) bool {
	if status.Code(err) != codes.AlreadyExists {
		return false
	}
	v := trailer.Get(KeySuperseded)
	return len(v) > 0 && v[0] == "replaced"
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

// nextHedge says when the call's next hedge is due: now (due), or when the
// returned channel fires, from *timer (made or reset here); a nil channel
// and false when no hedge is planned.
func nextHedge(h *retry.Hedge, timer **time.Timer) (tc <-chan time.Time, due bool) {
	next, ok := h.Next()
	if !ok {
		return nil, false
	}
	wait := time.Until(next)
	if wait <= 0 {
		return nil, true
	}
	if *timer == nil {
		*timer = time.NewTimer(wait)
	} else {
		(*timer).Reset(wait)
	}
	return (*timer).C, false
}

// canceledWaiting is what a hedged call's context ending does: the
// attempts in flight end with it and report; with none in flight, the
// wait for a pushback ends here and the call gives up canceled.
func canceledWaiting(r *retry.Retrier, h *retry.Hedge, ctx context.Context, d retry.HedgeDecision, last error) (retry.HedgeDecision, error) {
	if h.InFlight() > 0 {
		return d, last
	}
	return r.HedgeStopAt(time.Now(), h, retry.ErrCanceled),
		fmt.Errorf("%w, while waiting to hedge after: %w", contextStatus(ctx.Err()), last)
}
