package admit

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/supersede"
	"github.com/stormguard/stormguard/wire"
)

// SupersedeConfig configures request supersession (see the package
// documentation). A zero field takes the default in brackets.
type SupersedeConfig struct {
	// MaxKeys bounds the keys the gate holds at once [100000]: a request
	// with a new key when it holds MaxKeys is served as if it had none.
	MaxKeys int `json:"max_keys,omitempty" yaml:"max_keys,omitempty"`
	// TTL is how long a key is held after it was last seen (a request with
	// it arrived or started) [1m]; a key some requests wait on is held
	// until its request ends. Set it above MaxTimeout, so that no request
	// outlives its key while queued.
	TTL time.Duration `json:"ttl,omitempty" yaml:"ttl,omitempty"`
	// MaxWaiters bounds the requests that wait for one key's request in
	// service [16]; the next is refused as [Throttled] ([ShedKeyBusy]).
	MaxWaiters int `json:"max_waiters,omitempty" yaml:"max_waiters,omitempty"`
	// MaxReplayBytes bounds the response body the HTTP server keeps, for
	// each request with a key in service, to replay to the requests that
	// wait for it [65536]. A larger response is not replayed: the waiters go
	// through the gate again. The gRPC server shares the reply message
	// itself and ignores it.
	MaxReplayBytes int `json:"max_replay_bytes,omitempty" yaml:"max_replay_bytes,omitempty"`
}

// Defaults and bounds of [SupersedeConfig].
const (
	DefaultMaxReplayBytes = 64 << 10
	maxMaxKeys            = 10_000_000
	maxMaxWaiters         = 1024
	maxMaxReplayBytes     = 64 << 20
)

// WithDefaults returns c with every zero field set to its default.
func (c SupersedeConfig) WithDefaults() SupersedeConfig {
	if c.MaxKeys == 0 {
		c.MaxKeys = supersede.DefaultMax
	}
	if c.TTL == 0 {
		c.TTL = supersede.DefaultTTL
	}
	if c.MaxWaiters == 0 {
		c.MaxWaiters = supersede.DefaultMaxWaiters
	}
	if c.MaxReplayBytes == 0 {
		c.MaxReplayBytes = DefaultMaxReplayBytes
	}
	return c
}

// validate reports a field out of bounds; a nil c (supersession off) is
// valid.
func (c *SupersedeConfig) validate() error {
	switch {
	case c == nil:
		return nil
	case c.MaxKeys < 0 || c.MaxKeys > maxMaxKeys:
		return fmt.Errorf("max_keys %d is outside [0, %d]", c.MaxKeys, maxMaxKeys)
	case c.TTL < 0:
		return fmt.Errorf("ttl %v is negative", c.TTL)
	case c.MaxWaiters < 0 || c.MaxWaiters > maxMaxWaiters:
		return fmt.Errorf("max_waiters %d is outside [0, %d]", c.MaxWaiters, maxMaxWaiters)
	case c.MaxReplayBytes < 0 || c.MaxReplayBytes > maxMaxReplayBytes:
		return fmt.Errorf("max_replay_bytes %d is outside [0, %d]", c.MaxReplayBytes, maxMaxReplayBytes)
	}
	return nil
}

// tableKey is what the gate's supersession table is keyed by: a SHA-256 of
// the request's scope and key, so that every key costs the same memory
// however long its scope, and two different (scope, key) pairs never meet.
type tableKey [sha256.Size]byte

// keyOf returns the table key of a request's scope and key. The scope's
// length goes first, so that no split of one string into scope and key
// reads as another's.
func keyOf(scope, key string) tableKey {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(scope)))
	h.Write(n[:])
	h.Write([]byte(scope))
	h.Write([]byte(key))
	var k tableKey
	h.Sum(k[:0])
	return k
}

// errRerun is what joinWait returns when the twin left nothing to replay:
// the request goes through the gate again.
var errRerun = errors.New("admit: rerun")

