package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

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
	reqs     int64 // window: requests
	fbReqs   int64 // window: requests and retries counted during fallback
	fbRets   int64
}

// reply is Redis's answer.
type reply struct {
	gen        string
	grant, adj int64 // added to the lease
	a, b       int64 // pool and held (token bucket); requests and milli-retries in the window
	live       int64
	dup        bool
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
	}
	if b.kind == budget.KindTokenBucket {
		args = append(args, b.capacity, m.credit, m.borrowed)
	} else {
		args = append(args, b.widthUS, b.ratioMicro, b.floorMicro, m.reqs, m.fbReqs, m.fbRets)
	}
	b.roundTrips.Add(1)
	vals, err := b.script.Run(ctx, b.rdb, b.keys, args...).Slice()
	if err != nil {
		b.failures.Add(1)
		if strings.HasPrefix(err.Error(), "STORMGUARD_SPEC") {
			return reply{}, fmt.Errorf("%w: %s", ErrSpecMismatch, strings.TrimPrefix(err.Error(), "STORMGUARD_SPEC "))
		}
		return reply{}, fmt.Errorf("fleet: budget %q: round trip to Redis: %w", b.cfg.Key, err)
	}
	r, err := parseReply(vals)
	if err != nil {
		b.failures.Add(1)
		return reply{}, fmt.Errorf("fleet: budget %q: %w", b.cfg.Key, err)
	}
	return r, nil
}

// parseReply reads gen, grant, adj, a, b, live, dup, now.
func parseReply(v []any) (reply, error) {
	if len(v) < 7 {
		return reply{}, fmt.Errorf("unexpected reply %v", v)
	}
	gen, ok := v[0].(string)
	if !ok {
		return reply{}, fmt.Errorf("unexpected generation %v", v[0])
	}
	var n [6]int64
	for i := range n {
		x, ok := v[i+1].(int64)
		if !ok {
			return reply{}, fmt.Errorf("unexpected reply field %d: %v", i+1, v[i+1])
		}
		n[i] = x
	}
	return reply{gen: gen, grant: n[0], adj: n[1], a: n[2], b: n[3], live: n[4], dup: n[5] != 0}, nil
}

// apply takes an answer into account.
func (b *Budget) apply(r reply) {
	if b.gen != "" && r.gen != b.gen {
		// Redis lost the state (a restart without persistence) and it was
		// built again from what the processes hold: what this process
		// borrowed from the old pool is its own now.
		b.borrowed = 0
		b.log.Info("fleet budget: Redis lost the shared state; rebuilt from the leases of the live processes", "generation", r.gen)
	}
	b.gen = r.gen
	b.hold.Add(r.grant + r.adj)
	b.learned.Store(max(r.live, 1))
	switch b.kind {
	case budget.KindTokenBucket:
		b.avail.Store(max(r.a, 0))
	case budget.KindWindow:
		allowed := int64(math.Floor((float64(b.ratioMicro)*float64(r.a)+float64(b.floorMicro))/1e6)) * milliPerUnit
		b.avail.Store(max(allowed-r.b, 0))
	}
	b.fails = 0
	b.syncedAt = time.Now()
	b.lastSync.Store(b.syncedAt.UnixNano())
	next := make(chan struct{})
	close(*b.refilled.Swap(&next))
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
			// bucket starts full. It is settled on joining.
			borrow = limit - hold
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
	b.log.Warn("fleet budget: Redis unreachable, falling back to a local budget sized to this process's share",
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
