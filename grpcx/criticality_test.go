package grpcx_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// The gRPC twin of httpx's TestServerCriticalityTrust: one slot held by
// "busy", "queued" (no criticality) waits, then "vip" claims critical-plus
// in stormguard-criticality. Only a believed claim is served first or
// evicts "queued" (issue 15, point 3).
func TestServerCriticalityTrust(t *testing.T) {
	internal := func(ctx context.Context, _ string) bool {
		md, _ := metadata.FromIncomingContext(ctx)
		return slices.Equal(md.Get("x-internal"), []string{"yes"})
	}
	tests := []struct {
		name        string
		maxCrit     wire.Criticality
		trust       func(context.Context, string) bool
		vipMD       []string // beside the criticality
		capacity    int
		wantOrder   []string
		wantShed    string // refused with UNAVAILABLE; "" for none
		wantEvicted uint64
		wantVIPCrit wire.Criticality
		wantAsked   int
	}{
		{"default: not believed, queue full", wire.Critical, nil, nil, 1,
			[]string{"busy", "queued"}, "vip", 0, 0, 0},
		{"default: not believed, queue room", wire.Critical, nil, nil, 2,
			[]string{"busy", "queued", "vip"}, "", 0, wire.Critical, 0},
		{"hook says no", wire.Critical, internal, nil, 1,
			[]string{"busy", "queued"}, "vip", 0, 0, 1},
		{"hook says yes: evicts", wire.Critical, internal, []string{"x-internal", "yes"}, 1,
			[]string{"busy", "vip"}, "queued", 1, wire.CriticalPlus, 1},
		{"hook says yes: served first", wire.Critical, internal, []string{"x-internal", "yes"}, 2,
			[]string{"busy", "vip", "queued"}, "", 0, wire.CriticalPlus, 1},
		{"every caller trusted", wire.CriticalPlus, nil, nil, 1,
			[]string{"busy", "vip"}, "queued", 1, wire.CriticalPlus, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			release := make(chan struct{})
			var mu sync.Mutex
			var order []string
			var vipCrit wire.Criticality
			asked := 0
			trust := tt.trust
			if trust != nil {
				trust = func(ctx context.Context, m string) bool {
					mu.Lock()
					asked++
					mu.Unlock()
					return tt.trust(ctx, m)
				}
			}
			b, sg := guarded(t, grpcx.ServerConfig{
				Config: admit.Config{
					Limit:          limit.Spec{Kind: limit.KindFixed, Limit: 1},
					Queue:          shed.Config{Capacity: tt.capacity, Priority: shed.ByCriticality},
					MaxCriticality: tt.maxCrit,
				},
				TrustCriticality: trust,
			}, step{fn: func(ctx context.Context) error {
				md, _ := metadata.FromIncomingContext(ctx)
				name := md.Get("x-name")[0]
				mu.Lock()
				order = append(order, name)
				if name == "vip" {
					vipCrit = deadline.Criticality(ctx)
				}
				mu.Unlock()
				if name == "busy" {
					<-release
				}
				return nil
			}})
			c := dial(t, b.addr)
			results := make(map[string]result)
			var wg sync.WaitGroup
			send := func(name string, kv ...string) {
				ctx := metadata.AppendToOutgoingContext(context.Background(), append([]string{"x-name", name}, kv...)...)
				wg.Go(func() {
					res := rawCheck(ctx, c, "")
					mu.Lock()
					results[name] = res
					mu.Unlock()
				})
			}
			send("busy")
			waitFor(t, "busy to hold the slot", func() bool { return sg.Stats().InFlight == 1 })
			send("queued")
			waitFor(t, "queued to wait", func() bool { return sg.Stats().Queued == 1 })
			send("vip", append([]string{"stormguard-criticality", "critical-plus"}, tt.vipMD...)...)
			waitFor(t, "vip to queue or be refused", func() bool {
				st := sg.Stats()
				return st.Queued == 2 || st.ShedTotal() == 1
			})
			close(release)
			wg.Wait()

			if !slices.Equal(order, tt.wantOrder) {
				t.Errorf("served %q; want %q", order, tt.wantOrder)
			}
			for name, res := range results {
				want := codes.OK
				if name == tt.wantShed {
					want = codes.Unavailable
				}
				if got := status.Code(res.err); got != want {
					t.Errorf("%s: %v; want %v", name, res.err, want)
				}
			}
			st := sg.Stats()
			if got := st.Shed[grpcx.ShedEvicted]; got != tt.wantEvicted {
				t.Errorf("evicted %d; want %d", got, tt.wantEvicted)
			}
			if tt.wantShed == "vip" && st.Shed[grpcx.ShedQueueFull] != 1 {
				t.Errorf("shed %v; want vip refused as queue-full", st.Shed)
			}
			if slices.Contains(tt.wantOrder, "vip") && vipCrit != tt.wantVIPCrit {
				t.Errorf("vip's handler saw criticality %v; want %v", vipCrit, tt.wantVIPCrit)
			}
			if asked != tt.wantAsked {
				t.Errorf("trust hook asked %d times; want %d (only for claims above the cap)", asked, tt.wantAsked)
			}
		})
	}
}
