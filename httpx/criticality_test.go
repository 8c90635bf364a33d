package httpx_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// waitUntil polls cond until it holds, failing the test after a bound
// scaled with the host's slowness.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(hostspeed.Scale(5 * time.Second)); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A caller's Stormguard-Criticality buys priority only if the server
// believes it. One slot, held by "busy"; "queued" (no criticality) waits;
// then "vip" arrives claiming critical-plus. Believed, it is served before
// "queued" and, when the queue is full, evicts it (503); not believed (the
// default, or a TrustCriticality hook that says no), it ranks as critical,
// beside "queued", and waits its turn or is refused itself (issue 15,
// point 3: any client could evict the queued requests of everyone else).
func TestServerCriticalityTrust(t *testing.T) {
	internal := func(r *http.Request) bool { return r.Header.Get("X-Internal") == "yes" }
	tests := []struct {
		name     string
		maxCrit  wire.Criticality
		trust    func(*http.Request) bool
		vipHdr   map[string]string // beside the criticality
		capacity int
		// wantOrder: the requests served, in order; wantShed: the one
		// refused with 503 ("" for none); wantVIPCrit: the criticality
		// vip's handler saw.
		wantOrder   []string
		wantShed    string
		wantEvicted uint64
		wantVIPCrit wire.Criticality
		wantAsked   int // calls of the trust hook
	}{
		{"default: not believed, queue full", wire.Critical, nil, nil, 1,
			[]string{"busy", "queued"}, "vip", 0, 0, 0},
		{"default: not believed, queue room", wire.Critical, nil, nil, 2,
			[]string{"busy", "queued", "vip"}, "", 0, wire.Critical, 0},
		{"hook says no", wire.Critical, internal, nil, 1,
			[]string{"busy", "queued"}, "vip", 0, 0, 1},
		{"max sheddable: everyone alike", wire.Sheddable, nil, nil, 2,
			[]string{"busy", "queued", "vip"}, "", 0, wire.Sheddable, 0},
		{"hook says yes: evicts", wire.Critical, internal, map[string]string{"X-Internal": "yes"}, 1,
			[]string{"busy", "vip"}, "queued", 1, wire.CriticalPlus, 1},
		{"hook says yes: served first", wire.Critical, internal, map[string]string{"X-Internal": "yes"}, 2,
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
				trust = func(r *http.Request) bool {
					mu.Lock()
					asked++
					mu.Unlock()
					return tt.trust(r)
				}
			}
			gs := startGuarded(t, httpx.ServerConfig{
				Config: admit.Config{
					Limit:          fixed(1),
					Queue:          shed.Config{Capacity: tt.capacity, Priority: shed.ByCriticality},
					MaxCriticality: tt.maxCrit,
				},
				TrustCriticality: trust,
			}, func(w http.ResponseWriter, r *http.Request) {
				name := r.Header.Get("X-Name")
				mu.Lock()
				order = append(order, name)
				if name == "vip" {
					vipCrit = deadline.Criticality(r.Context())
				}
				mu.Unlock()
				if name == "busy" {
					<-release
				}
			})
			c := plainClient(t, 4)
			answers := make(map[string]answer)
			var wg sync.WaitGroup
			send := func(name string, hdr map[string]string) {
				h := map[string]string{"X-Name": name}
				for k, v := range hdr {
					h[k] = v
				}
				wg.Go(func() {
					a := call(c, context.Background(), gs.URL, h)
					mu.Lock()
					answers[name] = a
					mu.Unlock()
				})
			}
			send("busy", nil)
			waitUntil(t, "busy to hold the slot", func() bool { return gs.sg.Stats().InFlight == 1 })
			send("queued", nil)
			waitUntil(t, "queued to wait", func() bool { return gs.sg.Stats().Queued == 1 })
			vip := map[string]string{wire.HeaderCriticality: "critical-plus"}
			for k, v := range tt.vipHdr {
				vip[k] = v
			}
			send("vip", vip)
			waitUntil(t, "vip to queue or be refused", func() bool {
				st := gs.sg.Stats()
				return st.Queued == 2 || st.ShedTotal() == 1
			})
			close(release)
			wg.Wait()

			if !slices.Equal(order, tt.wantOrder) {
				t.Errorf("served %q; want %q", order, tt.wantOrder)
			}
			for name, a := range answers {
				want := 200
				if name == tt.wantShed {
					want = 503
				}
				if a.status != want {
					t.Errorf("%s: status %d (%v); want %d", name, a.status, a.err, want)
				}
			}
			st := gs.sg.Stats()
			if got := st.Shed[httpx.ShedEvicted]; got != tt.wantEvicted {
				t.Errorf("evicted %d; want %d", got, tt.wantEvicted)
			}
			if tt.wantShed == "vip" && st.Shed[httpx.ShedQueueFull] != 1 {
				t.Errorf("shed %v; want vip refused as queue-full", st.Shed)
			}
			if slices.Contains(tt.wantOrder, "vip") && vipCrit != tt.wantVIPCrit {
				t.Errorf("vip's handler saw criticality %v; want %v", vipCrit, tt.wantVIPCrit)
			}
			if asked != tt.wantAsked {
				t.Errorf("trust hook asked %d times; want %d (only for claims above the cap)", asked, tt.wantAsked)
			}
			checkBooks(t, st)
		})
	}
}
