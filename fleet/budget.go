package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
)

// milliPerUnit: amounts are kept in thousandths, of a token (token bucket)
// or of a retry (window), like the budget package does.
const milliPerUnit = 1000

// Mode is how a [Budget] decides at a given moment. Export it as a gauge:
// [Mode.Fallback] is the one to alert on.
type Mode int32

// The modes of a Budget.
const (
	// ModeFleet: the budget is shared through Redis; retries are paid from
	// the local lease.
	ModeFleet Mode = iota + 1
	// ModeFallback: Redis could not be reached; the process decides alone,
	// with a local budget sized to its share of the fleet, and tries to
	// rejoin every RejoinInterval.
	ModeFallback
	// ModeClosed: [Budget.Close] was called; every retry is refused.
	ModeClosed
)

// String returns "fleet", "fallback" or "closed".
func (m Mode) String() string {
	switch m {
	case ModeFleet:
		return "fleet"
	case ModeFallback:
		return "fallback"
	case ModeClosed:
		return "closed"
	}
	return fmt.Sprintf("fleet.Mode(%d)", int32(m))
}

// Fallback reports whether the process decides alone because Redis cannot
// be reached (1 on a gauge, 0 otherwise).
func (m Mode) Fallback() bool { return m == ModeFallback }

// ErrSpecMismatch is returned by [New] when the key already holds a budget
// of another spec: every process sharing a key must use the same spec.
var ErrSpecMismatch = errors.New("fleet: the key holds a budget of another spec")

// Budget is a retry budget shared by every process that names the same key
// in the same Redis: a cost-based token bucket with refunds, or a ratio of
// retries to requests over a sliding window, with the rules of
// [budget.TokenBucket] and [budget.Window] applied to the whole fleet.
//
// A process keeps a lease at hand (LeaseSize tokens, or retries for a
// window) and pays retries from it with one atomic operation; one
// background goroutine refills the lease ahead of exhaustion and sends the
// successes and requests in batches, so a request never waits on Redis
// unless the lease runs dry while the pool still holds tokens, and then for
// MaxWait at most. When Redis cannot be reached the process falls back to a
// local budget sized to its share of the fleet (see [Mode]) and rejoins when
// Redis answers again; what it spent meanwhile is accounted for on rejoin.
//
// The fleet spends at most the capacity, the rewards and
// [Budget.LeaseSlack], through Redis restarts, flushes and failovers; the
// package documentation states the bound and what can exceed it. Budget implements [budget.Budget]: use it
// with retry.WithBudget. It is safe for concurrent use; RetryAt and EndAt
// allocate nothing while the lease holds. Build one with [New] and stop its
// goroutine with [Budget.Close].
type Budget struct {
	// Read-only after New.
	cfg         Config
	kind        budget.Kind
	cost        [3]int64         // milli-tokens, by cause
	tickets     [3]budget.Ticket // the ticket of a retry of each cause
	permit      budget.Ticket    // the ticket of a window retry in fleet mode
	maxCost     int64
	reward      int64
	refund      bool
	want        int64 // the lease size, in milli-units
	lowWater    int64 // refill below this
	flushCredit int64 // send the successes once they earned this much
	flushReqs   int64 // send the requests once there are this many
	renewEvery  time.Duration
	capacity    int64 // token bucket, milli-tokens
	ratioMicro  int64 // window
	floorMicro  int64 // window, per window
	widthUS     int64 // window slot width
	spec        string
	keys        []string
	script      *redis.Script
	rdb         redis.UniversalClient
	log         *slog.Logger

	// The hot path.
	mode     atomic.Int32
	hold     atomic.Int64 // milli-units at hand; may go negative (a debt)
	credit   atomic.Int64 // rewards earned in fleet mode, not yet sent
	reqs     atomic.Int64 // window requests in fleet mode, not yet sent
	fbCap    atomic.Int64 // token bucket level cap in fallback mode
	fbWin    atomic.Pointer[budget.Window]
	avail    atomic.Int64 // what the pool could still grant at the last sync
	learned  atomic.Int64 // live processes at the last sync
	kick     chan struct{}
	refilled atomic.Pointer[chan struct{}] // closed after each sync

	// Counters for Stats.
	roundTrips, failures, fallbacks, rejoins atomic.Uint64
	lastSync                                 atomic.Int64 // unix ns of the last successful sync

	// Owned by the background goroutine (by New before it starts).
	seq          int64
	gen          string
	seen         int64 // the version of gen at the last answer
	pending      *message
	borrowed     int64     // token bucket: taken from the pool's share on fallback, not yet settled
	borrowMark   time.Time // syncedAt when the process last borrowed
	borrowedFull bool      // borrowed a full share before ever reaching Redis
	fbReqs       int64     // window: counted during fallback, not yet sent
	fbRets       int64
	fails        int // consecutive failed round trips
	lastTry      time.Time
	syncedAt     time.Time
	done         chan struct{}
	stopped      chan struct{}
	closeOnce    sync.Once
	closeErr     error
}

