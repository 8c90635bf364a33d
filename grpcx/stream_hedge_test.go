package grpcx_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// chat is a bidirectional streaming service registered by hand (no
// protoc): /stormguard.test.Chat/Talk, whose messages are
// wrapperspb.StringValue. Each call runs the script with its number.
type chat struct {
	mu     sync.Mutex
	calls  []*chatCall
	script func(n int, ss grpc.ServerStream, c *chatCall) error
}

// chatCall is what the server saw of one call.
type chatCall struct {
	attempt  string   // stormguard-attempt
	got      []string // the messages received, in order
	canceled bool     // the call's context ended before its handler did
	ch       *chat
}

const talkMethod = "/stormguard.test.Chat/Talk"

var talkDesc = grpc.StreamDesc{StreamName: "Talk", ServerStreams: true, ClientStreams: true}

func newChat(t *testing.T, script func(n int, ss grpc.ServerStream, c *chatCall) error) (*chat, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := &chat{script: script}
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "stormguard.test.Chat",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName: "Talk", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error { return ch.talk(ss) },
		}},
	}, ch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ch, lis.Addr().String()
}

func (ch *chat) talk(ss grpc.ServerStream) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	c := &chatCall{ch: ch}
	if v := md.Get("stormguard-attempt"); len(v) > 0 {
		c.attempt = v[0]
	}
	ch.mu.Lock()
	ch.calls = append(ch.calls, c)
	n := len(ch.calls)
	ch.mu.Unlock()
	err := ch.script(n, ss, c)
	if ss.Context().Err() != nil {
		ch.mu.Lock()
		c.canceled = true
		ch.mu.Unlock()
	}
	return err
}

