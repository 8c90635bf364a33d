package grpcx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/supersede"
	"github.com/stormguard/stormguard/wire"
)

// transfer scripts the backend of the supersession tests: a call with
// x-name: blocker holds its slot until hold closes; any other counts its
// run, waits for slow, sets header metadata naming the run and its peer's
// client certificate (x-peer, see peerName) and trailer metadata naming
// the run, and answers with code.
type transfer struct {
	hold, slow chan struct{}
	runs       atomic.Int32
	code       codes.Code
}

func newTransfer() *transfer {
	return &transfer{hold: make(chan struct{}), slow: make(chan struct{})}
}

func (tr *transfer) step() step {
	return step{fn: func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-name"); len(v) > 0 && v[0] == "blocker" {
			<-tr.hold
			return nil
		}
		n := tr.runs.Add(1)
		<-tr.slow
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-run", fmt.Sprint(n), "x-peer", peerName(ctx)))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-run-trailer", fmt.Sprint(n)))
		if tr.code != codes.OK {
			return status.Errorf(tr.code, "transfer %d says %v", n, tr.code)
		}
		return nil
	}}
}

// answer is how a call ended, with its metadata.
type answer struct {
	err             error
	header, trailer metadata.MD
}

// keyedCheck calls Check with idempotency key k (none if empty) and the
// given extra metadata, in the background.
func keyedCheck(c healthpb.HealthClient, k string, kv ...string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		ctx := context.Background()
		if k != "" {
			kv = append(kv, grpcx.KeyIdempotencyKey, k)
		}
		if len(kv) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		}
		var a answer
		_, a.err = c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
		ch <- a
	}()
	return ch
}

// fixed is a fixed concurrency limit of n.
func fixed(n int) limit.Spec { return limit.Spec{Kind: limit.KindFixed, Limit: n} }

// first returns the first value of k in md, or "".
func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Taps of one call while the server is full: each newer one takes the
// older's place in the queue, and the older fails with ALREADY_EXISTS,
// marked replaced, with a pushback that says do not retry; a stormguard
// client does not retry it. The call runs once.
func TestServerSupersedeQueued(t *testing.T) {
	leakcheck.Check(t)
	tr := newTransfer()
	close(tr.slow) // transfers run at once; the blocker holds the slot
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(1), Supersede: &admit.SupersedeConfig{}}}, tr.step())
	raw := dial(t, b.addr)
	retrying := unaryClient(t, b, fast(t, nil))
	blocker := keyedCheck(raw, "", "x-name", "blocker")
	waitFor(t, "the blocker running", func() bool { return sg.Stats().InFlight == 1 })
	const taps = 4
	var pending []<-chan answer
	for i := range taps {
		c := raw
		if i == 0 {
			c = retrying // the first tap's client retries what it may
		}
		pending = append(pending, keyedCheck(c, "tap-key"))
		waitFor(t, fmt.Sprintf("tap %d queued", i+1), func() bool {
			st := sg.Stats()
			return st.Queued == 1 && st.Superseded == uint64(i)
		})
	}
	for i, p := range pending[:taps-1] {
		a := <-p
		if status.Code(a.err) != codes.AlreadyExists || first(a.trailer, grpcx.KeySuperseded) != "replaced" ||
			first(a.trailer, wire.KeyGRPCRetryPushback) != "-1" || !strings.Contains(status.Convert(a.err).Message(), "superseded") {
			t.Errorf("tap %d: %v, trailer %v; want ALREADY_EXISTS, superseded: replaced, pushback -1", i+1, a.err, a.trailer)
		}
		var gu *retry.GiveUpError
		if i == 0 && (!errors.As(a.err, &gu) || gu.Attempts != 1 || !errors.Is(a.err, retry.ErrServerSaidStop)) {
			t.Errorf("the stormguard client's tap: %v; want it not retried (the pushback says stop)", a.err)
		}
	}
	close(tr.hold)
	if a := <-blocker; a.err != nil {
		t.Errorf("blocker: %v", a.err)
	}
	if a := <-pending[taps-1]; a.err != nil || first(a.header, "x-run") != "1" {
		t.Errorf("the last tap: %v, header %v; want run 1", a.err, a.header)
	}
	if n := tr.runs.Load(); n != 1 {
		t.Errorf("the call ran %d times; want 1", n)
	}
	st := sg.Stats()
	if st.Arrived != taps+1 || st.Superseded != taps-1 || st.Goodput != 2 {
		t.Errorf("arrived %d, superseded %d, goodput %d; want %d (no retry), %d, 2", st.Arrived, st.Superseded, st.Goodput, taps+1, taps-1)
	}
	checkServerBooks(t, st)
}

