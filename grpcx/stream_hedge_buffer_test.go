package grpcx_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
)

// WithStreamHedgeBuffer sets the replay buffer's size: a first message
// that does not fit (its encoded size and its 5-byte frame header) starts
// no hedge; one that fits, under a set size or the default, is hedged.
func TestStreamHedgeBuffer(t *testing.T) {
	msg := "hello"
	size := proto.Size(wrapperspb.String(msg)) + 5 // 12 bytes
	for _, tc := range []struct {
		name      string
		bytes     int // WithStreamHedgeBuffer's argument; -1: not given
		wantCalls int
	}{
		{"not given: the default, hedged", -1, 2},
		{"0: the default, hedged", 0, 2},
		{"one byte below the message: no hedge", size - 1, 1},
		{"just the message: hedged", size, 2},
		{"1 byte: no hedge", 1, 1},
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
				return send(ss, strings.Join(c.messages(), ","))
			})
			var opts []grpcx.ClientOption
			if tc.bytes >= 0 {
				opts = append(opts, grpcx.WithStreamHedgeBuffer(tc.bytes))
			}
			// The hedge is due 100 ms after the first stream opens, long
			// after the message sent at once; the first answers at 400 ms.
			r := fast(t, hedgedPolicy(2, hostspeed.Scale(100*time.Millisecond)))
			conn, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, grpcx.DialOptions(r, opts...)...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			s := talk(t, timeout(t), conn)
			sendAll(t, s, []string{msg})
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if got, err := recvStrings(s); err != nil || len(got) != 1 || got[0] != msg {
				t.Fatalf("reply %q, %v; want [%q]", got, err, msg)
			}
			if got := len(ch.seen()); got != tc.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// A negative size is refused, at once, with an error that names it.
func TestStreamHedgeBufferNegative(t *testing.T) {
	for _, tc := range []struct {
		bytes     int
		wantPanic bool
	}{
		{-1, true},
		{-256 << 10, true},
		{0, false},
		{1, false},
	} {
		var got any
		func() {
			defer func() { got = recover() }()
			grpcx.WithStreamHedgeBuffer(tc.bytes)
		}()
		if (got != nil) != tc.wantPanic {
			t.Errorf("WithStreamHedgeBuffer(%d) panicked with %v, want a panic: %v", tc.bytes, got, tc.wantPanic)
			continue
		}
		if !tc.wantPanic {
			continue
		}
		err, ok := got.(error)
		if want := fmt.Sprintf("WithStreamHedgeBuffer(%d): the size must not be negative", tc.bytes); !ok || !strings.Contains(err.Error(), want) {
			t.Errorf("WithStreamHedgeBuffer(%d) panicked with %#v, want an error that says %q", tc.bytes, got, want)
		}
	}
}