var _ budget.Budget = (*Budget)(nil)

// failAfter is the number of consecutive failed round trips after which a
// process falls back (sooner when its lease is low).
const failAfter = 2

// New builds the budget of cfg over rdb, makes one round trip to join the
// fleet (bounded by cfg.Timeout and ctx) and starts the background
// goroutine. If Redis cannot be reached, New still returns a working
// budget, in [ModeFallback]; it fails only on an invalid Config, a nil
// client or [ErrSpecMismatch]. A budget new to Redis starts with an empty
// pool, which fills to the capacity after one LeaseTTL (see the package
// documentation: a state built again).
//
// rdb is shared, not owned: close it after [Budget.Close]. Build it with
// [ClientOptions] so that timeouts bound the socket reads.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Budget, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, invalidf("nil Redis client")
	}
	b := &Budget{
		cfg:     cfg,
		kind:    cfg.Spec.Kind,
		rdb:     rdb,
		log:     cfg.Logger.With("budget", cfg.Key, "id", cfg.ID),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	base := "stormguard:budget:{" + cfg.Key + "}"
	b.keys = []string{base, base + ":members", base + ":reclaimed"}
	b.setup()
	ch := make(chan struct{})
	b.refilled.Store(&ch)
	if c, ok := rdb.(*redis.Client); ok && !c.Options().ContextTimeoutEnabled {
		b.log.Warn("fleet budget: the Redis client ignores context deadlines (ContextTimeoutEnabled is false): a slow Redis is noticed only after its ReadTimeout; build it with fleet.ClientOptions")
	}

	if err := b.syncOnce(ctx); err != nil {
		if errors.Is(err, ErrSpecMismatch) {
			return nil, err
		}
		b.fails = failAfter
		b.enterFallback(err)
	} else {
		b.mode.Store(int32(ModeFleet))
	}
	go b.run()
	return b, nil
}

// setup derives the hot-path constants from the config.
func (b *Budget) setup() {
	s := b.cfg.Spec
	b.want = milli(b.cfg.LeaseSize)
	b.lowWater = b.want / 2
	b.renewEvery = b.cfg.LeaseTTL / 3
	b.flushReqs = int64(b.cfg.FlushEvery)
	switch b.kind {
	case budget.KindTokenBucket:
		b.script = bucketScript
		b.capacity = milli(s.Capacity)
		b.cost = [3]int64{milli(s.RetryCost), milli(s.ThrottleCost), milli(s.TimeoutCost)}
		b.maxCost = max(b.cost[0], b.cost[1], b.cost[2])
		b.reward = milli(s.SuccessReward)
		b.refund = !s.NoRefund
		b.flushCredit = int64(b.cfg.FlushEvery) * b.reward
		for c := range b.tickets {
			// The ticket of a retry carries its price in milli-tokens
			// (at most 10⁹: capacities are at most 10⁶ tokens).
			b.tickets[c] = budget.NewTicket(int32(b.cost[c]))
		}
		b.spec = fmt.Sprintf("token-bucket %d %d/%d/%d %d %t", b.capacity, b.cost[0], b.cost[1], b.cost[2], b.reward, b.refund)
	case budget.KindWindow:
		b.script = windowScript
		b.maxCost = milliPerUnit
		b.widthUS = s.Window.Microseconds() / 10
		b.ratioMicro = int64(math.Round(s.Ratio * 1e6))
		b.floorMicro = int64(math.Round(s.Floor * s.Window.Seconds() * 1e6))
		b.permit = budget.NewTicket(0)
		b.renewEvery = min(b.renewEvery, s.Window/10)
		b.spec = fmt.Sprintf("window %d %d %d", b.widthUS, b.ratioMicro, b.floorMicro)
	}
	b.avail.Store(math.MaxInt64)
}

