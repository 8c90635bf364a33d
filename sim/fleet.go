package sim

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/sim/engine"
)

// FleetSpec makes a client's processes share one retry budget, as the fleet
// package does on Redis, instead of one budget each. The policy's budget
// (a token bucket) becomes the fleet's: one pool of its capacity, held by a
// store Sync away from every process. Each process spends from a local lease
// of at most Lease tokens; when its lease falls below half, or its unsent
// rewards reach half a lease, it sends its rewards and asks for a top-up,
// which the store grants from the pool (never more than the pool holds) and
// which arrives Sync later. A process with too small a lease refuses the
// retry at once: it never waits for the store. Processes join with an empty
// lease. The store never leases out more than the capacity: pool + Σ leases
// ≤ capacity, so the fleet can spend at most the capacity plus what it earns.
type FleetSpec struct {
	// Sync is the one-way delay between a process and the store [5ms].
	Sync time.Duration `yaml:"sync,omitempty" json:"sync_ns"`
	// Lease is the most tokens a process holds [2 × the largest retry cost].
	Lease float64 `yaml:"lease,omitempty" json:"lease,omitempty"`
}

func (f *FleetSpec) validate(p budget.Spec) error {
	if p.Kind != budget.KindTokenBucket {
		return fmt.Errorf("fleet: the policy's budget must be a token-bucket (the simulator models the fleet's token bucket), got %q", p.Kind)
	}
	if f.Sync < 0 || f.Lease < 0 {
		return fmt.Errorf("fleet: sync and lease must not be negative")
	}
	return nil
}

// fleetPool is the store's side of a fleet budget. The store knows what it
// leased out: pool + Σ leased never exceeds the capacity, so rewards refill
// the pool only up to the capacity less the outstanding leases.
type fleetPool struct {
	capacity, pool float64
	procs          []*leaseBudget
}

// leased is what the store believes the processes hold.
func (f *fleetPool) leased() float64 {
	var sum float64
	for _, p := range f.procs {
		sum += p.known
	}
	return sum
}

// level is the fleet's fill: the pool plus every lease, over the capacity.
func (f *fleetPool) level() float64 {
	sum := f.pool
	for _, p := range f.procs {
		sum += p.hold
	}
	return sum / f.capacity
}

// leaseBudget is one process's side: a budget.Budget the retrier charges.
type leaseBudget struct {
	w            *world
	fleet        *fleetPool
	client, proc int32
	sync         time.Duration
	lease        float64
	cost         [3]float64
	reward       float64
	refund       bool
	hold, unsent float64
	inflight     bool
	requestedAt  float64 // hold when the top-up was asked for
	known        float64 // the store's view of hold: reported at the last sync, plus the grant
}

func newFleet(w *world, ci int32, procs int, spec budget.Spec, f FleetSpec) *fleetPool {
	s := spec.WithDefaults()
	if f.Sync == 0 {
		f.Sync = 5 * time.Millisecond
	}
	maxCost := max(s.RetryCost, s.ThrottleCost, s.TimeoutCost)
	if f.Lease == 0 {
		f.Lease = 2 * maxCost
	}
	fp := &fleetPool{capacity: s.Capacity, pool: s.Capacity}
	for i := range procs {
		l := &leaseBudget{w: w, fleet: fp, client: ci, proc: int32(i), sync: f.Sync, lease: f.Lease,
			cost:   [3]float64{budget.Transient: s.RetryCost, budget.Throttling: s.ThrottleCost, budget.Timeout: s.TimeoutCost},
			reward: s.SuccessReward, refund: !s.NoRefund}
		// Processes join with an empty lease and lease on demand: the
		// pool goes to whoever needs it first, never in shares too small
		// to pay for a retry.
		fp.procs = append(fp.procs, l)
	}
	return fp
}

// BeginAt does nothing: a first attempt costs nothing.
func (l *leaseBudget) BeginAt(time.Time) {}

// RetryAt spends from the local lease, never waiting for the store.
func (l *leaseBudget) RetryAt(_ time.Time, c budget.Cause) (budget.Ticket, bool) {
	cost := l.cost[c]
	if l.hold < cost {
		l.maybeSync()
		return budget.Ticket{}, false
	}
	l.hold -= cost
	l.maybeSync()
	return budget.NewTicket(int32(cost * 1000)), true
}

// EndAt collects rewards (sent with the next sync) and refunds (kept).
func (l *leaseBudget) EndAt(_ time.Time, o budget.Outcome, t budget.Ticket) {
	switch {
	case !t.Retry() && o == budget.Success:
		l.unsent += l.reward
	case t.Retry() && (o == budget.Ignore || o == budget.Success && l.refund):
		l.hold += float64(t.Data()) / 1000
	}
	l.maybeSync()
}

// NeedsClock reports false: the lease counts tokens.
func (l *leaseBudget) NeedsClock() bool { return false }

func (l *leaseBudget) maybeSync() {
	if l.inflight || (l.hold >= l.lease/2 && l.unsent < l.lease/2) {
		return
	}
	l.inflight = true
	l.requestedAt = l.hold
	w := l.w
	w.eng.After(l.sync, engine.Event{Kind: evFleetSync, Target: uint32(l.client), A: int64(l.proc), B: int64(l.unsent * 1000)})
	l.unsent = 0
}

// onFleetSync: a process's request reaches the store.
func (w *world) onFleetSync(ci int32, pi int64, rewardMilli int64) {
	f := w.clients[ci].fleet
	l := f.procs[pi]
	l.known = l.requestedAt
	f.pool = min(f.capacity-f.leased(), f.pool+float64(rewardMilli)/1000)
	grant := min(max(0, l.lease-l.requestedAt), f.pool)
	f.pool -= grant
	l.known += grant
	w.eng.After(l.sync, engine.Event{Kind: evFleetGrant, Target: uint32(ci), A: pi, B: int64(grant * 1000)})
}

// onFleetGrant: the store's grant reaches the process.
func (w *world) onFleetGrant(ci int32, pi int64, grantMilli int64) {
	l := w.clients[ci].fleet.procs[pi]
	l.hold += float64(grantMilli) / 1000
	l.inflight = false
	if grantMilli > 0 {
		// An empty pool is asked again only when the process next needs
		// it (a refused retry, or rewards to send), not in a loop.
		l.maybeSync()
	}
}