// Taps of a call already running wait for it and get its answer, replayed:
// the reply or the error, and the metadata it set; it runs once.
func TestServerSupersedeJoin(t *testing.T) {
	for _, code := range []codes.Code{codes.OK, codes.NotFound} {
		t.Run(code.String(), func(t *testing.T) {
			leakcheck.Check(t)
			tr := newTransfer()
			tr.code = code
			b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}}, tr.step())
			c := dial(t, b.addr)
			twin := keyedCheck(c, "k1")
			waitFor(t, "the twin running", func() bool { return tr.runs.Load() == 1 })
			const joiners = 3
			var pending []<-chan answer
			for range joiners {
				pending = append(pending, keyedCheck(c, "k1"))
			}
			waitFor(t, "the taps joining", func() bool { return sg.Stats().Joining == joiners })
			close(tr.slow)
			a := <-twin
			if status.Code(a.err) != code || first(a.header, "x-run") != "1" || first(a.trailer, grpcx.KeySuperseded) != "" {
				t.Fatalf("twin: %v, header %v, trailer %v; want %v from run 1, unmarked", a.err, a.header, a.trailer, code)
			}
			for i, p := range pending {
				j := <-p
				if status.Code(j.err) != code || status.Convert(j.err).Message() != status.Convert(a.err).Message() ||
					first(j.header, "x-run") != "1" || first(j.trailer, "x-run-trailer") != "1" || first(j.trailer, grpcx.KeySuperseded) != "joined" {
					t.Errorf("joiner %d: %v, header %v, trailer %v; want the twin's answer, marked joined", i, j.err, j.header, j.trailer)
				}
			}
			if n := tr.runs.Load(); n != 1 {
				t.Errorf("the call ran %d times; want 1", n)
			}
			st := sg.Stats()
			if st.Joined != joiners || st.Goodput != 1 {
				t.Errorf("joined %d, goodput %d; want %d, 1", st.Joined, st.Goodput, joiners)
			}
			checkServerBooks(t, st)
		})
	}
}

// Calls are collapsed only with supersession on, with one well-formed key,
// and within the key's scope (the method, and the caller IdempotencyScope
// tells); past MaxWaiters a call is refused with RESOURCE_EXHAUSTED.
func TestServerSupersedeScopeAndBound(t *testing.T) {
	user := func(ctx context.Context, _ string) string {
		md, _ := metadata.FromIncomingContext(ctx)
		return first(md, "x-user")
	}
	tests := []struct {
		name     string
		sup      *admit.SupersedeConfig
		scope    func(context.Context, string) string
		a, b     []string // key, then extra metadata
		wantCode codes.Code
		wantMark string // the second call's stormguard-superseded
	}{
		{"same key", &admit.SupersedeConfig{}, nil, []string{"k"}, []string{"k"}, codes.OK, "joined"},
		{"off by default", nil, nil, []string{"k"}, []string{"k"}, codes.OK, ""},
		{"another key", &admit.SupersedeConfig{}, nil, []string{"k"}, []string{"k2"}, codes.OK, ""},
		{"a malformed key is no key", &admit.SupersedeConfig{}, nil, []string{strings.Repeat("k", 256)}, []string{strings.Repeat("k", 256)}, codes.OK, ""},
		{"same user", &admit.SupersedeConfig{}, user, []string{"k", "x-user", "ann"}, []string{"k", "x-user", "ann"}, codes.OK, "joined"},
		{"another user", &admit.SupersedeConfig{}, user, []string{"k", "x-user", "ann"}, []string{"k", "x-user", "bob"}, codes.OK, ""},
		{"no room to wait", &admit.SupersedeConfig{MaxWaiters: 1}, nil, []string{"k"}, []string{"k"}, codes.ResourceExhausted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			tr := newTransfer()
			b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: tt.sup}, IdempotencyScope: tt.scope}, tr.step())
			c := dial(t, b.addr)
			a := keyedCheck(c, tt.a[0], tt.a[1:]...)
			waitFor(t, "the first running", func() bool { return tr.runs.Load() == 1 })
			var filler <-chan answer
			if tt.sup != nil && tt.sup.MaxWaiters == 1 {
				filler = keyedCheck(c, tt.a[0], tt.a[1:]...)
				waitFor(t, "a waiter", func() bool { return sg.Stats().Joining == 1 })
			}
			second := keyedCheck(c, tt.b[0], tt.b[1:]...)
			if tt.wantCode == codes.OK {
				waitFor(t, "the second joining or running", func() bool {
					return sg.Stats().Joining == 1 || tr.runs.Load() == 2
				})
			} else {
				s := <-second
				second = nil
				if status.Code(s.err) != tt.wantCode || first(s.trailer, wire.KeyGRPCRetryPushback) == "" {
					t.Errorf("second: %v, trailer %v; want %v with a pushback", s.err, s.trailer, tt.wantCode)
				}
			}
			close(tr.slow)
			if r := <-a; r.err != nil {
				t.Errorf("first: %v", r.err)
			}
			if filler != nil {
				<-filler
			}
			if second != nil {
				s := <-second
				if s.err != nil || first(s.trailer, grpcx.KeySuperseded) != tt.wantMark {
					t.Errorf("second: %v, superseded %q; want OK, %q", s.err, first(s.trailer, grpcx.KeySuperseded), tt.wantMark)
				}
			}
			checkServerBooks(t, sg.Stats())
		})
	}
}