// milli converts an amount to thousandths, as the budget package does.
func milli(v float64) int64 { return int64(math.Floor(v*milliPerUnit + 1e-6)) }

// BeginAt counts a request (window). The token bucket ignores it.
func (b *Budget) BeginAt(now time.Time) {
	if b.kind != budget.KindWindow {
		return
	}
	switch Mode(b.mode.Load()) {
	case ModeFleet:
		if b.reqs.Add(1) == b.flushReqs {
			b.poke()
		}
	case ModeFallback:
		if w := b.fbWin.Load(); w != nil {
			w.BeginAt(now)
		}
	}
}

// RetryAt grants a retry after cause c if the lease at hand can pay for it
// (its price by cause for a token bucket, one retry for a window), and
// charges it. If the lease cannot pay while the pool could, it waits up to
// MaxWait for the refill that it asks for. In fallback it asks the local
// budget. After Close it refuses every retry.
func (b *Budget) RetryAt(now time.Time, c budget.Cause) (budget.Ticket, bool) {
	m := Mode(b.mode.Load())
	if m == ModeClosed {
		return budget.Ticket{}, false
	}
	if b.kind == budget.KindWindow {
		if m == ModeFallback {
			if w := b.fbWin.Load(); w != nil {
				return w.RetryAt(now, c)
			}
			return budget.Ticket{}, false
		}
		if b.take(milliPerUnit) || (b.waitRefill(milliPerUnit) && b.take(milliPerUnit)) {
			return b.permit, true
		}
		return budget.Ticket{}, false
	}
	i := c
	if int(i) >= len(b.cost) {
		i = budget.Transient
	}
	cost := b.cost[i]
	if b.take(cost) || (m == ModeFleet && b.waitRefill(cost) && b.take(cost)) {
		return b.tickets[i], true
	}
	return budget.Ticket{}, false
}

// take pays cost from the lease, if it holds that much, and asks for a
// refill when the lease falls below its low-water mark.
func (b *Budget) take(cost int64) bool {
	for {
		cur := b.hold.Load()
		if cur < cost {
			return false
		}
		if b.hold.CompareAndSwap(cur, cur-cost) {
			if cur >= b.lowWater && cur-cost < b.lowWater {
				b.poke()
			}
			return true
		}
	}
}

