package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet/alloc"
)

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

// counts reads the hot path's amounts.
func (b *Budget) counts() alloc.Counts {
	return alloc.Counts{Hold: b.hold.Load(), Credit: b.credit.Load(), Back: b.back.Load(), Waiting: b.waiting.Load(), Asked: b.asked.Load()}
}

// step does what is due and returns how long to sleep before looking again.
func (b *Budget) step() time.Duration {
	if Mode(b.mode.Load()) == ModeFallback {
		if wait := b.cfg.RejoinInterval - time.Since(b.lastTry); wait > 0 {
			return wait
		}
		b.lastTry = time.Now()
		if err := b.rejoin(); err != nil {
			return b.cfg.RejoinInterval
		}
	}
	now := b.now()
	act := b.core.Decide(now, b.counts())
	if act.Expire {
		// The lease lapsed unspent: give it back with the next message.
		b.back.Add(b.hold.Swap(0))
	}
	b.lowWater.Store(act.LowWater)
	b.flushAt.Store(act.FlushAt)
	b.backAt.Store(act.BackAt)
	if !act.Send {
		return max(time.Duration(act.Wake-now), time.Millisecond)
	}
	if err := b.roundTrip(context.Background(), now); err != nil {
		b.onFailure(err)
		if Mode(b.mode.Load()) == ModeFallback {
			return b.cfg.RejoinInterval
		}
		return alloc.RetryAfter
	}
	return 0
}

// roundTrip sends the pending message, or a new one, and applies the answer.
func (b *Budget) roundTrip(ctx context.Context, now int64) error {
	// Numbered before the counts are read: a retry that registered its
	// need before reading built knows that any message numbered above it
	// carries the need (see wait).
	n := b.built.Add(1)
	var m alloc.Message
	if b.core.Pending() {
		var dropped int64
		m, dropped = b.core.Message(now, 0, 0, b.counts())
		if dropped != 0 {
			// Unanswered for too long: Redis may have forgotten this
			// process, and could apply it twice. Its credit is lost.
			b.expired.Add(dropped)
			b.log.Warn("fleet budget: dropped a message Redis did not answer for 1.5 heartbeats; its credit is lost to the pool", "credit", dropped)
		}
	}
	if !b.core.Pending() {
		m, _ = b.core.Message(now, b.credit.Swap(0), b.back.Swap(0), b.counts())
	}
	a, err := b.call(ctx, m)
	if err != nil {
		b.core.Failed(b.now())
		b.wake()
		return err
	}
	b.answeredFor.Store(n)
	b.apply(a)
	return nil
}

// apply takes an answer into account.
func (b *Budget) apply(a alloc.Answer) {
	b.report(a)
	b.capped.Add(a.Lost)
	g := b.core.Apply(b.now(), a)
	b.hold.Add(g)
	b.backoff.Store(b.core.BackoffUntil())
	b.live.Store(a.Live)
	b.avail.Store(a.Avail)
	b.fails = 0
	b.lastSync.Store(time.Now().UnixNano())
	b.wake()
}

// wake releases the retries waiting for an answer.
func (b *Budget) wake() {
	next := make(chan struct{})
	close(*b.answered.Swap(&next))
}

// call runs the step script for m, bounded by the timeout.
func (b *Budget) call(ctx context.Context, m alloc.Message) (alloc.Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	b.roundTrips.Add(1)
	vals, err := stepScript.Run(ctx, b.rdb, b.keys, stepArgs(b.params, b.cfg.StateTTL, m, -1)).Slice()
	if err != nil {
		b.failures.Add(1)
		return alloc.Answer{}, roundTripError(b.cfg.Key, err)
	}
	a, err := parseAnswer(vals)
	if err != nil {
		b.failures.Add(1)
		return alloc.Answer{}, fmt.Errorf("fleet: budget %q: %w", b.cfg.Key, err)
	}
	return a, nil
}

