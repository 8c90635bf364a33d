package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/retry"
)

// Hedging's cost on a call that does not need a hedge: the first attempt
// answers at once, long before the hedge delay (1 h), so no hedge is ever
// sent. Each library runs the call with its hedging policy ("hedged") and
// without it ("plain"); the difference is what hedging adds.
//
//   - stormguard: grpcx.UnaryClientInterceptor (hedging is a shell's work:
//     the attempts run concurrently, the first to succeed wins), its
//     "stormguard" preset with Hedge {MaxAttempts 2, Delay 1h} against the
//     preset alone; the invoker answers at once into a proto reply, as the
//     hedged path needs one to copy the winner into;
//   - failsafe-go: failsafe.With(hedgepolicy.NewWithDelay(1h)).Get(fn)
//     against failsafe.With[any]().Get(fn), the executor without a policy.

type hedgeLib struct {
	name string
	call func(hedged bool) func() error
}

var hedgeLibs = []hedgeLib{
	{"stormguard", func(hedged bool) func() error {
		p := stormguardPolicy(false)
		if hedged {
			p.Hedge = &retry.HedgePolicy{MaxAttempts: 2, Delay: time.Hour}
		}
		icpt := grpcx.UnaryClientInterceptor(retry.MustNew(p))
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
		ctx := context.Background()
		req, reply := &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{}
		return func() error { return icpt(ctx, "/grpc.health.v1.Health/Check", req, reply, nil, invoker) }
	}},
	{"failsafe", func(hedged bool) func() error {
		ex := failsafe.With[any]()
		if hedged {
			ex = failsafe.With[any](hedgepolicy.NewWithDelay[any](time.Hour))
		}
		fn := func() (any, error) { return nil, nil }
		return func() error { _, err := ex.Get(fn); return err }
	}},
}

// BenchmarkHedgeUnneeded: one call whose first attempt succeeds at once,
// with and without the hedging policy.
func BenchmarkHedgeUnneeded(b *testing.B) {
	for _, l := range hedgeLibs {
		for _, hedged := range []bool{false, true} {
			name := l.name + "/plain"
			if hedged {
				name = l.name + "/hedged"
			}
			b.Run(name, func(b *testing.B) { timeCalls(b, l.call(hedged), false, nil) })
		}
	}
}