// poke wakes the background goroutine without blocking.
func (b *Budget) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// waitRefill asks for a refill and waits up to MaxWait for the next round
// trip to end, if the pool could pay cost at the last look. It reports
// whether it waited.
func (b *Budget) waitRefill(cost int64) bool {
	if b.cfg.MaxWait <= 0 || b.avail.Load() < cost || Mode(b.mode.Load()) != ModeFleet {
		return false
	}
	ch := *b.refilled.Load()
	b.poke()
	t := time.NewTimer(b.cfg.MaxWait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
	return true
}

// EndAt records how an attempt ended. Token bucket: a first-try success
// earns the reward (sent to the pool in batches); a retry that succeeded
// (with refunds on) or ended in Ignore gets its price back into the lease.
// Window: a retry that ended in Ignore is given back. now is read only by
// the local window of fallback mode.
func (b *Budget) EndAt(now time.Time, o budget.Outcome, t budget.Ticket) {
	m := Mode(b.mode.Load())
	if m == ModeClosed {
		return
	}
	if b.kind == budget.KindWindow {
		if o != budget.Ignore || !t.Retry() {
			return
		}
		if m == ModeFallback {
			if w := b.fbWin.Load(); w != nil {
				w.EndAt(now, o, t)
			}
			return
		}
		b.hold.Add(milliPerUnit)
		return
	}
	switch {
	case !t.Retry():
		if o != budget.Success || b.reward == 0 {
			return
		}
		if m == ModeFleet {
			if n := b.credit.Add(b.reward); n >= b.flushCredit && n-b.reward < b.flushCredit {
				b.poke()
			}
			return
		}
		b.addCapped(b.reward)
	case o == budget.Ignore || (o == budget.Success && b.refund):
		cost := b.costOf(t)
		if m == ModeFleet {
			b.hold.Add(cost)
			return
		}
		b.addCapped(cost)
	}
}

// costOf returns the price a retry's ticket paid, in milli-tokens (0 for a
// first attempt's ticket or a window's permit).
func (b *Budget) costOf(t budget.Ticket) int64 {
	if !t.Retry() {
		return 0
	}
	return int64(t.Data())
}

// addCapped adds n to the lease, up to the fallback cap (fallback mode).
func (b *Budget) addCapped(n int64) {
	limit := b.fbCap.Load()
	for {
		cur := b.hold.Load()
		if cur >= limit {
			return
		}
		if b.hold.CompareAndSwap(cur, min(cur+n, limit)) {
			return
		}
	}
}

// NeedsClock reports whether the budget reads the time it is given: true
// for a window (its local fallback does), false for a token bucket.
func (b *Budget) NeedsClock() bool { return b.kind == budget.KindWindow }

// Mode returns the budget's mode now.
func (b *Budget) Mode() Mode { return Mode(b.mode.Load()) }

// Fallback reports whether the budget has fallen back to this process's
// local share because Redis is unreachable or slow: the metrics package
// exports it as stormguard_client_retry_budget_fallback.
func (b *Budget) Fallback() bool { return b.Mode().Fallback() }

// FleetSize returns the number of processes the budget counts on: the
// larger of Config.FleetSize and the most live processes Redis saw over
// the last ten lease TTLs, as of the last round trip (a count that a
// process keeps when Redis loses the state, and tells the state built
// again), at least 1.
func (b *Budget) FleetSize() int {
	return int(max(int64(b.cfg.FleetSize), b.learned.Load(), 1))
}

// LeaseSlack returns the most the fleet can exceed the budget by, in
// tokens (token bucket) or retries (window):
//
//	FleetSize × 2 × LeaseSize
//
// Each process can be the cause of up to two leases' worth: what it holds
// when it dies or is cut off (Redis hands a dead process's lease back
// after LeaseTTL, even the part it spent since its last round trip), and
// what it borrows from its share of the pool when it falls back (at most
// one lease). The fleet spends at most capacity + rewards + LeaseSlack,
// through Redis restarts, flushes and failovers; the package documentation
// states the bound and what can exceed it.
func (b *Budget) LeaseSlack() float64 {
	return float64(int64(b.FleetSize())*2*b.want) / milliPerUnit
}

// Stats is a snapshot of a Budget's counters and state, for metrics.
type Stats struct {
	Mode       Mode      // the mode now
	Hold       float64   // tokens (token bucket) or retries (window) at hand in this process
	Pool       float64   // what the fleet could still grant at the last round trip: tokens in the pool, or retries the window still allows
	FleetSize  int       // see [Budget.FleetSize]
	RoundTrips uint64    // scripts sent to Redis, failed ones included
	Failures   uint64    // round trips that failed
	Fallbacks  uint64    // switches to fallback mode
	Rejoins    uint64    // switches back to fleet mode
	LastSync   time.Time // end of the last successful round trip; zero if none
}

// Stats returns the budget's counters and state now.
func (b *Budget) Stats() Stats {
	s := Stats{
		Mode:       b.Mode(),
		Hold:       float64(b.hold.Load()) / milliPerUnit,
		FleetSize:  b.FleetSize(),
		RoundTrips: b.roundTrips.Load(),
		Failures:   b.failures.Load(),
		Fallbacks:  b.fallbacks.Load(),
		Rejoins:    b.rejoins.Load(),
	}
	if a := b.avail.Load(); a != math.MaxInt64 {
		s.Pool = float64(a) / milliPerUnit
	}
	if ns := b.lastSync.Load(); ns != 0 {
		s.LastSync = time.Unix(0, ns)
	}
	return s
}

// Close stops the background goroutine, sends what is still pending and
// hands the lease back to the pool (one round trip bounded by Timeout; if
// Redis cannot be reached, the lease goes back when it expires). Then every
// retry is refused. Close is idempotent; it returns the error of the last
// round trip, if it failed.
func (b *Budget) Close() error {
	b.closeOnce.Do(func() {
		close(b.done)
		<-b.stopped
	})
	return b.closeErr
}