// Streaming calls are never collapsed: two Watch calls with one key both
// run.
func TestServerSupersedeIgnoresStreams(t *testing.T) {
	leakcheck.Check(t)
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}}, step{msgs: 1})
	c := dial(t, b.addr)
	for range 2 {
		ctx := metadata.AppendToOutgoingContext(context.Background(), grpcx.KeyIdempotencyKey, "k")
		ws, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := ws.Recv(); err != nil {
				break
			}
		}
	}
	if st := sg.Stats(); len(b.seen()) != 2 || st.Joined != 0 || st.Superseded != 0 {
		t.Errorf("backend saw %d streams, joined %d, superseded %d; want 2, 0, 0", len(b.seen()), st.Joined, st.Superseded)
	}
}

// A twin's answer is replayed only when the twin completed for a client
// that was still waiting; otherwise the call that joined it runs itself
// (issue 25). The twin ends because its caller left (a cancelled
// context), because its caller's deadline passed (grpc-timeout: the
// caller gives up and the server's context ends with it), or because the
// deadline it stated passed while it still waits (stormguard-timeout
// shorter than its context's: the handler's context ends, the call's does
// not); its handler answers with its context's error (CANCELLED or
// DEADLINE_EXCEEDED), with CANCELLED or DEADLINE_EXCEEDED outright, or
// with OK. None of these answers was for a caller who waits: the call that
// joined runs its own request (run 2), unmarked, under its own longer
// deadline.
func TestServerSupersedeNoReplayForCallerGone(t *testing.T) {
	short := hostspeed.Scale(50 * time.Millisecond)
	stated, ok := wire.FormatTimeout(short)
	if !ok {
		t.Fatalf("cannot encode %v", short)
	}
	hows := []struct {
		name string
		// ctx is the twin's context; leave, if set, is called once the
		// other call joined it.
		ctx   func() (context.Context, context.CancelFunc)
		md    []string
		leave bool
	}{
		{"its caller left", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, nil, true},
		{"its caller's deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), short)
		}, nil, false},
		{"its stated deadline passed, its caller waiting", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, []string{"stormguard-timeout", stated}, false},
	}
	answers := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"its context's error", func(ctx context.Context) error { return status.FromContextError(ctx.Err()).Err() }},
		{"CANCELLED", func(context.Context) error { return status.Error(codes.Canceled, "the twin gave up") }},
		{"DEADLINE_EXCEEDED", func(context.Context) error { return status.Error(codes.DeadlineExceeded, "the twin ran out of time") }},
		{"OK", func(context.Context) error { return nil }},
	}
	for _, how := range hows {
		for _, ans := range answers {
			t.Run(how.name+"/"+ans.name, func(t *testing.T) {
				leakcheck.Check(t)
				var runs atomic.Int32
				release := make(chan struct{})
				answered := make(chan error, 1) // what the twin's handler answered
				b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(4), Supersede: &admit.SupersedeConfig{}}}, step{fn: func(ctx context.Context) error {
					n := runs.Add(1)
					if n == 1 {
						<-release
						<-ctx.Done()
						err := ans.fn(ctx)
						answered <- err
						return err
					}
					_ = grpc.SetHeader(ctx, metadata.Pairs("x-run", fmt.Sprint(n)))
					return nil
				}})
				c := dial(t, b.addr)
				ctx, cancel := how.ctx()
				defer cancel()
				firstDone := make(chan error, 1)
				go func() {
					md := append([]string{grpcx.KeyIdempotencyKey, "k"}, how.md...)
					_, err := c.Check(metadata.AppendToOutgoingContext(ctx, md...), &healthpb.HealthCheckRequest{})
					firstDone <- err
				}()
				waitFor(t, "the first running", func() bool { return runs.Load() == 1 })
				second := keyedCheck(c, "k")
				waitFor(t, "the second joining", func() bool { return sg.Stats().Joining == 1 })
				close(release)
				if how.leave {
					cancel()
				}
				s := <-second
				twin := <-answered
				if s.err != nil || first(s.header, "x-run") != "2" || first(s.trailer, grpcx.KeySuperseded) != "" {
					t.Errorf("the twin answered %v after %s: the call that joined got %v, header %v, trailer %v; want OK from its own run (2), not a replay",
						status.Code(twin), how.name, s.err, s.header, s.trailer)
				}
				err := <-firstDone
				if how.md != nil && (status.Code(err) != status.Code(twin) || ctx.Err() != nil) {
					// The scene is what it says: the twin's caller waited
					// and got the answer.
					t.Errorf("the twin's caller got %v (its context: %v); want the handler's %v, still waiting", err, ctx.Err(), status.Code(twin))
				}
				if st := sg.Stats(); st.Joined != 0 || runs.Load() != 2 {
					t.Errorf("joined %d, runs %d; want 0, 2", st.Joined, runs.Load())
				}
				checkServerBooks(t, sg.Stats())
			})
		}
	}
}

