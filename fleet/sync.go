package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
)

// message is one round trip of the lease protocol. It is built once and
// sent again, unchanged, until Redis acknowledges it: Redis applies each
// sequence number once, so nothing is lost or counted twice when an answer
// is lost.
type message struct {
	seq      int64
	known    string // the generation of the state the process last saw
	snapshot int64  // the lease at hand when the message was built
	want     int64
	leave    bool
	credit   int64 // token bucket: rewards earned
	borrowed int64 // token bucket: taken from the pool's share on fallback
	seen     int64 // the highest version of the known generation seen
	peak     int64 // the live processes known
	reqs     int64 // window: requests
	fbReqs   int64 // window: requests and retries counted during fallback
	fbRets   int64
}

// reply is Redis's answer.
type reply struct {
	gen        string
	grant, adj int64 // added to the lease
	a, b       int64 // pool and held (token bucket); requests and milli-retries in the window
	live       int64 // live leases
	dup        bool
	now        int64 // server time, ms
	ver        int64 // version of the state (messages applied in this generation)
	peak       int64 // the most live processes seen lately
	avail      int64 // what the fleet could grant now (0 during a probation)
	note       string
}

// build takes what accumulated since the last message.
func (b *Budget) build(leave bool) *message {
	b.seq++
	m := &message{
		seq:      b.seq,
		known:    b.gen,
		snapshot: b.hold.Load(),
		want:     b.want,
		leave:    leave,
		credit:   b.credit.Swap(0),
		borrowed: b.borrowed,
		seen:     b.seen,
		peak:     b.learned.Load(),
		reqs:     b.reqs.Swap(0),
		fbReqs:   b.fbReqs,
		fbRets:   b.fbRets,
	}
	b.borrowed, b.fbReqs, b.fbRets = 0, 0, 0
	return m
}

// syncOnce sends the pending message, or a new one, and applies the answer.
func (b *Budget) syncOnce(ctx context.Context) error {
	if b.pending == nil {
		b.pending = b.build(false)
	}
	r, err := b.call(ctx, b.pending)
	if err != nil {
		return err
	}
	b.apply(r)
	b.pending = nil
	return nil
}

// call runs the sync script for m, bounded by the timeout.
func (b *Budget) call(ctx context.Context, m *message) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	leave := "0"
	if m.leave {
		leave = "1"
	}
	args := []any{
		b.spec, b.cfg.ID, m.seq, m.known, m.snapshot, m.want,
		b.cfg.LeaseTTL.Milliseconds(), b.cfg.StateTTL.Milliseconds(), leave, reclaimMemory.Milliseconds(),
		m.seen, max(m.peak, 1),
	}
	if b.kind == budget.KindTokenBucket {
		args = append(args, b.capacity, m.credit, m.borrowed)
	} else {
		args = append(args, b.widthUS, b.ratioMicro, b.floorMicro, m.reqs, m.fbReqs, m.fbRets)
	}
	packed := make([]string, len(args))
	for i, a := range args {
		packed[i] = fmt.Sprint(a)
	}
	b.roundTrips.Add(1)
	vals, err := b.script.Run(ctx, b.rdb, b.keys, strings.Join(packed, "\n")).Slice()
	if err != nil {
		b.failures.Add(1)
		return reply{}, roundTripError(b.cfg.Key, err)
	}
	r, err := parseReply(vals)
	if err != nil {
		b.failures.Add(1)
		return reply{}, fmt.Errorf("fleet: budget %q: %w", b.cfg.Key, err)
	}
	return r, nil
}

