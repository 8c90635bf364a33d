package admit

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
)

// Step is what [Core.EnterAt] decided of an arriving request.
type Step uint8

const (
	// Go: admitted at once; run it with the permit EnterAt returned.
	Go Step = iota
	// Stop: not admitted; answer the decision EnterAt returned (counted).
	Stop
	// Hold: the rest of its way needs the core's queue or its supersession
	// table; call [Core.QueueAt] (a shell with goroutines: under its lock).
	Hold
)

// ActionKind says what an [Action] asks the shell to do.
type ActionKind uint8

const (
	// Start: run request H with Permit; Waited is how long it waited
	// (queued, or for its twin and then queued). Keep Ref: a request the
	// supersession table holds ends with [Core.EndAt], the others with
	// [Core.ReleaseAt].
	Start ActionKind = iota + 1
	// Respond: answer request H with Decision, without running it (shed,
	// expired, canceled, superseded, or joined with the twin's result). It
	// has been counted.
	Respond
	// Wait: request H waits in the queue; keep Ref, to take it out with
	// [Core.CancelAt] if its caller leaves.
	Wait
	// Join: request H waits for the result of a twin in service; keep Ref,
	// as for Wait.
	Join
	// Arm: set the timer of the queue's next expiry to fire at At, and call
	// [Core.TickAt] then (a timer already set to fire no later may stay).
	Arm
	// Disarm: nothing queued can expire; the timer may be stopped.
	Disarm
)

var actionNames = [...]string{"", "start", "respond", "wait", "join", "arm", "disarm"}

// String returns the kind's name, such as "start".
func (k ActionKind) String() string {
	if int(k) < len(actionNames) && k != 0 {
		return actionNames[k]
	}
	return "admit.ActionKind(" + strconv.Itoa(int(k)) + ")"
}

// Action is one thing a [Core] step asks its shell to do, for request H
// (the caller's handle of the request: a waiter, a simulator's attempt id).
// The steps return them in order in a slice the core reuses: it is valid
// until the core's next step. A request gets at most one Start or Respond
// in a step (its last action there), after any number of Wait and Join.
type Action[T any] struct {
	Kind     ActionKind
	H        T
	Ref      Ref
	Permit   limit.Permit
	Decision Decision
	Waited   time.Duration
	At       time.Time
}

// Ref is the core's reference to a request it holds: queued, waiting for
// its twin, or, if the supersession table holds its key, in service. The
// shell keeps the latest one an action gave it and passes it back to
// [Core.CancelAt], [Core.EndAt] or [Core.AbandonAt]. The zero Ref holds
// nothing.
type Ref struct {
	q   shed.Handle // its place in the queue, when unkeyed and queued
	k   int32       // its index in the core's keyed requests, plus one; 0: unkeyed
	gen uint32      // that slot's generation
}

// Keyed reports whether the supersession table may hold the request:
// release it with [Core.EndAt].
func (r Ref) Keyed() bool { return r.k != 0 }

// Key is an idempotency key as a [Core] holds it: 32 bytes that tell keys
// apart. [KeyOf] makes one from a request's key and scope (the gate's
// shells); the simulator writes its key numbers into one.
type Key [sha256.Size]byte

// KeyOf returns the Key of a request's scope and idempotency key: a
// SHA-256 of both, the scope's length first, so that no split of one
// string into scope and key reads as another's, and every key costs the
// same memory however long its scope.
func KeyOf(scope, key string) Key {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(scope)))
	h.Write(n[:])
	h.Write([]byte(scope))
	h.Write([]byte(key))
	var k Key
	h.Sum(k[:0])
	return k
}

// Fate is how a released request counts, by the rule of [Classify].
type Fate uint8

const (
	// FateGoodput: it succeeded while its caller still waited.
	FateGoodput Fate = iota
	// FateFailed: it failed (or panicked) while its caller still waited.
	FateFailed
	// FateWasted: its caller had left before it ended.
	FateWasted
	// FateWastedLate: it ended after its deadline had passed.
	FateWastedLate

	numFates = 4 // a power of two: Fate & (numFates − 1) needs no bounds check
)

var fateNames = [...]string{"goodput", "failed", "wasted", "wasted-late"}

// String returns the fate's name, such as "goodput".
func (f Fate) String() string {
	if int(f) < len(fateNames) {
		return fateNames[f]
	}
	return "admit.Fate(" + strconv.Itoa(int(f)) + ")"
}

// sample is what a release teaches the concurrency limit.
type sample uint8

const (
	sampleNone    sample = iota // IgnoreAt
	sampleSuccess               // SuccessAt: an RTT
	sampleDropped               // DroppedAt: overload
)

// classify is the release rule of the package documentation's table: a
// panic first, then a deadline that passed (late), then a caller that
// went away (gone), then the outcome.
func classify(o Outcome, late, gone bool) (Fate, sample) {
	switch {
	case o == Panicked:
		return FateFailed, sampleNone
	case late:
		return FateWastedLate, sampleDropped
	case gone:
		return FateWasted, sampleNone
	case o == Succeeded:
		return FateGoodput, sampleSuccess
	case o == SucceededUntimed:
		return FateGoodput, sampleNone
	case o == FailedOverload:
		return FateFailed, sampleDropped
	default: // Failed
		return FateFailed, sampleNone
	}
}

// Classify returns how a request whose work ended at now with outcome o
// counts: goodput only when it succeeded while its caller was still
// waiting (gone false) and before its deadline (the zero Time: none). It is
// the rule [Core.ReleaseAt] counts by, for a model that has no core to
// release (the simulator's services of fixed capacity per tick).
func Classify(now, deadline time.Time, gone bool, o Outcome) Fate {
	f, _ := classify(o, late(now, deadline), gone)
	return f
}

// late reports whether work that ended at now outlived deadline (the zero
// Time: none).
func late(now, deadline time.Time) bool {
	return !deadline.IsZero() && !now.Before(deadline)
}