// stepArgs packs the step script's arguments, one a line; now < 0 lets the
// script read Redis's clock.
func stepArgs(p alloc.Params, stateTTL time.Duration, m alloc.Message, now int64) string {
	kind, leave, t := "1", "0", ""
	if p.Kind == alloc.Window {
		kind = "2"
	}
	if m.Leave {
		leave = "1"
	}
	if now >= 0 {
		t = strconv.FormatInt(now, 10)
	}
	i := strconv.FormatInt
	return strings.Join([]string{
		p.Spec, kind, i(p.Capacity, 10), i(p.SlotUS, 10), i(p.RatioMicro, 10), i(p.FloorMicro, 10),
		i(p.Rate, 10), i(p.MinNextUS, 10), i(p.MaxNextUS, 10), i(p.LiveUS, 10), i(p.MaxProcs, 10), i(stateTTL.Milliseconds(), 10),
		m.ID, i(m.Seq, 10), m.Known, i(m.Seen, 10), i(m.Credit, 10), i(m.Need, 10), i(m.Want, 10), leave, t,
		i(m.Span, 10), i(m.Room, 10), i(m.Back, 10), i(p.HoldUS, 10), i(m.Age, 10),
	}, "\n")
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
		n, held, _ := strings.Cut(strings.TrimPrefix(msg, "STORMGUARD_SPEC "), " ")
		return fmt.Errorf("%w: Redis holds %q, in use by %s live processes", ErrSpecMismatch, held, n)
	case strings.HasPrefix(msg, "NOAUTH") || strings.Contains(msg, "unauthenticated"):
		// Redis 6 and later answer a long command from a client that has
		// not authenticated with a protocol error, not NOAUTH.
		return fmt.Errorf("%w (NOAUTH) for budget %q: give the Redis client its password (fleet.ClientOptions; from STORMGUARD_REDIS_PASSWORD, say): Redis said: %w", ErrAuth, key, err)
	case strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("%w for budget %q: the user or password is wrong (WRONGPASS): Redis said: %w", ErrAuth, key, err)
	case strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "user executing the script can't run this command"):
		return fmt.Errorf("%w for budget %q (see the package documentation for the ACL it needs): Redis said: %w", ErrNoPermission, key, err)
	}
	return fmt.Errorf("fleet: budget %q: Redis answered the round trip with an error: %w", key, err)
}

// ErrAuth is wrapped by the errors of round trips that Redis refused for
// want of valid credentials or permissions: the process falls back, and its
// log says that authentication is required rather than that Redis is
// unreachable.
var ErrAuth = errors.New("fleet: Redis requires authentication")

// ErrNoPermission is wrapped by the errors of round trips that Redis
// refused because the ACL user may not run a command the fleet's scripts
// need or touch its keys (NOPERM).
var ErrNoPermission = errors.New("fleet: the Redis user lacks the fleet's permissions")

// answerLen is the length of the step script's reply.
const answerLen = 11

// parseAnswer reads gen, ver, grant, next, avail, live, waiting, lost, dup,
// now and note, as the step script returns them.
func parseAnswer(v []any) (alloc.Answer, error) {
	if len(v) != answerLen {
		return alloc.Answer{}, fmt.Errorf("unexpected reply of %d fields, want %d", len(v), answerLen)
	}
	gen, ok := v[0].(string)
	if !ok || gen == "" || len(gen) > 64+maxNameLen || strings.ContainsAny(gen, " \t\r\n") {
		return alloc.Answer{}, fmt.Errorf("unexpected generation %.40q", fmt.Sprint(v[0]))
	}
	var n [9]int64 // ver, grant, next, avail, live, waiting, lost, dup, now
	for i := range n {
		x, ok := v[i+1].(int64)
		if !ok {
			return alloc.Answer{}, fmt.Errorf("unexpected reply field %d: %.40q", i+1, fmt.Sprint(v[i+1]))
		}
		n[i] = x
	}
	note, ok := v[10].(string)
	if !ok || len(note) > 200 {
		return alloc.Answer{}, fmt.Errorf("unexpected note %.40q", fmt.Sprint(v[10]))
	}
	a := alloc.Answer{Gen: gen, Ver: n[0], Grant: n[1], Next: n[2], Avail: n[3], Live: n[4], Waiting: n[5], Lost: n[6], Dup: n[7] == 1, Now: n[8], Note: note}
	switch {
	case n[7] != 0 && n[7] != 1:
		return alloc.Answer{}, fmt.Errorf("unexpected duplicate flag %d", n[7])
	case a.Ver < 0 || a.Live < 0 || a.Waiting < 0 || a.Next < 0 || a.Next > int64(time.Hour/time.Microsecond) || a.Now < 0:
		return alloc.Answer{}, fmt.Errorf("unexpected count in reply %v", n)
	case a.Grant < 0 || a.Grant > maxAmount || a.Avail < 0 || a.Avail > maxAmount || a.Lost < 0 || a.Lost > maxAmount:
		return alloc.Answer{}, fmt.Errorf("unexpected amount in reply %v", n)
	}
	return a, nil
}

// maxAmount bounds the amounts of a reply, in milli-units: what the
// scripts write stays far below it (capacities are at most 10⁶ tokens).
const maxAmount = 1 << 50

// report logs what the script says happened to the state.
func (b *Budget) report(a alloc.Answer) {
	switch {
	case a.Note == "created":
		b.log.Info("fleet budget: created the shared state; the pool starts empty and fills with the fleet's first-try successes", "generation", a.Gen)
	case a.Note == "lost":
		b.log.Info("fleet budget: Redis lost the shared state; it starts again empty, never refilled to the capacity", "generation", a.Gen)
	case a.Note == "moved":
		b.log.Info("fleet budget: the shared state was written by another Redis server (a failover, or a restart that loaded a copy); its pool is emptied, since the copy may be old", "generation", a.Gen)
	case a.Note == "stale":
		b.log.Warn("fleet budget: the shared state in Redis is older than what this process saw (a failover to a replica that lagged, or a restore from an old copy); its pool is emptied", "generation", a.Gen)
	case a.Note == "spec":
		b.log.Info("fleet budget: replaced a budget of another spec that no live process uses", "generation", a.Gen)
	case strings.HasPrefix(a.Note, "corrupt: "):
		b.log.Warn("fleet budget: the shared state in Redis was corrupt; it starts again empty", "corrupt", strings.TrimPrefix(a.Note, "corrupt: "), "generation", a.Gen)
	}
}