// recv receives until the client closes its side, recording each
// message.
func (c *chatCall) recv(ss grpc.ServerStream) error {
	for {
		var m wrapperspb.StringValue
		if err := ss.RecvMsg(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		c.ch.mu.Lock()
		c.got = append(c.got, m.GetValue())
		c.ch.mu.Unlock()
	}
}

// messages returns a copy of the messages received.
func (c *chatCall) messages() []string {
	c.ch.mu.Lock()
	defer c.ch.mu.Unlock()
	return slices.Clone(c.got)
}

// seen returns a copy of the calls so far.
func (ch *chat) seen() []chatCall {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var cs []chatCall
	for _, c := range ch.calls {
		cs = append(cs, chatCall{attempt: c.attempt, got: slices.Clone(c.got), canceled: c.canceled})
	}
	return cs
}

// hang waits until the call's context ends.
func hang(ss grpc.ServerStream) error {
	<-ss.Context().Done()
	return ss.Context().Err()
}

// pause waits d (scaled by the host's slowness), or until the call's
// context ends.
func pause(ss grpc.ServerStream, d time.Duration) error {
	select {
	case <-ss.Context().Done():
		return ss.Context().Err()
	case <-time.After(hostspeed.Scale(d)):
		return nil
	}
}

func send(ss grpc.ServerStream, s string) error {
	return ss.SendMsg(wrapperspb.String(s))
}

// chatConn dials addr through the interceptors of r.
func chatConn(t *testing.T, addr string, r *retry.Retrier) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, grpcx.DialOptions(r)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// talk opens a Talk stream.
func talk(t *testing.T, ctx context.Context, conn *grpc.ClientConn) grpc.ClientStream {
	t.Helper()
	s, err := conn.NewStream(ctx, &talkDesc, talkMethod)
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	return s
}

// sendAll sends each message as a StringValue.
func sendAll(t *testing.T, s grpc.ClientStream, msgs []string) {
	t.Helper()
	for _, m := range msgs {
		if err := s.SendMsg(wrapperspb.String(m)); err != nil {
			t.Fatalf("SendMsg(%.10q): %v", m, err)
		}
	}
}

// recvStrings receives to the end of the stream.
func recvStrings(s grpc.ClientStream) ([]string, error) {
	var got []string
	for {
		var m wrapperspb.StringValue
		if err := s.RecvMsg(&m); err == io.EOF {
			return got, nil
		} else if err != nil {
			return got, err
		}
		got = append(got, m.GetValue())
	}
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hostspeed.Scale(10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// A slow first stream and a fast hedge: the hedge's messages and
// trailer win, the slow stream is cancelled on the server, and the server
// sees attempts 1 and 2.
func TestStreamHedgeSlowFirst(t *testing.T) {
	leakcheck.Check(t)
	var canceled atomic.Int32
	slow := waitCanceled(&canceled)
	b := newBackend(t, nil, slow, step{msgs: 2, trailer: map[string]string{"x-who": "hedge"}})
	var retries atomic.Int32
	r := fast(t, hedgedPolicy(2, 20*time.Millisecond), retry.WithHooks(retry.Hooks{OnRetry: func(int, time.Duration) { retries.Add(1) }}))
	c := streamClient(t, b.addr, r)

	var trailer metadata.MD
	s, err := c.Watch(timeout(t), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err = s.Recv(); err != nil {
			break
		}
		n++
	}
	if n != 2 || err != io.EOF {
		t.Fatalf("Watch = %d messages, then %v; want 2, then EOF", n, err)
	}
	if got, want := b.attempts(), []string{"/", "2/1"}; !slices.Equal(got, want) {
		t.Errorf("attempt/previous metadata = %q, want %q", got, want)
	}
	if got := first(trailer, "x-who"); got != "hedge" {
		t.Errorf("the caller's Trailer option got x-who %q, want the winner's, %q", got, "hedge")
	}
	if !eventuallyTrue(func() bool { return canceled.Load() == 1 }) {
		t.Error("the slow stream was not cancelled on the server")
	}
	if got := retries.Load(); got != 1 {
		t.Errorf("OnRetry saw %d hedges, want 1", got)
	}
}

// The messages the caller sent before a hedge started are replayed to
// it, in order, and so is CloseSend; later messages reach it live.
func TestStreamHedgeReplay(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before      []string // sent before the hedge starts
		closeBefore bool     // CloseSend before the hedge starts
		after       []string // sent once the server sees the hedge
	}{
		{"messages before, one after", []string{"a", "b", "c"}, false, []string{"d"}},
		{"everything and CloseSend before", []string{"a", "b", "c"}, true, nil},
		{"nothing before", nil, false, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ch, addr := newChat(t, func(n int, ss grpc.ServerStream, c *chatCall) error {
				if n == 1 {
					return hang(ss) // never answers: the hedge must
				}
				if err := c.recv(ss); err != nil {
					return err
				}
				return send(ss, strings.Join(c.messages(), ","))
			})
			conn := chatConn(t, addr, fast(t, hedgedPolicy(2, 50*time.Millisecond)))
			s := talk(t, timeout(t), conn)
			sendAll(t, s, tc.before)
			if tc.closeBefore {
				if err := s.CloseSend(); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the hedge", func() bool { return len(ch.seen()) == 2 })
			sendAll(t, s, tc.after)
			if !tc.closeBefore {
				if err := s.CloseSend(); err != nil {
					t.Fatal(err)
				}
			}
			got, err := recvStrings(s)
			want := strings.Join(append(slices.Clone(tc.before), tc.after...), ",")
			if err != nil || len(got) != 1 || got[0] != want {
				t.Fatalf("reply %q, %v; want [%q], nil", got, err, want)
			}
			calls := ch.seen()
			if got := []string{calls[0].attempt, calls[1].attempt}; !slices.Equal(got, []string{"", "2"}) {
				t.Errorf("attempts %q, want [\"\" 2] (none on the first)", got)
			}
			if got := strings.Join(calls[1].got, ","); got != want {
				t.Errorf("the hedge received %q, want %q", got, want)
			}
			waitFor(t, "the first stream cancelled", func() bool { return ch.seen()[0].canceled })
		})
	}
}

// Once the call is committed (headers or a message received), no
// hedge starts, however long the stream lasts; a committed stream's later
// failure is the caller's as it is.
func TestStreamHedgeCommitted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   func(ss grpc.ServerStream) error
		want     []string
		wantCode codes.Code
	}{
		{"header", func(ss grpc.ServerStream) error {
			if err := ss.SendHeader(metadata.Pairs("x-early", "1")); err != nil {
				return err
			}
			if err := pause(ss, 300*time.Millisecond); err != nil {
				return err
			}
			return send(ss, "late")
		}, []string{"late"}, codes.OK},
		{"message", func(ss grpc.ServerStream) error {
			if err := send(ss, "first"); err != nil {
				return err
			}
			if err := pause(ss, 300*time.Millisecond); err != nil {
				return err
			}
			return send(ss, "late")
		}, []string{"first", "late"}, codes.OK},
		{"message, then a failure", func(ss grpc.ServerStream) error {
			if err := send(ss, "first"); err != nil {
				return err
			}
			if err := pause(ss, 300*time.Millisecond); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "later")
		}, []string{"first"}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ch, addr := newChat(t, func(_ int, ss grpc.ServerStream, _ *chatCall) error { return tc.script(ss) })
			var retries atomic.Int32
			r := fast(t, hedgedPolicy(3, 100*time.Millisecond), retry.WithHooks(retry.Hooks{OnRetry: func(int, time.Duration) { retries.Add(1) }}))
			s := talk(t, timeout(t), chatConn(t, addr, r))
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			got, err := recvStrings(s)
			if !slices.Equal(got, tc.want) || status.Code(err) != tc.wantCode {
				t.Fatalf("received %q, %v; want %q, %v", got, err, tc.want, tc.wantCode)
			}
			var gu *retry.GiveUpError
			if errors.As(err, &gu) {
				t.Errorf("a committed stream's failure is the caller's as it is, got a give-up: %v", err)
			}
			if n, h := len(ch.seen()), retries.Load(); n != 1 || h != 0 {
				t.Errorf("server saw %d calls, OnRetry %d hedges; want 1, 0", n, h)
			}
		})
	}
}

