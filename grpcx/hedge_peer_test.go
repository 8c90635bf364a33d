package grpcx_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/stormguard/stormguard/internal/leakcheck"
)

// A hedged call with the caller's grpc.Peer option, won by the hedge: the
// caller's Peer gets the winner's peer, the server's address, and the
// attempts, running at once, each write their own (under -race, attempts
// sharing the caller's Peer are a data race: the cancelled first attempt
// writes it while the caller reads it).
func TestHedgePeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		// call makes the call with opts and returns its error.
		call func(ctx context.Context, c healthpb.HealthClient, opts ...grpc.CallOption) error
	}{
		{"unary", func(ctx context.Context, c healthpb.HealthClient, opts ...grpc.CallOption) error {
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, opts...)
			return err
		}},
		{"stream", func(ctx context.Context, c healthpb.HealthClient, opts ...grpc.CallOption) error {
			s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{}, opts...)
			if err != nil {
				return err
			}
			for {
				if _, err := s.Recv(); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			var canceled atomic.Int32
			slow := waitCanceled(&canceled)
			b := newBackend(t, nil, slow, step{msgs: 1})
			c := streamClient(t, b.addr, fast(t, hedgedPolicy(2, 20*time.Millisecond)))

			var p peer.Peer
			if err := tc.call(timeout(t), c, grpc.Peer(&p)); err != nil {
				t.Fatalf("call: %v", err)
			}
			if got, want := b.attempts(), []string{"/", "2/1"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("attempt/previous metadata = %q, want %q (the hedge wins)", got, want)
			}
			if !eventuallyTrue(func() bool { return canceled.Load() == 1 }) {
				t.Fatal("the slow attempt was not cancelled on the server")
			}
			// The loser ends (and, sharing the caller's Peer, writes it)
			// about when the server sees it cancelled.
			time.Sleep(20 * time.Millisecond)
			got := "<nil>"
			if p.Addr != nil {
				got = p.Addr.String()
			}
			if got != b.addr {
				t.Errorf("the caller's Peer has address %s, want the server's, %s", got, b.addr)
			}
		})
	}
}