// roundTripError describes a failed round trip: another spec, missing or
// wrong credentials, or Redis unreachable or refusing.
func roundTripError(key string, err error) error {
	var re redis.Error
	if !errors.As(err, &re) {
		return fmt.Errorf("fleet: budget %q: round trip to Redis: %w", key, err)
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "STORMGUARD_SPEC "):
		return fmt.Errorf("%w: Redis holds %s", ErrSpecMismatch, strings.TrimPrefix(msg, "STORMGUARD_SPEC "))
	case strings.HasPrefix(msg, "NOAUTH") || strings.Contains(msg, "unauthenticated"):
		// Redis 6 and later answer a long command from a client that has
		// not authenticated with a protocol error, not NOAUTH.
		return fmt.Errorf("%w (NOAUTH) for budget %q: give the Redis client its password (fleet.ClientOptions; from STORMGUARD_REDIS_PASSWORD, say): Redis said: %w", ErrAuth, key, err)
	case strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("%w for budget %q: the user or password is wrong (WRONGPASS): Redis said: %w", ErrAuth, key, err)
	}
	return fmt.Errorf("fleet: budget %q: Redis answered the round trip with an error: %w", key, err)
}

// ErrAuth is wrapped by the errors of round trips that Redis refused for
// want of valid credentials: the process falls back, and its log says that
// authentication is required rather than that Redis is unreachable.
var ErrAuth = errors.New("fleet: Redis requires authentication")

// replyLen is the length of a sync script's reply.
const replyLen = 12

// parseReply reads gen, grant, adj, a, b, live, dup, now, ver, peak, avail
// and note, as the sync scripts return them.
func parseReply(v []any) (reply, error) {
	if len(v) != replyLen {
		return reply{}, fmt.Errorf("unexpected reply of %d fields, want %d", len(v), replyLen)
	}
	gen, ok := v[0].(string)
	if !ok || gen == "" || strings.ContainsAny(gen, " \t\r\n") {
		return reply{}, fmt.Errorf("unexpected generation %.40q", fmt.Sprint(v[0]))
	}
	var n [replyLen - 2]int64
	for i := range n {
		x, ok := v[i+1].(int64)
		if !ok {
			return reply{}, fmt.Errorf("unexpected reply field %d: %.40q", i+1, fmt.Sprint(v[i+1]))
		}
		n[i] = x
	}
	note, ok := v[replyLen-1].(string)
	if !ok {
		return reply{}, fmt.Errorf("unexpected note %.40q", fmt.Sprint(v[replyLen-1]))
	}
	r := reply{gen: gen, grant: n[0], adj: n[1], a: n[2], b: n[3], live: n[4], dup: n[5] != 0,
		now: n[6], ver: n[7], peak: n[8], avail: n[9], note: note}
	switch {
	case n[5] != 0 && n[5] != 1:
		return reply{}, fmt.Errorf("unexpected duplicate flag %d", n[5])
	case r.live < 0 || r.peak < 0 || r.ver < 0 || r.avail < 0:
		return reply{}, fmt.Errorf("unexpected negative count in reply %v", n)
	case !amount(r.grant) || !amount(r.adj) || !amount(r.a) || !amount(r.b) || !amount(r.avail):
		return reply{}, fmt.Errorf("unexpected amount in reply %v", n)
	}
	return r, nil
}

// maxAmount bounds the amounts of a reply, in milli-units: what the
// scripts write stays far below it (capacities are at most 10⁶ tokens).
const maxAmount = 1 << 50

// amount reports whether x is within ±maxAmount.
func amount(x int64) bool { return x >= -maxAmount && x <= maxAmount }

// apply takes an answer into account.
func (b *Budget) apply(r reply) {
	b.report(r)
	if b.gen != "" && r.gen != b.gen {
		// A state built again from what the processes hold: what this
		// process borrowed from the old pool is its own now. (What a
		// process borrowed before it ever reached Redis is charged to the
		// first state it joins, by its next message.)
		b.borrowed = 0
	}
	b.gen = r.gen
	b.seen = r.ver
	b.hold.Add(r.grant + r.adj)
	b.learned.Store(max(r.live, r.peak, 1))
	b.avail.Store(r.avail)
	b.fails = 0
	b.syncedAt = time.Now()
	b.lastSync.Store(b.syncedAt.UnixNano())
	next := make(chan struct{})
	close(*b.refilled.Swap(&next))
}