// How each hedge's end decides the call (gRFC A6), with the give-up
// contract of unary calls: a non-fatal status starts the next hedge at
// once, a fatal one (even from a hedge while the first still runs) ends
// the call with a *retry.GiveUpError that carries it.
func TestStreamHedgeDecisions(t *testing.T) {
	var canceled atomic.Int32
	slow := waitCanceled(&canceled)
	for _, tc := range []struct {
		name         string
		steps        []step
		delay        time.Duration
		wantMsgs     int
		wantErr      error
		wantCode     codes.Code
		wantAttempts int
		wantCanceled int32
	}{
		{"non-fatal starts the next at once", []step{{code: codes.Unavailable}, {msgs: 1}}, time.Hour, 1, nil, codes.OK, 2, 0},
		{"trailers-only OK ends the call", []step{{}}, time.Hour, 0, nil, codes.OK, 1, 0},
		{"fatal stops", []step{{code: codes.NotFound}, {msgs: 1}}, time.Hour, 0, retry.ErrNotRetryable, codes.NotFound, 1, 0},
		{"fatal from a hedge cancels the first", []step{slow, {code: codes.NotFound}}, 20 * time.Millisecond, 0, retry.ErrNotRetryable, codes.NotFound, 2, 1},
		{"all fail", []step{{code: codes.Unavailable}}, time.Hour, 0, retry.ErrAttemptsExhausted, codes.Unavailable, 3, 0},
		{"pushback says stop", []step{{code: codes.Unavailable, trailer: map[string]string{wire.KeyGRPCRetryPushback: "-1"}}, {msgs: 1}}, time.Hour, 0, retry.ErrServerSaidStop, codes.Unavailable, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			canceled.Store(0)
			b := newBackend(t, nil, tc.steps...)
			c := streamClient(t, b.addr, fast(t, hedgedPolicy(3, tc.delay)))
			n, err := watch(timeout(t), c)
			if n != tc.wantMsgs || (tc.wantErr == nil) != (err == nil) || !errors.Is(err, tc.wantErr) || status.Code(err) != tc.wantCode {
				t.Fatalf("watch = %d messages, %v (%v); want %d, %v (%v)", n, err, status.Code(err), tc.wantMsgs, tc.wantErr, tc.wantCode)
			}
			if tc.wantErr != nil {
				var gu *retry.GiveUpError
				var se *grpcx.StatusError
				if !errors.As(err, &gu) || gu.Attempts != tc.wantAttempts || !errors.As(err, &se) {
					t.Errorf("err = %#v, want a GiveUpError after %d attempts wrapping a StatusError", err, tc.wantAttempts)
				}
			}
			if got := len(b.seen()); got != tc.wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantAttempts)
			}
			if !eventuallyTrue(func() bool { return canceled.Load() == tc.wantCanceled }) {
				t.Errorf("%d slow streams cancelled on the server, want %d", canceled.Load(), tc.wantCanceled)
			}
		})
	}
}

