// Package supersede collapses requests that repeat one another: a person who
// taps "transfer" five times, a client that resends after giving up. Each
// such request carries an idempotency key (the Idempotency-Key header of
// the IETF httpapi draft, or a gRPC metadata key); a server that keeps a
// [Table] of the keys it holds
//
//   - replaces an older request with the same key still waiting in its
//     queue by the newer one (the older is answered "superseded": its
//     caller has moved on to the newer), and
//   - makes a newer request whose twin is already in service wait for that
//     result instead of running again.
//
// So five taps cost one unit of work, not five. Nothing else changes: a
// request without a key, or whose key the table does not hold, is served
// as it would be.
//
// The Table is a deterministic core: time is an argument, it never reads
// the clock, and it is not safe for concurrent use (the admission gate
// holds its lock around it; the simulator runs it on one goroutine). Its
// memory is bounded: at most Max keys, each forgotten TTL after it was last
// seen; when full, a new key is not tracked (the request is served as if it
// had none) rather than evicting one that is.
package supersede

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults and bounds.
const (
	DefaultMax = 100_000
	DefaultTTL = time.Minute
	// MaxKeyLen bounds a key, in bytes (the draft's keys are UUIDs).
	MaxKeyLen = 255
)

// ErrBadKey: a key that is empty, too long or not printable ASCII.
var ErrBadKey = errors.New("supersede: bad idempotency key")

// ParseKey checks an Idempotency-Key header's value: 1 to 255 bytes of
// printable ASCII, surrounding spaces and one pair of double quotes (a
// structured-field string, as the draft writes it) removed, and spaces
// inside the quotes' ends too.
func ParseKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = strings.TrimSpace(v[1 : len(v)-1])
	}
	if v == "" || len(v) > MaxKeyLen {
		return "", fmt.Errorf("%w: length %d is outside [1, %d]", ErrBadKey, len(v), MaxKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == '"' {
			return "", fmt.Errorf("%w: byte %#x at %d", ErrBadKey, c, i)
		}
	}
	return v, nil
}

// What a request does on arrival, from [Table.ArriveAt].
type Action uint8

const (
	// Serve: no twin held; the request is tracked and goes on as usual
	// (or, Untracked, the table is full and it goes on untracked).
	Serve Action = iota
	// Replace: a twin is queued; answer it "superseded" (Decision.Old) and
	// queue the newcomer in its place.
	Replace
	// Join: a twin is in service; the newcomer waits for its result.
	Join
	// Untracked: the table is full; the request is served without one.
	Untracked
)

// Decision is [Table.ArriveAt]'s answer. Old is the queued twin to answer
// "superseded" when the action is Replace.
type Decision[T any] struct {
	Action Action
	Old    T
}

type entry[T any] struct {
	queued   bool // the held request waits in the queue (else in service)
	held     T
	waiters  []T
	lastSeen time.Time
}

// Table holds the keys of the requests a server queues or serves. K is the
// key's type (the header's string; the simulator's number), T the caller's
// handle of a request (a queue handle, a simulator's attempt id).
// The zero Table is not usable: build one with [New].
type Table[K comparable, T any] struct {
	max     int
	ttl     time.Duration
	entries map[K]*entry[T]
	sweepAt time.Time
	stats   Stats
}

// Stats counts what the table decided.
type Stats struct {
	Superseded, Joined, Untracked uint64
}

// New returns a Table of at most max keys (0: DefaultMax), each forgotten ttl
// after it was last seen (0: DefaultTTL).
func New[K comparable, T any](max int, ttl time.Duration) *Table[K, T] {
	if max <= 0 {
		max = DefaultMax
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Table[K, T]{max: max, ttl: ttl, entries: map[K]*entry[T]{}}
}

// Len returns the number of keys held.
func (t *Table[K, T]) Len() int { return len(t.entries) }

// Stats returns the counts so far.
func (t *Table[K, T]) Stats() Stats { return t.stats }

// ArriveAt decides what request h with key does when it arrives at now,
// queued (the server is about to queue it) or not (it is about to start
// service at once).
func (t *Table[K, T]) ArriveAt(now time.Time, key K, h T, queued bool) Decision[T] {
	t.sweep(now)
	e, ok := t.entries[key]
	if ok && now.Sub(e.lastSeen) >= t.ttl {
		delete(t.entries, key)
		ok = false
	}
	if !ok {
		if len(t.entries) >= t.max {
			t.stats.Untracked++
			return Decision[T]{Action: Untracked}
		}
		t.entries[key] = &entry[T]{queued: queued, held: h, lastSeen: now}
		return Decision[T]{Action: Serve}
	}
	e.lastSeen = now
	if e.queued {
		old := e.held
		e.held = h
		e.queued = queued
		t.stats.Superseded++
		return Decision[T]{Action: Replace, Old: old}
	}
	e.waiters = append(e.waiters, h)
	t.stats.Joined++
	return Decision[T]{Action: Join}
}

// StartAt records that the held request of key starts service.
func (t *Table[K, T]) StartAt(now time.Time, key K) {
	if e, ok := t.entries[key]; ok {
		e.queued = false
		e.lastSeen = now
	}
}

// DoneAt records that the held request of key ended (served, shed, expired,
// dropped) and returns the requests that joined it, to be answered with its
// result; the key is forgotten.
func (t *Table[K, T]) DoneAt(now time.Time, key K) []T {
	e, ok := t.entries[key]
	if !ok {
		return nil
	}
	delete(t.entries, key)
	return e.waiters
}

// sweep forgets keys not seen for a TTL, at most once per TTL/4.
func (t *Table[K, T]) sweep(now time.Time) {
	if now.Before(t.sweepAt) {
		return
	}
	t.sweepAt = now.Add(t.ttl / 4)
	for k, e := range t.entries {
		if now.Sub(e.lastSeen) >= t.ttl && len(e.waiters) == 0 {
			delete(t.entries, k)
		}
	}
}
