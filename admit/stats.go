package admit

import (
	"strconv"
	"sync/atomic"

	"github.com/stormguard/stormguard/shed"
)

// ShedReason says why a [Gate] refused a request for overload; it indexes
// [Stats].Shed.
type ShedReason uint8

// The shed reasons.
const (
	// ShedQueueFull: the limit was reached and the queue was full of
	// requests it would serve first (InstanceOverloaded).
	ShedQueueFull ShedReason = iota
	// ShedEvicted: it waited in the queue and was pushed out by a request
	// the queue serves first (InstanceOverloaded).
	ShedEvicted
	// ShedQueueTimeout: it waited longer than adaptive LIFO allows
	// (InstanceOverloaded).
	ShedQueueTimeout
	// ShedKillSwitch: the dials' shed fraction chose it (ServiceOverloaded).
	ShedKillSwitch
	// ShedThrottled: [Request].Throttle throttled its client (Throttled).
	ShedThrottled
	// ShedKeyBusy: its idempotency key's twin was in service and
	// Config.Supersede.MaxWaiters requests already waited for it
	// (Throttled).
	ShedKeyBusy

	// NumShedReasons is the number of shed reasons.
	NumShedReasons = iota
)

var shedReasonNames = [NumShedReasons]string{"queue-full", "evicted", "queue-timeout", "kill-switch", "throttled", "key-busy"}

// String returns the reason's name, such as "queue-full", as metrics label
// it.
func (r ShedReason) String() string {
	if int(r) < len(shedReasonNames) {
		return shedReasonNames[r]
	}
	return "admit.ShedReason(" + strconv.Itoa(int(r)) + ")"
}

// Stats is a snapshot of a [Gate]'s counters, in the vocabulary of the whole
// project (offered load, goodput, wasted work, shed, expired); both servers
// report in it, so one metrics collector serves both. Counters count since
// [New]; gauges are values now. Every request that arrived ends in exactly
// one outcome, so once nothing is in flight or queued
//
//	Arrived = Goodput + Failed + Wasted + ShedTotal() + Expired + Canceled
//	          + Superseded + Joined
//
// (while requests are in progress the difference is InFlight, Queued,
// Joining and those in between steps).
type Stats struct {
	// Arrived counts the requests that reached the gate (offered load),
	// Retries those of them with an attempt number above 1.
	Arrived uint64 `json:"arrived"`
	Retries uint64 `json:"retries"`
	// InFlight is the number of requests admitted and not yet released
	// now, Limit the concurrency limit now and Queued the requests waiting
	// now.
	InFlight int `json:"in_flight"`
	Limit    int `json:"limit"`
	Queued   int `json:"queued"`
	// Joining is the number of requests waiting now for the result of a
	// twin in service (see Config.Supersede).
	Joining int `json:"joining"`
	// Goodput counts requests that succeeded (on HTTP a status below 500)
	// while their caller was still waiting.
	Goodput uint64 `json:"goodput"`
	// Failed counts requests that failed (on HTTP a status of 500 or more)
	// while their caller was waiting, or panicked.
	Failed uint64 `json:"failed"`
	// Wasted counts requests that ended after their caller had left or
	// their deadline had passed: work nobody was waiting for.
	// WastedLate counts those of them that ended after their deadline had
	// passed (the work took too long); the others returned after their
	// caller went away before the deadline.
	Wasted     uint64 `json:"wasted"`
	WastedLate uint64 `json:"wasted_late"`
	// Shed counts refusals for overload by reason, indexed by ShedReason.
	Shed [NumShedReasons]uint64 `json:"shed"`
	// Expired counts requests dropped before they started because their
	// deadline had passed or left MinRemaining or less, on arrival or
	// while queued; ExpiredQueued counts those of them that expired while
	// they waited in the queue (the others had too little time left on
	// arrival).
	Expired       uint64 `json:"expired"`
	ExpiredQueued uint64 `json:"expired_queued"`
	// Canceled counts requests whose caller went away while they waited in
	// the queue, or for their twin.
	Canceled uint64 `json:"canceled"`
	// Superseded counts requests that a newer request with the same
	// idempotency key replaced in the queue; Joined those that waited for
	// the result of a twin in service and were answered with it (they did
	// not run). Both are 0 unless Config.Supersede is set.
	Superseded uint64 `json:"superseded"`
	Joined     uint64 `json:"joined"`
	// Queue is the queue's own account, first tries and retries apart.
	Queue shed.Stats `json:"queue"`
}

// ShedTotal returns the requests shed for any reason.
func (st Stats) ShedTotal() uint64 {
	var n uint64
	for _, v := range st.Shed {
		n += v
	}
	return n
}

// Started returns the requests admitted: Goodput + Failed + Wasted +
// InFlight.
func (st Stats) Started() uint64 {
	return st.Goodput + st.Failed + st.Wasted + uint64(max(st.InFlight, 0))
}

// counters are a core's metrics. A core shared by goroutines (a Gate's)
// updates them with atomics; one that runs on one goroutine (the
// simulator's, OneGoroutine) with plain adds. Stats reads them atomically.
type counters struct {
	_       [0]atomic.Uint64 // 64-bit alignment, for the atomics on 32-bit platforms
	arrived uint64
	retries uint64
	started uint64 // admitted; those in flight are started − the sum of fates
	// fates counts the admitted requests that ended, by Fate: wasted work
	// is fates[FateWasted] + fates[FateWastedLate].
	fates   [numFates]uint64
	expired uint64
	// expiredQueued counts a subset of expired: a request adds to the total
	// first, and Stats reads the subset first, so that a snapshot never has
	// more in the subset than in its total.
	expiredQueued uint64
	canceled      uint64
	superseded    uint64
	joined        uint64
	joining       int64 // a gauge
	shed          [NumShedReasons]uint64
}

// inc adds one to a counter of c.
func (c *Core[T]) inc(x *uint64) {
	if c.one {
		*x++
		return
	}
	atomic.AddUint64(x, 1)
}

// dec takes one from a counter of c.
func (c *Core[T]) dec(x *uint64) {
	if c.one {
		*x--
		return
	}
	atomic.AddUint64(x, ^uint64(0))
}

// joiningAdd adds d to the joining gauge.
func (c *Core[T]) joiningAdd(d int64) {
	if c.one {
		c.c.joining += d
		return
	}
	atomic.AddInt64(&c.c.joining, d)
}