// report logs what the script says happened to the state.
func (b *Budget) report(r reply) {
	changed := b.gen != "" && r.gen != b.gen
	probation := "lease_ttl"
	switch {
	case r.note == "created" && b.kind == budget.KindTokenBucket:
		b.log.Info("fleet budget: created the shared state; the pool stays empty for the probation (one lease TTL), then fills to the capacity unless a process of an earlier state reports", "generation", r.gen, probation, b.cfg.LeaseTTL)
	case r.note == "created":
		b.log.Info("fleet budget: created the shared state", "generation", r.gen)
	case r.note == "lost" || (changed && r.note == ""):
		b.log.Info("fleet budget: Redis lost the shared state; rebuilt from the leases of the live processes, not refilled", "generation", r.gen)
	case r.note == "stale":
		b.log.Warn("fleet budget: the shared state in Redis is older than what this process saw (a failover to a replica that lagged, or a restore from an old copy); rebuilt from the leases of the live processes, not refilled", "generation", r.gen)
	case strings.HasPrefix(r.note, "corrupt: "):
		b.log.Warn("fleet budget: the shared state in Redis was corrupt; rebuilt from the leases of the live processes, not refilled", "corrupt", strings.TrimPrefix(r.note, "corrupt: "), "generation", r.gen)
	case r.note == "spec":
		b.log.Info("fleet budget: replaced a budget of another spec that no live process uses", "generation", r.gen, probation, b.cfg.LeaseTTL)
	case r.note == "moved":
		b.log.Info("fleet budget: the shared state was written by another Redis server (a failover, or a restart that loaded a copy); the pool grants nothing for the probation while the processes report", probation, b.cfg.LeaseTTL)
	case r.note == "filled":
		b.log.Info("fleet budget: no process of an earlier state reported during the probation; the pool filled to the capacity", "generation", r.gen)
	}
}

// run is the background goroutine.
func (b *Budget) run() {
	defer close(b.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(b.step())
		select {
		case <-b.done:
			b.shutdown()
			return
		case <-b.kick:
		case <-timer.C:
		}
	}
}

// step does what is due and returns how long to sleep before looking again.
func (b *Budget) step() time.Duration {
	now := time.Now()
	if Mode(b.mode.Load()) == ModeFallback {
		if wait := b.cfg.RejoinInterval - now.Sub(b.lastTry); wait > 0 {
			return wait
		}
		b.lastTry = now
		if err := b.rejoin(); err != nil {
			return b.cfg.RejoinInterval
		}
		now = time.Now()
	}
	if wait := b.due(now); wait > 0 {
		return wait
	}
	if err := b.syncOnce(context.Background()); err != nil {
		b.onFailure(err)
		if Mode(b.mode.Load()) == ModeFallback {
			return b.cfg.RejoinInterval
		}
		return 5 * time.Millisecond
	}
	return max(b.due(time.Now()), time.Millisecond)
}

// due returns 0 when a round trip is due in fleet mode, or how long until
// one will be.
func (b *Budget) due(now time.Time) time.Duration {
	if b.pending != nil {
		return 0
	}
	since := now.Sub(b.syncedAt)
	wait := b.renewEvery - since
	if b.hold.Load() < b.lowWater {
		if b.avail.Load() >= b.maxCost || since >= b.cfg.PollInterval {
			return 0
		}
		wait = min(wait, b.cfg.PollInterval-since)
	}
	credit, reqs := b.credit.Load(), b.reqs.Load()
	if (b.flushCredit > 0 && credit >= b.flushCredit) || (b.flushReqs > 0 && reqs >= b.flushReqs) {
		return 0
	}
	if credit > 0 || reqs > 0 {
		wait = min(wait, b.cfg.FlushInterval-since)
	}
	return max(wait, 0)
}

// onFailure counts a failed round trip and falls back when the failures
// persist or the lease is low.
func (b *Budget) onFailure(err error) {
	b.fails++
	if Mode(b.mode.Load()) != ModeFleet {
		return
	}
	if errors.Is(err, ErrSpecMismatch) || b.fails >= failAfter || b.hold.Load() < b.lowWater {
		b.enterFallback(err)
	}
}

