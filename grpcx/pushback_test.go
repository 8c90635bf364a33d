package grpcx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Every preset × every grpc-retry-pushback-ms a real server may send with
// UNAVAILABLE. Under gRFC A6 a negative, malformed or repeated value means
// "do not retry": a preset that honours hints makes one attempt, whatever
// its IgnoreSignals; one that ignores hints retries up to its cap. The
// grpc preset used to retry after -1 (issue 15, point 4).
func TestPresetsBadPushbackOverGRPC(t *testing.T) {
	leakcheck.Check(t)
	hints := []struct {
		name string
		vals []string
		bad  bool
	}{
		{"negative", []string{"-1"}, true},
		{"malformed", []string{"1.5"}, true},
		{"repeated", []string{"1", "2"}, true},
		{"valid", []string{"1"}, false},
	}
	for _, name := range retry.Presets() {
		p, err := retry.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		// The hint decides, not a budget's state; a 1 ms backoff keeps the
		// test short and leaves the hint's clamp window as it was.
		p.Budget = budget.Spec{}
		p.Backoff, p.ThrottleBackoff = backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond}, nil
		for _, h := range hints {
			t.Run(name+"/"+h.name, func(t *testing.T) {
				b := newBackend(t, nil, step{fn: func(ctx context.Context) error {
					_ = grpc.SetTrailer(ctx, metadata.MD{wire.KeyGRPCRetryPushback: h.vals})
					return status.Error(codes.Unavailable, "busy")
				}})
				r, err := retry.New(p)
				if err != nil {
					t.Fatal(err)
				}
				c := dial(t, b.addr, grpc.WithUnaryInterceptor(grpcx.UnaryClientInterceptor(r)))
				err = check(context.Background(), c)
				want := p.MaxAttempts
				if h.bad && !p.Pushback.Ignore {
					want = 1
				}
				if got := len(b.seen()); got != want {
					t.Errorf("attempts %d; want %d (ignore signals %v, ignore pushback %v); err %v",
						got, want, p.IgnoreSignals, p.Pushback.Ignore, err)
				}
				if want == 1 && !errors.Is(err, retry.ErrServerSaidStop) {
					t.Errorf("err %v; want ErrServerSaidStop", err)
				}
			})
		}
	}
}

// The grpcx kill switch answers grpc-retry-pushback-ms: -1 so that gRFC A6
// clients stop: the grpc preset, deaf to stormguard-overload, makes one
// attempt.
func TestKillSwitchStopsGRPCPreset(t *testing.T) {
	leakcheck.Check(t)
	dials := new(killswitch.Dials)
	if err := dials.SetShedFraction(1); err != nil {
		t.Fatal(err)
	}
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Dials: dials}})
	p, err := retry.Preset("grpc")
	if err != nil {
		t.Fatal(err)
	}
	r, err := retry.New(p)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.addr, grpc.WithUnaryInterceptor(grpcx.UnaryClientInterceptor(r)))
	err = check(context.Background(), c)
	if st := sg.Stats(); st.Arrived != 1 || !errors.Is(err, retry.ErrServerSaidStop) {
		t.Errorf("%d calls reached the server, err %v; want 1 and ErrServerSaidStop", st.Arrived, err)
	}
}
