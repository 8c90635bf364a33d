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
// the clock, and it is not safe for concurrent use. The admission gate
// (package admit, under httpx.Server and grpcx.Server) calls it under its
// own mutex; the simulator runs it on its one goroutine. Both drive the
// same rules.
//
// # Bounds
//
// Its memory is bounded whatever the callers send:
//
//   - at most Max keys. When the table is full a new key is not tracked
//     ([Untracked]: the request is served as if it had none) rather than
//     evicting one that is;
//   - at most MaxWaiters requests wait for one key's twin in service
//     ([WithMaxWaiters]); one more is refused ([Refuse]), and the shell
//     answers it at once rather than holding it;
//   - a key is forgotten TTL after it was last seen (an arrival with it, or
//     its request starting), unless requests wait on it: a key whose
//     request in service has waiters lives until [Table.DoneAt] hands them
//     over, so that no waiter is ever dropped unanswered.
//
// A key forgotten by its TTL while its request is still queued or in
// service may be taken by a newer request with the same key. A shell whose
// requests can outlive the TTL asks [Table.Held] before it calls
// [Table.StartAt] or [Table.DoneAt] for a request, so that it never acts on
// the newer one's behalf.
package supersede

import (
	"errors"
	"fmt"
	"strconv"
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

// Scope is the scope of an idempotency key, built part by part by a
// server's shell: what the request addresses and who sends it. Two
// requests are twins only if they carry the same key in the same scope.
// Each part goes in with its tag and its length, so that no two different
// lists of parts give the same scope. The zero Scope is empty and ready.
type Scope struct{ b strings.Builder }

// Add adds the part v, tagged tag (a letter that names what it is).
func (s *Scope) Add(tag byte, v string) {
	s.b.WriteByte(tag)
	s.b.WriteString(strconv.Itoa(len(v)))
	s.b.WriteByte(':')
	s.b.WriteString(v)
}

// Caller adds who sends the request as its credentials tell: the values of
// its authorization and cookie headers (or metadata) and its TLS client
// certificate (DER; nil: none). A caller without credentials adds nothing:
// all such callers are one to the scope.
func (s *Scope) Caller(authorization, cookie []string, cert []byte) {
	for _, v := range authorization {
		s.Add('a', v)
	}
	for _, v := range cookie {
		s.Add('c', v)
	}
	if cert != nil {
		s.Add('t', string(cert))
	}
}

// String returns the scope.
func (s *Scope) String() string { return s.b.String() }

// What a request does on arrival, from [Table.ArriveAt].
type Action uint8

const (
	// Serve: no twin held; the request is tracked and goes on as usual.
	Serve Action = iota
	// Replace: a twin is queued; answer it "superseded" (Decision.Old) and
	// queue the newcomer in its place.
	Replace
	// Join: a twin is in service; the newcomer waits for its result.
	Join
	// Untracked: the table is full; the request is served without one.
	Untracked
	// Refuse: a twin is in service and MaxWaiters requests already wait
	// for it; refuse the newcomer at once (it is not tracked).
	Refuse
)

var actionNames = [...]string{"serve", "replace", "join", "untracked", "refuse"}

// String returns the action's name, such as "replace".
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("supersede.Action(%d)", uint8(a))
}

// Decision is [Table.ArriveAt]'s answer. Old is the queued twin to answer
// "superseded" when the action is Replace.
type Decision[T any] struct {
	Action Action
	Old    T
}

type entry[T any] struct {
	queued   bool // the held request waits in the queue (else in service)
	held     T
	waiters  []T // only while in service; at most maxWaiters
	lastSeen time.Time
}

// Table holds the keys of the requests a server queues or serves. K is the
// key's type (a hash of the header's value and its scope; the simulator's
// number), T the caller's handle of a request (a waiter, a simulator's
// attempt id): comparable, so that [Table.Held] and [Table.LeaveAt] can
// tell one request from another. The zero Table is not usable: build one
// with [New].
type Table[K comparable, T comparable] struct {
	max        int
	maxWaiters int
	ttl        time.Duration
	entries    map[K]*entry[T]
	sweepAt    time.Time
	stats      Stats
}

// Stats counts what the table decided.
type Stats struct {
	Superseded, Joined, Untracked, Refused uint64
}

// Defaults of the options.
const (
	// DefaultMaxWaiters bounds the requests that wait for one key's
	// request in service. A person taps five or six times; a client's
	// retries are a handful; sixteen leaves room and bounds a thumb that
	// does not stop.
	DefaultMaxWaiters = 16
)