// onFailure counts a failed round trip and falls back when the failures
// persist or a retry waits.
func (b *Budget) onFailure(err error) {
	b.fails++
	refreshTopology(b.rdb)
	if Mode(b.mode.Load()) != ModeFleet {
		return
	}
	if errors.Is(err, ErrSpecMismatch) || b.fails >= failAfter || b.waiting.Load() > 0 {
		b.enterFallback(err)
	}
}

// enterFallback switches to deciding alone: a token bucket keeps what it
// holds and its own rewards, up to capacity/FleetSize (at least the dearest
// retry); a window counts its own requests and retries with the same ratio
// (and, with Config.FleetSize, floor/FleetSize).
func (b *Budget) enterFallback(reason error) {
	n := int64(b.FleetSize())
	switch b.am.Kind {
	case alloc.Bucket:
		b.fbCap.Store(max(b.am.Capacity/n, b.am.MaxCost))
	case alloc.Window:
		s := b.cfg.Spec
		s.Floor = 0
		if b.cfg.FleetSize > 0 {
			s.Floor = b.cfg.Spec.Floor / float64(b.cfg.FleetSize)
		}
		if s.Ratio == 0 && s.Floor == 0 {
			s.Floor = 1 / s.Window.Seconds() // one retry per window
		}
		if w, err := s.New(); err == nil {
			if win, ok := w.(*budget.Window); ok {
				b.fbWin.Store(win)
			}
		}
	}
	b.mode.Store(int32(ModeFallback))
	b.fallbacks.Add(1)
	b.lastTry = time.Now()
	b.wake()
	what := "Redis unreachable"
	var re redis.Error
	switch {
	case errors.Is(reason, ErrAuth):
		what = "Redis requires authentication"
	case errors.Is(reason, ErrNoPermission):
		what = "the Redis user lacks the fleet's permissions"
	case errors.Is(reason, ErrSpecMismatch):
		what = "the key holds a budget of another spec"
	case errors.As(reason, &re):
		what = "Redis answered with an error"
	}
	b.log.Warn("fleet budget: "+what+", falling back to what this process holds and earns",
		"mode", ModeFallback.String(), "share", fmt.Sprintf("1/%d", n), "err", reason)
}

// rejoin tries Redis and, if it answers, goes back to fleet mode: what was
// pending is sent first; what the process holds stays its own; a window's
// requests counted meanwhile are sent.
func (b *Budget) rejoin() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	err := b.rdb.Ping(ctx).Err()
	cancel()
	if err != nil {
		b.fails++
		refreshTopology(b.rdb)
		return err
	}
	if w := b.fbWin.Swap(nil); w != nil {
		q, _ := w.CountsAt(time.Now())
		b.credit.Add(q)
	}
	b.core.Rejoined()
	b.backoff.Store(0)
	b.mode.Store(int32(ModeFleet))
	for range 2 {
		if err := b.roundTrip(context.Background(), b.now()); err != nil {
			b.fails = failAfter
			b.onFailure(err)
			return err
		}
		if !b.core.Pending() {
			break
		}
	}
	b.rejoins.Add(1)
	b.log.Info("fleet budget: Redis answers again, rejoined the fleet", "mode", ModeFleet.String(), "hold", float64(b.hold.Load())/alloc.Unit)
	return nil
}

// shutdown is run by the background goroutine on Close: it gives back what
// the process holds and earned.
func (b *Budget) shutdown() {
	b.mode.Store(int32(ModeClosed))
	defer b.wake()
	if w := b.fbWin.Swap(nil); w != nil {
		q, _ := w.CountsAt(time.Now())
		b.credit.Add(q)
	}
	ctx := context.Background()
	now := b.now()
	if b.core.Pending() {
		if err := b.roundTrip(ctx, now); err != nil {
			b.closeErr = err
			b.log.Warn("fleet budget: closed without reaching Redis; what it held is lost to the pool", "err", err)
			return
		}
	}
	credit, back := b.credit.Swap(0), b.back.Swap(0)
	if b.am.Kind == alloc.Bucket {
		back += b.hold.Swap(0)
	}
	a, err := b.call(ctx, b.core.Leave(now, credit, back))
	if err != nil {
		b.closeErr = err
		b.log.Warn("fleet budget: closed without reaching Redis; what it held is lost to the pool", "err", err)
		return
	}
	b.core.Apply(b.now(), a)
}

// refreshTopology makes a cluster client reload its map of the slots after
// a failed round trip: go-redis reloads it on a MOVED answer, or once a
// minute, but a master that died answers nothing, and its slots moved to a
// replica (the reload runs in the background, at most every 200 ms).
func refreshTopology(rdb redis.UniversalClient) {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}