// admitKeyed is steps 4 and 5 for a request with an idempotency key, with
// supersession on: the table decides whether it is served, takes a queued
// twin's place, waits for a twin in service, or is refused.
func (g *Gate) admitKeyed(ctx context.Context, r Request, attempt int, crit wire.Criticality, dl time.Time) (Ticket, Decision) {
	wt := &waiter{ch: make(chan grant, 1), keyed: true, key: keyOf(r.KeyScope, r.Key)}
	for {
		g.mu.Lock()
		now := time.Now()
		wt.arrived = now
		var p limit.Permit
		got := false
		if _, _, held := g.sup.Held(wt.key); !held && g.core.q.Len() == 0 {
			p, got = g.core.lim.AcquireAt(now)
		}
		d := g.sup.ArriveAt(now, wt.key, wt, !got)
		switch d.Action {
		case supersede.Serve:
			if got {
				g.mu.Unlock()
				return g.admitted(Ticket{g: g, permit: p, deadline: dl, attempt: attempt, crit: crit, wt: wt}, 0)
			}
			return g.queueLocked(ctx, now, wt, attempt, crit, dl)
		case supersede.Untracked:
			wt.keyed = false
			if got {
				g.mu.Unlock()
				return g.admitted(Ticket{g: g, permit: p, deadline: dl, attempt: attempt, crit: crit}, 0)
			}
			return g.queueLocked(ctx, now, wt, attempt, crit, dl)
		case supersede.Replace:
			old := d.Old
			if _, ok := g.core.q.Swap(old.handle, wt); !ok {
				// Not expected: a twin the table holds as queued is in
				// the queue, both being changed under g.mu. Queue the
				// newcomer as if it had no twin.
				return g.queueLocked(ctx, now, wt, attempt, crit, dl)
			}
			// The handle is the newcomer's now: the twin, if its context
			// ends meanwhile, must not take the newcomer out of the queue.
			wt.handle, old.handle = old.handle, shed.Handle{}
			old.ch <- grant{superseded: true}
			g.mu.Unlock()
			return g.waitQueued(ctx, wt, attempt, crit, dl)
		case supersede.Join:
			g.core.c.joining.Add(1)
			g.mu.Unlock()
			res, d, err := g.joinWait(ctx, wt)
			g.core.c.joining.Add(-1)
			if err == errRerun {
				if !time.Now().Before(dl.Add(-g.core.minRemaining)) {
					g.core.c.expired.Add(1)
					g.core.c.expiredQueued.Add(1)
					return Ticket{}, Decision{Answer: Expired}
				}
				wt = &waiter{ch: make(chan grant, 1), keyed: true, key: wt.key}
				continue
			}
			if !d.Admitted() {
				return Ticket{}, d
			}
			g.core.c.joined.Add(1)
			return Ticket{}, Decision{Answer: Joined, Result: res}
		default: // supersede.Refuse
			g.mu.Unlock()
			return Ticket{}, g.refuse(ShedKeyBusy)
		}
	}
}

// joinWait waits for the result of the twin wt joined. It returns the
// result, or errRerun if the twin left none to replay, or the decision for
// a caller that went away meanwhile.
func (g *Gate) joinWait(ctx context.Context, wt *waiter) (any, Decision, error) {
	var gr grant
	select {
	case gr = <-wt.ch:
	case <-ctx.Done():
		g.mu.Lock()
		left := g.sup.LeaveAt(time.Now(), wt.key, wt)
		g.mu.Unlock()
		if !left {
			<-wt.ch // handed over under the lock just now; nobody is there for it
		}
		return nil, g.leave(ctx), nil
	}
	if gr.result == nil {
		return nil, Decision{}, errRerun
	}
	return gr.result, Decision{}, nil
}

// endKeyedLocked ends the hold of wt on its key, if it still holds it, and
// hands the requests that joined it result (nil: none to replay; they go
// through the gate again). g.mu must be held.
func (g *Gate) endKeyedLocked(now time.Time, wt *waiter, result any) {
	if !wt.keyed {
		return
	}
	if h, _, ok := g.sup.Held(wt.key); !ok || h != wt {
		return
	}
	for _, j := range g.sup.DoneAt(now, wt.key) {
		j.ch <- grant{result: result}
	}
}

// startKeyedLocked records that wt, leaving the queue with a permit,
// starts service. g.mu must be held.
func (g *Gate) startKeyedLocked(now time.Time, wt *waiter) {
	if h, _, ok := g.sup.Held(wt.key); ok && h == wt {
		g.sup.StartAt(now, wt.key)
	}
}