// The default scope tells calls apart by their caller's credentials: a
// key reused with another authorization or cookie is not joined to the
// first.
func TestServerSupersedeDefaultScope(t *testing.T) {
	tests := []struct {
		name       string
		a, b       []string // extra metadata
		wantJoined bool
	}{
		{"the same credentials", []string{"authorization", "Bearer ann", "cookie", "s=1"}, []string{"authorization", "Bearer ann", "cookie", "s=1"}, true},
		{"another authorization", []string{"authorization", "Bearer ann"}, []string{"authorization", "Bearer bob"}, false},
		{"an authorization and none", []string{"authorization", "Bearer ann"}, nil, false},
		{"another cookie", []string{"cookie", "session=ann"}, []string{"cookie", "session=bob"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			tr := newTransfer()
			b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}}, tr.step())
			c := dial(t, b.addr)
			a := keyedCheck(c, "k", tt.a...)
			waitFor(t, "the first running", func() bool { return tr.runs.Load() == 1 })
			second := keyedCheck(c, "k", tt.b...)
			waitFor(t, "the second joining or running", func() bool {
				return sg.Stats().Joining == 1 || tr.runs.Load() == 2
			})
			close(tr.slow)
			if r := <-a; r.err != nil {
				t.Errorf("first: %v", r.err)
			}
			s := <-second
			if joined := first(s.trailer, grpcx.KeySuperseded) == "joined"; s.err != nil || joined != tt.wantJoined {
				t.Errorf("second: %v, joined %v; want OK, joined %v", s.err, joined, tt.wantJoined)
			}
			if !tt.wantJoined && first(s.header, "x-run") != "2" {
				t.Errorf("second: header %v; want its own run (2)", s.header)
			}
			checkServerBooks(t, sg.Stats())
		})
	}
}

// checkServerBooks verifies that every call that arrived ended in exactly
// one outcome, once nothing is in flight, queued or joining.
func checkServerBooks(t *testing.T, st grpcx.ServerStats) {
	t.Helper()
	if st.InFlight != 0 || st.Queued != 0 || st.Joining != 0 {
		t.Errorf("in flight %d, queued %d, joining %d; want 0", st.InFlight, st.Queued, st.Joining)
	}
	out := st.Goodput + st.Failed + st.Wasted + st.ShedTotal() + st.Expired + st.Canceled + st.Superseded + st.Joined
	if st.Arrived != out {
		t.Errorf("books do not balance: arrived %d, accounted for %d: %+v", st.Arrived, out, st)
	}
}

// The server reads one well-formed idempotency-key value, as
// supersede.ParseKey checks it, and nothing else.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", `"k"`, "", " k ", "\x7f", `"`, strings.Repeat("k", 256)} {
		f.Add(s, "", false)
		f.Add(s, "other", true)
	}
	f.Fuzz(func(t *testing.T, v, v2 string, two bool) {
		md := metadata.MD{grpcx.KeyIdempotencyKey: {v}}
		if two {
			md[grpcx.KeyIdempotencyKey] = append(md[grpcx.KeyIdempotencyKey], v2)
		}
		k, ok := grpcx.IdempotencyKey(md)
		want, err := supersede.ParseKey(v)
		switch {
		case two && (ok || k != ""):
			t.Fatalf("two values %q, %q: key %q, %v; want none", v, v2, k, ok)
		case !two && (ok != (err == nil) || k != want):
			t.Fatalf("%q: key %q, %v; want ParseKey's %q, %v", v, k, ok, want, err)
		case ok && (len(k) == 0 || len(k) > supersede.MaxKeyLen):
			t.Fatalf("%q: key %q of length %d", v, k, len(k))
		}
	})
}
