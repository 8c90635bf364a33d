package grpcx_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
)

func streamClient(t *testing.T, addr string, r *retry.Retrier) healthpb.HealthClient {
	t.Helper()
	return dial(t, addr, grpc.WithStreamInterceptor(grpcx.StreamClientInterceptor(r)), grpc.WithUnaryInterceptor(grpcx.UnaryClientInterceptor(r)))
}

// watch opens a Watch stream and reads it to the end; it returns the number
// of messages and the final error (nil for a clean end).
func watch(ctx context.Context, c healthpb.HealthClient) (int, error) {
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		if _, err := s.Recv(); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

func TestStreamRetriedUntilFirstMessage(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable}, step{code: codes.Unavailable}, step{msgs: 2})
	c := streamClient(t, b.addr, fast(t, nil))

	ctx, cancel := context.WithTimeout(context.Background(), hostspeed.Scale(5*time.Second))
	defer cancel()
	n, err := watch(ctx, c)
	if err != nil || n != 2 {
		t.Fatalf("watch = %d messages, %v; want 2, nil", n, err)
	}
	if got, want := b.attempts(), []string{"/", "2/1", "3/2"}; !slices.Equal(got, want) {
		t.Errorf("attempt/previous metadata = %q, want %q", got, want)
	}
}

func TestStreamCommittedAfterFirstMessage(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{msgs: 1, code: codes.Unavailable}, step{msgs: 2})
	c := streamClient(t, b.addr, fast(t, nil))

	n, err := watch(context.Background(), c)
	if n != 1 || status.Code(err) != codes.Unavailable {
		t.Errorf("watch = %d messages, %v; want 1, then Unavailable", n, err)
	}
	var gu *retry.GiveUpError
	if errors.As(err, &gu) {
		t.Errorf("a committed stream's failure is the caller's as it is, got a give-up: %v", err)
	}
	if got := len(b.seen()); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

func TestStreamServerSaysStop(t *testing.T) {
	leakcheck.Check(t)
	b := newBackend(t, nil, step{code: codes.Unavailable, trailer: map[string]string{"stormguard-overload": "service"}}, step{msgs: 1})
	c := streamClient(t, b.addr, fast(t, nil))

	_, err := watch(context.Background(), c)
	if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrServerSaidStop) {
		t.Errorf("err = %v, want Unavailable, server said stop", err)
	}
	if got := len(b.seen()); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
}

// Opening a stream (and making a unary call) is retried when the channel
// cannot connect: nothing listens on the address.
func TestOpenRetriedWhenUnreachable(t *testing.T) {
	leakcheck.Check(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var classes []retry.Class
	r := fast(t, nil, retry.WithHooks(retry.Hooks{OnAttempt: func(_ int, c retry.Class, _ time.Duration) { classes = append(classes, c) }}))
	c := streamClient(t, addr, r)

	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"stream", func() error { _, err := watch(context.Background(), c); return err }},
		{"unary", func() error { return check(context.Background(), c) }},
	} {
		classes = nil
		err := call.do()
		if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Errorf("%s: err = %v, want Unavailable, attempts exhausted", call.name, err)
		}
		if want := []retry.Class{retry.Transient, retry.Transient, retry.Transient}; !slices.Equal(classes, want) {
			t.Errorf("%s: attempts = %v, want %v", call.name, classes, want)
		}
	}
}

// A stream abandoned before its first message ends its call in the retrier
// as cancelled.
func TestStreamAbandonedBeforeFirstMessage(t *testing.T) {
	leakcheck.Check(t)
	release := make(chan struct{})
	b := newBackend(t, nil, step{fn: func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil
	}})
	defer close(release)
	gaveUp := make(chan error, 1)
	r := fast(t, nil, retry.WithHooks(retry.Hooks{OnGiveUp: func(reason error, _ int, _ error) { gaveUp <- reason }}))
	c := streamClient(t, b.addr, r)

	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case reason := <-gaveUp:
		if !errors.Is(reason, retry.ErrCanceled) {
			t.Errorf("gave up for %v, want %v", reason, retry.ErrCanceled)
		}
	case <-time.After(hostspeed.Scale(5 * time.Second)):
		t.Fatal("the abandoned stream's call never ended in the retrier")
	}
	if _, err := s.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("Recv after cancel = %v, want Canceled", err)
	}
}