// Option changes a [Table] built by [New].
type Option func(*options)

type options struct{ maxWaiters int }

// WithMaxWaiters bounds the requests that wait for one key's request in
// service to n [DefaultMaxWaiters]; the next is refused ([Refuse]). n ≤ 0
// keeps the default.
func WithMaxWaiters(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxWaiters = n
		}
	}
}

// New returns a Table of at most max keys (0: DefaultMax), each forgotten ttl
// after it was last seen (0: DefaultTTL) unless requests wait on it.
func New[K comparable, T comparable](max int, ttl time.Duration, opts ...Option) *Table[K, T] {
	if max <= 0 {
		max = DefaultMax
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	o := options{maxWaiters: DefaultMaxWaiters}
	for _, f := range opts {
		f(&o)
	}
	return &Table[K, T]{max: max, maxWaiters: o.maxWaiters, ttl: ttl, entries: map[K]*entry[T]{}}
}

// Len returns the number of keys held.
func (t *Table[K, T]) Len() int { return len(t.entries) }

// Stats returns the counts so far.
func (t *Table[K, T]) Stats() Stats { return t.stats }

// expired reports whether e may be forgotten at now: not seen for a TTL,
// and nobody waits on it.
func (t *Table[K, T]) expired(now time.Time, e *entry[T]) bool {
	return len(e.waiters) == 0 && now.Sub(e.lastSeen) >= t.ttl
}

// ArriveAt decides what request h with key does when it arrives at now,
// queued (the server is about to queue it) or not (it is about to start
// service at once):
//
//	key held?                     action      the table then holds
//	no (or forgotten by the TTL)  Serve       h, queued or in service
//	no, and the table is full     Untracked   nothing for h
//	yes, its request queued       Replace     h in the twin's place; Old is the twin
//	yes, its request in service   Join        h among its waiters
//	  … with MaxWaiters waiting   Refuse      nothing for h
func (t *Table[K, T]) ArriveAt(now time.Time, key K, h T, queued bool) Decision[T] {
	t.sweep(now)
	e, ok := t.entries[key]
	if ok && t.expired(now, e) {
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
	if e.queued {
		e.lastSeen = now
		old := e.held
		e.held = h
		e.queued = queued
		t.stats.Superseded++
		return Decision[T]{Action: Replace, Old: old}
	}
	if len(e.waiters) >= t.maxWaiters {
		t.stats.Refused++
		return Decision[T]{Action: Refuse}
	}
	e.lastSeen = now
	e.waiters = append(e.waiters, h)
	t.stats.Joined++
	return Decision[T]{Action: Join}
}

// Held returns the request that holds key and whether it is queued; ok is
// false if the table does not hold key. A shell asks it to check that a
// request it is about to start or end is still the one the table holds.
func (t *Table[K, T]) Held(key K) (h T, queued, ok bool) {
	e, ok := t.entries[key]
	if !ok {
		return h, false, false
	}
	return e.held, e.queued, true
}

// StartAt records that the held request of key starts service.
func (t *Table[K, T]) StartAt(now time.Time, key K) {
	if e, ok := t.entries[key]; ok {
		e.queued = false
		e.lastSeen = now
	}
}

// LeaveAt takes waiter h of key off its list (its caller went away before
// the result came) and reports whether it was there. It does not count as
// the key being seen.
func (t *Table[K, T]) LeaveAt(now time.Time, key K, h T) bool {
	e, ok := t.entries[key]
	if !ok {
		return false
	}
	for i, w := range e.waiters {
		if w == h {
			last := len(e.waiters) - 1
			copy(e.waiters[i:], e.waiters[i+1:])
			var zero T
			e.waiters[last] = zero
			e.waiters = e.waiters[:last]
			return true
		}
	}
	return false
}

// DoneAt records that the held request of key ended (served, shed, expired,
// dropped) and returns the requests that joined it, in the order they
// came, to be answered with its result; the key is forgotten.
func (t *Table[K, T]) DoneAt(now time.Time, key K) []T {
	e, ok := t.entries[key]
	if !ok {
		return nil
	}
	delete(t.entries, key)
	return e.waiters
}

// sweep forgets keys not seen for a TTL that nobody waits on, at most once
// per TTL/4.
func (t *Table[K, T]) sweep(now time.Time) {
	if now.Before(t.sweepAt) {
		return
	}
	t.sweepAt = now.Add(t.ttl / 4)
	for k, e := range t.entries {
		if t.expired(now, e) {
			delete(t.entries, k)
		}
	}
}
