package scenario

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet/alloc"
)

// FleetSpec makes a client's processes share one retry budget, as package
// fleet does on Redis, instead of one budget each. The policy's budget (a
// token bucket) becomes the fleet's, and the simulator runs the fleet's own
// cores: the store applies package alloc's allocation rule (alloc.Step, the
// rule the Lua script runs in Redis), each process package alloc's client
// (alloc.Client: when to ask, what for, when to send its earnings), with
// the defaults of package fleet (a lease of max(2 × the dearest retry, a
// tenth of the capacity), lease TTL 2 s, heartbeat 10 s). A message takes
// Sync to reach the store and Sync to come back.
//
// One approximation: a retry that finds its process holding too little
// waits for a grant in package fleet (up to MaxWait, 20 ms by default, for
// one round trip). The simulator decides it at once, as if the round trip
// took no time, when no message of the process is in flight; when one is,
// the retry is refused (the real one would wait up to 2 × Sync for its
// answer).
type FleetSpec struct {
	// Sync is the one-way delay between a process and the store [5ms].
	Sync time.Duration `yaml:"sync,omitempty" json:"sync_ns"`
	// Lease is the most a busy process asks for beyond its need, in tokens
	// [package fleet's default].
	Lease float64 `yaml:"lease,omitempty" json:"lease,omitempty"`
	// RoundTrips is how many round trips a second the processes that wait
	// for the pool make together [1000].
	RoundTrips int `yaml:"round_trips,omitempty" json:"round_trips,omitempty"`
}

func (f *FleetSpec) validate(p budget.Spec) error {
	if p.Kind != budget.KindTokenBucket {
		return fmt.Errorf("fleet: the policy's budget must be a token-bucket (the simulator models the fleet's token bucket), got %q", p.Kind)
	}
	if f.Sync < 0 || f.Lease < 0 || f.RoundTrips < 0 {
		return fmt.Errorf("fleet: sync, lease and round_trips must not be negative")
	}
	am, err := alloc.FromSpec(p)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if alloc.Milli(f.Lease) > am.Capacity {
		return fmt.Errorf("fleet: lease %g exceeds the budget's capacity %g", f.Lease, float64(am.Capacity)/alloc.Unit)
	}
	return nil
}