// enterFallback switches to a local budget sized to this process's share of
// the fleet.
func (b *Budget) enterFallback(reason error) {
	n := int64(b.FleetSize())
	switch b.kind {
	case budget.KindTokenBucket:
		limit := max(b.capacity/n, b.maxCost)
		b.fbCap.Store(limit)
		hold := b.hold.Load()
		var borrow int64
		switch {
		case b.syncedAt.IsZero() && !b.borrowedFull:
			// Never reached Redis: start with a full share, as a local
			// bucket starts full, when FleetSize says how many share the
			// capacity; without it, the process cannot know how many
			// others start with it, and starts with one lease. It is
			// settled on joining.
			borrow = limit - hold
			if b.cfg.FleetSize == 0 {
				borrow = min(b.want, limit) - hold
			}
			b.borrowedFull = true
		case b.syncedAt.After(b.borrowMark):
			// Borrow once per look at the pool, however often Redis flaps.
			if a := b.avail.Load(); a > 0 && a != math.MaxInt64 {
				borrow = min(a/n, b.want, limit-hold)
			}
			b.borrowMark = b.syncedAt
		}
		if borrow > 0 {
			b.hold.Add(borrow)
			b.borrowed += borrow
		}
	case budget.KindWindow:
		s := b.cfg.Spec
		s.Floor /= float64(n)
		w, err := s.New()
		if err != nil { // the share of the floor rounds to nothing: one retry per window
			s.Floor = 1 / s.Window.Seconds()
			w, _ = s.New()
		}
		if win, ok := w.(*budget.Window); ok {
			b.fbWin.Store(win)
		}
	}
	b.mode.Store(int32(ModeFallback))
	b.fallbacks.Add(1)
	b.lastTry = time.Now()
	what := "Redis unreachable"
	var re redis.Error
	switch {
	case errors.Is(reason, ErrAuth):
		what = "Redis requires authentication"
	case errors.Is(reason, ErrSpecMismatch):
		what = "the key holds a budget of another spec"
	case errors.As(reason, &re):
		what = "Redis answered with an error"
	}
	b.log.Warn("fleet budget: "+what+", falling back to a local budget sized to this process's share",
		"mode", ModeFallback.String(), "share", fmt.Sprintf("1/%d", n), "err", reason)
}

// rejoin tries Redis and, if it answers, goes back to fleet mode: what was
// pending is sent, then what was spent, earned and borrowed meanwhile.
func (b *Budget) rejoin() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	err := b.rdb.Ping(ctx).Err()
	cancel()
	if err != nil {
		b.fails++
		return err
	}
	b.mode.Store(int32(ModeFleet))
	if w := b.fbWin.Swap(nil); w != nil {
		q, r := w.CountsAt(time.Now())
		b.fbReqs += q
		b.fbRets += r
	}
	hadPending := b.pending != nil
	for i := 0; i < 2; i++ {
		if err := b.syncOnce(context.Background()); err != nil {
			b.fails = failAfter
			b.onFailure(err)
			return err
		}
		if !hadPending {
			break
		}
		hadPending = false
	}
	b.rejoins.Add(1)
	b.log.Info("fleet budget: Redis answers again, rejoined the fleet", "mode", ModeFleet.String(), "hold", float64(b.hold.Load())/milliPerUnit)
	return nil
}

// shutdown is run by the background goroutine on Close: it hands the lease
// back.
func (b *Budget) shutdown() {
	b.mode.Store(int32(ModeClosed))
	defer func() {
		next := make(chan struct{})
		close(*b.refilled.Swap(&next))
	}()
	if w := b.fbWin.Swap(nil); w != nil {
		q, r := w.CountsAt(time.Now())
		b.fbReqs += q
		b.fbRets += r
	}
	ctx := context.Background()
	if b.pending != nil {
		if err := b.syncOnce(ctx); err != nil {
			b.closeErr = err
			b.log.Warn("fleet budget: closed without reaching Redis; the lease returns to the pool when it expires", "err", err)
			return
		}
	}
	b.pending = b.build(true)
	r, err := b.call(ctx, b.pending)
	if err != nil {
		b.closeErr = err
		b.log.Warn("fleet budget: closed without reaching Redis; the lease returns to the pool when it expires", "err", err)
		return
	}
	b.apply(r)
	b.pending = nil
}
