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
	"github.com/stormguard/stormguard/fleet/alloc"
)

// Mode is how a [Budget] decides at a given moment. Export it as a gauge:
// [Mode.Fallback] is the one to alert on.
type Mode int32

// The modes of a Budget.
const (
	// ModeFleet: the budget is shared through Redis.
	ModeFleet Mode = iota + 1
	// ModeFallback: Redis could not be reached; the process decides alone,
	// spending what it holds and what it earns (see the package
	// documentation), and tries to rejoin every RejoinInterval.
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
// of another spec that live processes use: every process sharing a key must
// use the same spec.
var ErrSpecMismatch = errors.New("fleet: the key holds a budget of another spec")

// Budget is a retry budget shared by every process that names the same key
// in the same Redis: a cost-based token bucket with refunds, or a ratio of
// retries to requests over a sliding window, with the rules of
// [budget.TokenBucket] and [budget.Window] applied to the whole fleet.
//
// A process holds tokens only while it retries: a retry is paid from what
// the process was granted, with one atomic operation; when that is too
// little, RetryAt waits up to MaxWait for a grant, unless Redis said the
// pool is empty (then it refuses at once). One background goroutine sends
// what the process earned and asks for what it needs (see the package
// documentation for the protocol). When Redis cannot be reached the
// process falls back to what it holds and what it earns (see [Mode]) and
// rejoins when Redis answers again.
//
// Budget implements [budget.Budget]: use it with retry.WithBudget. It is safe
// for concurrent use; RetryAt and EndAt allocate nothing while the process
// holds enough. Build one with [New] and stop its goroutine with
// [Budget.Close].
type Budget struct {
	// Read-only after New.
	cfg     Config
	am      alloc.Amounts
	params  alloc.Params
	tickets [3]budget.Ticket // the ticket of a retry of each cause
	permit  budget.Ticket    // the ticket of a window retry in fleet mode
	keys    []string
	rdb     redis.UniversalClient
	log     *slog.Logger
	epoch   time.Time // the origin of the core's clock (monotonic)

	// The hot path.
	mode     atomic.Int32
	hold     atomic.Int64 // milli-units at hand; in fallback, the local bucket's level
	credit   atomic.Int64 // earned, not yet sent (milli-tokens; a window's: requests)
	back     atomic.Int64 // token bucket: refunds and unspent leases, not yet sent
	waiting  atomic.Int64 // milli-units of retries waiting for a grant
	asked    atomic.Int64 // milli-units of retries asked for, granted or not
	lowWater atomic.Int64 // poke the goroutine when the hold falls below this
	flushAt  atomic.Int64 // poke it when the credit reaches this
	backAt   atomic.Int64 // poke it when back reaches this
	backoff  atomic.Int64 // until then (core clock, ns), a retry that needs a grant is refused at once
	fbCap    atomic.Int64 // token bucket in fallback: the local level's cap
	fbWin    atomic.Pointer[budget.Window]
	kick     chan struct{}
	answered atomic.Pointer[chan struct{}] // closed after each round trip
	// built numbers the messages roundTrip builds; answeredFor is the
	// number of the last one answered.
	built, answeredFor atomic.Int64

	// Counters for Stats.
	roundTrips, failures, fallbacks, rejoins atomic.Uint64
	refused                                  [refusedWhy]atomic.Uint64
	lastSync                                 atomic.Int64 // unix ns of the last successful round trip
	live, avail                              atomic.Int64 // at the last answer
	expired                                  atomic.Int64 // credit of messages dropped unanswered
	capped                                   atomic.Int64 // credit lost because the pool was full at the last answer

	// Owned by the background goroutine (by New before it starts).
	core      *alloc.Client
	fails     int // consecutive failed round trips
	lastTry   time.Time
	done      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ budget.Budget = (*Budget)(nil)

// failAfter is the number of consecutive failed round trips after which a
// process falls back (sooner when a retry waits).
const failAfter = 2

// New builds the budget of cfg over rdb, makes one round trip to join the
// fleet (bounded by cfg.Timeout and ctx) and starts the background
// goroutine. If Redis cannot be reached, New still returns a working
// budget, in [ModeFallback]; it fails only on an invalid Config, a nil
// client or [ErrSpecMismatch]. A budget new to Redis starts with an empty
// pool, which the fleet's first-try successes fill (see the package
// documentation).
//
// rdb is shared, not owned: close it after [Budget.Close]. Build it with
// [ClientOptions] so that timeouts bound the socket reads.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Budget, error) {
	cfg, am, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, invalidf("nil Redis client")
	}
	b := &Budget{
		cfg:     cfg,
		am:      am,
		rdb:     rdb,
		log:     cfg.Logger.With("budget", cfg.Key, "id", cfg.ID),
		epoch:   time.Now(),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	b.keys = budgetKeys(cfg.Key)
	b.params = am.Params(int64(cfg.RoundTrips), cfg.Heartbeat)
	b.core, err = alloc.NewClient(am.ClientConfig(cfg.ID, alloc.Milli(cfg.LeaseSize), cfg.LeaseTTL, cfg.Heartbeat, int64(cfg.RoundTrips)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	for c := range b.tickets {
		// The ticket of a retry carries its price in milli-tokens (at most
		// 10⁹: capacities are at most 10⁶ tokens).
		b.tickets[c] = budget.NewTicket(int32(am.Cost[c]))
	}
	b.permit = budget.NewTicket(0)
	b.lowWater.Store(math.MinInt64)
	b.flushAt.Store(math.MaxInt64)
	b.backAt.Store(math.MaxInt64)
	b.avail.Store(-1)
	ch := make(chan struct{})
	b.answered.Store(&ch)
	if c, ok := rdb.(*redis.Client); ok && !c.Options().ContextTimeoutEnabled {
		b.log.Warn("fleet budget: the Redis client ignores context deadlines (ContextTimeoutEnabled is false): a slow Redis is noticed only after its ReadTimeout; build it with fleet.ClientOptions")
	}

	b.mode.Store(int32(ModeFleet))
	if err := b.roundTrip(ctx, b.now()); err != nil {
		if errors.Is(err, ErrSpecMismatch) {
			return nil, err
		}
		b.fails = failAfter
		b.enterFallback(err)
	}
	go b.run()
	return b, nil
}

// budgetKeys returns the Redis keys of the budget called key.
func budgetKeys(key string) []string {
	base := "stormguard:budget:{" + key + "}"
	return []string{base, base + ":members", base + ":waiting"}
}

// now is the core's clock: nanoseconds since New, monotonic.
func (b *Budget) now() int64 { return int64(time.Since(b.epoch)) }

// BeginAt counts a request (window). The token bucket ignores it.
func (b *Budget) BeginAt(now time.Time) {
	if b.am.Kind != alloc.Window {
		return
	}
	switch Mode(b.mode.Load()) {
	case ModeFleet:
		if n := b.credit.Add(1); n == b.flushAt.Load() {
			b.poke()
		}
	case ModeFallback:
		if w := b.fbWin.Load(); w != nil {
			w.BeginAt(now)
		}
	}
}

// RetryAt grants a retry after cause c if what the process holds can pay
// for it (its price by cause for a token bucket, one retry for a window),
// and charges it. Otherwise, in fleet mode, it waits up to MaxWait for a
// grant, unless Redis told the process to wait (the pool was empty). In
// fallback it asks the local budget. After Close it refuses every retry.
func (b *Budget) RetryAt(now time.Time, c budget.Cause) (budget.Ticket, bool) {
	m := Mode(b.mode.Load())
	if m == ModeClosed {
		return budget.Ticket{}, false
	}
	if b.am.Kind == alloc.Window && m == ModeFallback {
		if w := b.fbWin.Load(); w != nil {
			return w.RetryAt(now, c)
		}
		return budget.Ticket{}, false
	}
	i := c
	if int(i) >= len(b.am.Cost) {
		i = budget.Transient
	}
	cost, t := b.am.Cost[i], b.tickets[i]
	if b.am.Kind == alloc.Window {
		cost, t = alloc.Unit, b.permit
	}
	if m == ModeFleet {
		b.asked.Add(cost)
	}
	if b.take(cost) {
		return t, true
	}
	if m != ModeFleet {
		b.refused[refusedFallback].Add(1)
		return budget.Ticket{}, false
	}
	why := b.wait(cost)
	if why == refusedShort && b.take(cost) {
		return t, true
	}
	b.refused[why].Add(1)
	return budget.Ticket{}, false
}

// Why a retry was refused.
const (
	refusedBackoff  = iota // Redis told the process to wait, longer than MaxWait
	refusedSlow            // no answer within MaxWait
	refusedShort           // an answer, and still too little at hand: the pool was short
	refusedFallback        // in fallback, too little earned
	refusedWhy
)

// take pays cost from the hold, if it holds that much, and pokes the
// goroutine when the hold falls below its low-water mark.
func (b *Budget) take(cost int64) bool {
	for {
		cur := b.hold.Load()
		if cur < cost {
			return false
		}
		if b.hold.CompareAndSwap(cur, cur-cost) {
			if lw := b.lowWater.Load(); cur >= lw && cur-cost < lw {
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

// wait asks for a grant of cost and waits for the next answer, at most
// MaxWait in all. A process told to wait before asking again waits that
// out first if it ends within MaxWait, and refuses at once otherwise. It
// returns refusedShort when an answer came (the caller tries to take
// again), else why it did not.
func (b *Budget) wait(cost int64) int {
	if b.cfg.MaxWait <= 0 {
		return refusedSlow
	}
	deadline := time.Now().Add(b.cfg.MaxWait)
	if d := time.Duration(b.backoff.Load() - b.now()); d > 0 {
		if d >= b.cfg.MaxWait {
			return refusedBackoff
		}
		time.Sleep(d)
	}
	ch := *b.answered.Load()
	b.waiting.Add(cost)
	defer b.waiting.Add(-cost)
	// A message built before the need was registered may be in flight: its
	// answer does not answer this retry, which waits for one numbered above
	// since (it refused retries with the pool full: 4 of 150 runs of
	// TestRetryWaitsForAGrant under -race on a busy host).
	since := b.built.Load()
	b.poke()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		select {
		case <-ch:
			if b.answeredFor.Load() > since || Mode(b.mode.Load()) != ModeFleet {
				return refusedShort
			}
			if b.hold.Load() >= cost {
				return refusedShort // the caller takes it
			}
			ch = *b.answered.Load()
			if b.answeredFor.Load() > since {
				return refusedShort
			}
		case <-t.C:
			return refusedSlow
		}
	}
}

// EndAt records how an attempt ended. Token bucket: a first-try success
// earns the reward; a retry that succeeded (with refunds on) or ended in
// Ignore gets its price back: into the lease of a process that retries
// often, else sent to the pool with the next message; in fallback, kept. Window: a retry that ended in Ignore is given back to the
// hold. now is read only by the local window of fallback mode.
func (b *Budget) EndAt(now time.Time, o budget.Outcome, t budget.Ticket) {
	m := Mode(b.mode.Load())
	if m == ModeClosed {
		return
	}
	if b.am.Kind == alloc.Window {
		if o != budget.Ignore || !t.Retry() {
			return
		}
		if m == ModeFallback {
			if w := b.fbWin.Load(); w != nil {
				w.EndAt(now, o, t)
			}
			return
		}
		b.hold.Add(alloc.Unit)
		return
	}
	var n int64
	to, at := &b.credit, &b.flushAt
	switch {
	case !t.Retry():
		if o != budget.Success {
			return
		}
		n = b.am.Reward
	case o == budget.Ignore || (o == budget.Success && b.am.Refund):
		n = int64(t.Data())
		to, at = &b.back, &b.backAt
		if m == ModeFleet && b.lowWater.Load() != math.MinInt64 {
			// A busy process keeps the refund in its lease (it retries
			// again soon); an idle one gives it back with its next
			// message.
			b.hold.Add(n)
			return
		}
	default:
		return
	}
	if n <= 0 {
		return
	}
	if m == ModeFallback {
		b.addCapped(n)
		return
	}
	if f := at.Load(); f != math.MaxInt64 {
		if c := to.Add(n); c >= f && c-n < f {
			b.poke()
		}
		return
	}
	to.Add(n)
}

// addCapped adds n to the hold, up to the fallback cap (fallback mode).
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
func (b *Budget) NeedsClock() bool { return b.am.Kind == alloc.Window }

// Mode returns the budget's mode now.
func (b *Budget) Mode() Mode { return Mode(b.mode.Load()) }

// Fallback reports whether the budget has fallen back to this process's
// local share because Redis is unreachable or slow: the metrics package
// exports it as stormguard_client_retry_budget_fallback.
func (b *Budget) Fallback() bool { return b.Mode().Fallback() }

// FleetSize returns the number of processes the budget counts on: the
// larger of Config.FleetSize and the processes Redis heard from lately, as
// of the last round trip, at least 1. A process in fallback caps what it
// keeps of its own earnings at capacity/FleetSize (at least the dearest
// retry).
func (b *Budget) FleetSize() int {
	return int(max(int64(b.cfg.FleetSize), b.live.Load(), 1))
}

// Stats is a snapshot of a Budget's counters and state, for metrics.
type Stats struct {
	Mode       Mode    // the mode now
	Hold       float64 // tokens (token bucket) or retries (window) at hand in this process
	Pool       float64 // what the pool could still grant at the last round trip: tokens, or retries the window still allows (-1: never heard from Redis)
	FleetSize  int     // see [Budget.FleetSize]
	RoundTrips uint64  // messages sent to Redis, failed ones included
	Failures   uint64  // round trips that failed
	Fallbacks  uint64  // switches to fallback mode
	Rejoins    uint64  // switches back to fleet mode
	// Retries refused: Redis had told the process to wait (the pool was
	// empty) for longer than MaxWait; no answer came within MaxWait; an
	// answer came but the pool was short; in fallback, too little earned.
	RefusedBackoff, RefusedSlow, RefusedShort, RefusedFallback uint64
	Expired                                                    float64   // credit of messages dropped unanswered after 1.5 heartbeats (lost to the pool)
	Capped                                                     float64   // credit lost because the pool was full at the last answer, as one bucket loses rewards when full
	LastSync                                                   time.Time // the last successful round trip (zero if none)
}

// Stats returns the budget's counters now.
func (b *Budget) Stats() Stats {
	s := Stats{
		Mode:            b.Mode(),
		Hold:            float64(b.hold.Load()) / alloc.Unit,
		Pool:            -1,
		FleetSize:       b.FleetSize(),
		RoundTrips:      b.roundTrips.Load(),
		Failures:        b.failures.Load(),
		Fallbacks:       b.fallbacks.Load(),
		Rejoins:         b.rejoins.Load(),
		RefusedBackoff:  b.refused[refusedBackoff].Load(),
		RefusedSlow:     b.refused[refusedSlow].Load(),
		RefusedShort:    b.refused[refusedShort].Load(),
		RefusedFallback: b.refused[refusedFallback].Load(),
		Expired:         float64(b.expired.Load()) / alloc.Unit,
		Capped:          float64(b.capped.Load()) / alloc.Unit,
	}
	if a := b.avail.Load(); a >= 0 {
		s.Pool = float64(a) / alloc.Unit
	}
	if ns := b.lastSync.Load(); ns != 0 {
		s.LastSync = time.Unix(0, ns)
	}
	return s
}

// Close stops the background goroutine and gives back what the process
// holds and what it earned (one round trip bounded by Timeout; if Redis
// cannot be reached, they are lost to the pool, never spent twice). Then
// every retry is refused. Close is idempotent; it returns the error of the
// last round trip, if it failed.
func (b *Budget) Close() error {
	b.closeOnce.Do(func() {
		close(b.done)
		<-b.stopped
	})
	return b.closeErr
}
