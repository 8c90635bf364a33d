package sim_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/sim/scenario"
)

// TestLabAdmissionIsTheSimulators: for every shape of a service's
// admission (limiter or not, reject_at_limit, queue, min_remaining,
// supersede, a policy file's server block), the lab's gate is configured
// as the simulator's core: the same admit.Config (the simulator's without
// a bound on deadlines, which it does not model) and the same limit, and
// its workers take admitted requests from the same run queue.
func TestLabAdmissionIsTheSimulators(t *testing.T) {
	yes, no := true, false
	fixed3 := &limit.Spec{Kind: limit.KindFixed, Limit: 3}
	vegas := &limit.Spec{Kind: limit.KindVegas}
	fifo := scenario.QueueSpec{}.ShedConfig(0)
	server := &admit.Config{Limit: limit.Spec{Kind: limit.KindFixed, Limit: 2},
		Queue: shed.Config{Capacity: 10, Order: shed.LIFO}, RetryAfter: 2 * time.Second}
	rejecting := *server
	rejecting.RejectAtLimit = true
	tests := []struct {
		name string
		svc  scenario.Service // Name, Workers, ServiceTime are set below
		// want is the admission's configuration (nil: none of its own,
		// the workers are the limit); queue the run queue's.
		want    *admit.Config
		queue   shed.Config
		wantErr bool
	}{
		{name: "no limiter", want: nil, queue: fifo},
		{name: "no limiter, lifo queue", svc: scenario.Service{Queue: scenario.QueueSpec{Discipline: "lifo", Capacity: 7}},
			queue: shed.Config{Capacity: 7, Order: shed.LIFO, Priority: shed.NoPriority}},
		{name: "fixed limiter", svc: scenario.Service{Limiter: fixed3},
			want: &admit.Config{Limit: *fixed3, RejectAtLimit: true}, queue: fifo},
		{name: "vegas limiter, reject_at_limit true", svc: scenario.Service{Limiter: vegas, RejectAtLimit: &yes},
			want: &admit.Config{Limit: *vegas, RejectAtLimit: true}, queue: fifo},
		{name: "limiter and a first-tries queue", svc: scenario.Service{Limiter: fixed3,
			Queue: scenario.QueueSpec{Discipline: "first-tries-first", Capacity: 50}},
			want:  &admit.Config{Limit: *fixed3, RejectAtLimit: true},
			queue: shed.Config{Capacity: 50, Order: shed.FIFO, Priority: shed.FirstTries}},
		{name: "limiter, expired_drop, min_remaining", svc: scenario.Service{Limiter: fixed3, ExpiredDrop: true, MinRemaining: 20 * time.Millisecond},
			want:  &admit.Config{Limit: *fixed3, RejectAtLimit: true, MinRemaining: 20 * time.Millisecond},
			queue: scenario.QueueSpec{}.ShedConfig(20 * time.Millisecond)},
		{name: "limiter, defenses stormguard", svc: scenario.Service{Limiter: vegas, Defenses: "stormguard"},
			want:  &admit.Config{Limit: *vegas, RejectAtLimit: true},
			queue: scenario.QueueSpec{Discipline: "first-tries-adaptive-lifo"}.ShedConfig(0)},
		{name: "limiter and supersede", svc: scenario.Service{Limiter: fixed3, Supersede: &scenario.Supersede{Max: 100, TTL: time.Second}},
			want:  &admit.Config{Limit: *fixed3, RejectAtLimit: true, Supersede: &admit.SupersedeConfig{MaxKeys: 100, TTL: time.Second}},
			queue: fifo},
		{name: "server block that queues at its limit", svc: scenario.Service{ServerRef: scenario.ServerRef{Server: server}},
			want: server, queue: fifo},
		{name: "server block that rejects at its limit", svc: scenario.Service{ServerRef: scenario.ServerRef{Server: &rejecting}},
			want: &rejecting, queue: fifo},
		{name: "reject_at_limit false", svc: scenario.Service{Limiter: fixed3, RejectAtLimit: &no}, wantErr: true},
		{name: "reject_at_limit without a limiter", svc: scenario.Service{RejectAtLimit: &yes}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.svc
			v.Name, v.Workers, v.ServiceTime = "db", 4, scenario.Dist{Kind: "constant", Mean: 10 * time.Millisecond}
			sc := scenario.Scenario{Name: "shape", Duration: time.Second,
				Clients: []scenario.Client{{Name: "users", Target: "db", Arrivals: scenario.Arrivals{Kind: "poisson", Rate: 10},
					Timeout: 500 * time.Millisecond}},
				Services: []scenario.Service{v}}
			p, err := lab.NewPlan(sc)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NewPlan accepted it: admission %+v", p.Backend.Admission)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			simCfg, limited, err := sim.AdmissionOf(p.Scenario.Services[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Backend.Admission; limited != (got != nil) {
				t.Fatalf("the simulator's core has a limit: %v; the lab's admission of its own: %+v", limited, got)
			}
			if tt.want == nil {
				if limited {
					t.Errorf("the simulator's core has a limit, want none")
				}
			} else {
				// The simulator does not bound deadlines (admit.WithoutMaxTimeout)
				// for a service without a server block.
				sim := simCfg
				if v.Server == nil {
					if sim.MaxTimeout != math.MaxInt64 {
						t.Errorf("the simulator's max_timeout %v, want unbounded", sim.MaxTimeout)
					}
					sim.MaxTimeout = 0
				}
				if !reflect.DeepEqual(sim, *tt.want) {
					t.Errorf("simulator's admission\n got %+v\nwant %+v", sim, *tt.want)
				}
				if got := *p.Backend.Admission; !reflect.DeepEqual(got, sim) {
					t.Errorf("lab's admission\n got %+v\nwant the simulator's %+v", got, sim)
				}
			}
			if got := p.Backend.Queue; got != tt.queue {
				t.Errorf("lab's run queue %+v, want %+v", got, tt.queue)
			}
			if got := p.Backend.ExpiredDrop; got != p.Scenario.Services[0].ExpiredDrop {
				t.Errorf("lab's expired_drop %v, the simulator's %v", got, p.Scenario.Services[0].ExpiredDrop)
			}
		})
	}
}