// A message that would overflow the replay buffer stops hedging; the
// attempts already open get it and the rest, none is dropped.
func TestStreamHedgeReplayLimit(t *testing.T) {
	big := strings.Repeat("x", 300<<10) // over the 256 KiB replay buffer
	for _, tc := range []struct {
		name      string
		before    []string // sent at once
		after     []string // sent once the server sees the hedge, if set
		maxTries  int
		wantCalls int
	}{
		{"under the limit: hedged", []string{"a", "b"}, nil, 2, 2},
		{"over the limit: not hedged, nothing dropped", []string{"a", big, "c"}, nil, 3, 1},
		{"over the limit after a hedge started: both get everything", []string{"a"}, []string{big, "c"}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ch, addr := newChat(t, func(n int, ss grpc.ServerStream, c *chatCall) error {
				if err := c.recv(ss); err != nil {
					return err
				}
				if n > 1 {
					return hang(ss) // the first answers
				}
				if err := pause(ss, 400*time.Millisecond); err != nil {
					return err
				}
				var lens []string
				for _, m := range c.messages() {
					lens = append(lens, strconv.Itoa(len(m)))
				}
				return send(ss, strings.Join(lens, ","))
			})
			// The hedge is due 100 ms after the first stream opens, long
			// after the messages sent at once; the first answers at 400 ms.
			conn := chatConn(t, addr, fast(t, hedgedPolicy(tc.maxTries, 100*time.Millisecond)))
			s := talk(t, timeout(t), conn)
			sendAll(t, s, tc.before)
			if tc.after != nil {
				waitFor(t, "the hedge", func() bool { return len(ch.seen()) == 2 })
				sendAll(t, s, tc.after)
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			got, err := recvStrings(s)
			var lens []string
			for _, m := range append(slices.Clone(tc.before), tc.after...) {
				lens = append(lens, strconv.Itoa(len(m)))
			}
			if want := strings.Join(lens, ","); err != nil || len(got) != 1 || got[0] != want {
				t.Fatalf("reply %q, %v; want the lengths of every message sent, [%q]", got, err, want)
			}
			if got := len(ch.seen()); got != tc.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// Hedges are charged to the retry budget: a hedge that loses keeps its
// charge, and a budget that cannot pay starts no hedge.
func TestStreamHedgeBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bucket    func() *budget.TokenBucket // nil: denyBudget
		maxTries  int
		wantCalls int
		wantLevel float64 // the bucket's level after the call
	}{
		// 25 - 10 for the hedge, which loses and keeps its charge,
		// + 1 for the first try's success.
		{"the budget pays for a hedge", func() *budget.TokenBucket { return budget.NewTokenBucket(25, 10, 10, 10, 1, true) }, 2, 2, 16},
		{"the budget pays for one hedge of two", func() *budget.TokenBucket { return budget.NewTokenBucket(15, 10, 10, 10, 1, true) }, 3, 2, 6},
		{"an empty budget: no hedge", nil, 3, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ch, addr := newChat(t, func(n int, ss grpc.ServerStream, _ *chatCall) error {
				if n > 1 {
					return hang(ss)
				}
				if err := pause(ss, 200*time.Millisecond); err != nil {
					return err
				}
				return send(ss, "first")
			})
			var bk budget.Budget = denyBudget{}
			var tb *budget.TokenBucket
			if tc.bucket != nil {
				tb = tc.bucket()
				bk = tb
			}
			r := fast(t, hedgedPolicy(tc.maxTries, 20*time.Millisecond), retry.WithBudget(bk))
			s := talk(t, timeout(t), chatConn(t, addr, r))
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if got, err := recvStrings(s); err != nil || !slices.Equal(got, []string{"first"}) {
				t.Fatalf("received %q, %v; want [first], nil", got, err)
			}
			if got := len(ch.seen()); got != tc.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tc.wantCalls)
			}
			if tb != nil {
				if got := tb.Level(); got != tc.wantLevel {
					t.Errorf("budget level %v, want %v", got, tc.wantLevel)
				}
			}
		})
	}
}

// A caller that gives up before the call is committed ends every
// attempt, leaks nothing, and gets CANCELLED through the give-up contract.
func TestStreamHedgeCallerCancels(t *testing.T) {
	leakcheck.Check(t)
	ch, addr := newChat(t, func(_ int, ss grpc.ServerStream, _ *chatCall) error { return hang(ss) })
	gaveUp := make(chan error, 1)
	r := fast(t, hedgedPolicy(3, 10*time.Millisecond), retry.WithHooks(retry.Hooks{OnGiveUp: func(reason error, _ int, _ error) { gaveUp <- reason }}))
	ctx, cancel := context.WithCancel(context.Background())
	s := talk(t, ctx, chatConn(t, addr, r))
	waitFor(t, "three attempts", func() bool { return len(ch.seen()) == 3 })
	cancel()
	_, err := recvStrings(s)
	if status.Code(err) != codes.Canceled || !errors.Is(err, retry.ErrCanceled) {
		t.Errorf("err = %v, want CANCELLED, caller cancelled", err)
	}
	if reason := <-gaveUp; !errors.Is(reason, retry.ErrCanceled) {
		t.Errorf("OnGiveUp reason %v, want %v", reason, retry.ErrCanceled)
	}
	waitFor(t, "every attempt cancelled on the server", func() bool {
		for _, c := range ch.seen() {
			if !c.canceled {
				return false
			}
		}
		return true
	})
}
