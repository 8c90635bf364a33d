package shed

import "strconv"

// Reason says why a queue gave up an item (refused it, evicted it or dropped
// it), so that the caller can answer it. The zero value, [None], means it did
// not: the item was admitted, or is to be served.
type Reason uint8

// The reasons.
const (
	// None: nothing was given up.
	None Reason = iota
	// QueueFull: PushAt refused the newcomer because the queue was full of
	// items it would serve before it. The instance is overloaded.
	QueueFull
	// Evicted: PushAt removed this queued item from a full queue to make
	// room for a newcomer it would serve first (a better class, or under
	// LIFO a newer item of the same class). The instance is overloaded.
	Evicted
	// Expired: the item's deadline passed, or left MinRemaining or less,
	// before it could start. The caller has given up or is about to; it
	// must not be retried.
	Expired
	// QueueTimeout: the item waited longer than adaptive LIFO allows
	// although its caller still had time. The instance is overloaded.
	QueueTimeout
)

var reasonNames = [...]string{
	None:         "none",
	QueueFull:    "queue-full",
	Evicted:      "evicted",
	Expired:      "expired",
	QueueTimeout: "queue-timeout",
}

// String returns the reason's name in lower case, such as "queue-full", as
// metrics label it.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "shed.Reason(" + strconv.Itoa(int(r)) + ")"
}

// IsOverload reports whether r means that this instance was too busy
// (QueueFull, Evicted, QueueTimeout): the caller should be answered with an
// overload signal, see [Decide]. Expired is not one: the caller's deadline
// passed, and the answer is a deadline error that no layer retries.
func (r Reason) IsOverload() bool {
	return r == QueueFull || r == Evicted || r == QueueTimeout
}

// Counts counts how the items of one kind (first tries or retries) fared
// in a [Queue]. Every item pushed is counted once in Pushed and once more in
// exactly one of the other fields, so
//
//	Pushed = Queued + Served + Removed + Full + Evicted + Expired + TimedOut
//
// The zero value is all zeros.
type Counts struct {
	Queued   int    // in the queue now
	Pushed   uint64 // offered to PushAt, admitted or not
	Served   uint64 // returned by PopAt to be served
	Removed  uint64 // taken back by Remove
	Full     uint64 // refused with QueueFull
	Evicted  uint64 // evicted with Evicted
	Expired  uint64 // refused or dropped with Expired
	TimedOut uint64 // dropped with QueueTimeout
}

// Shed returns the items shed for overload: Full + Evicted + TimedOut.
func (c Counts) Shed() uint64 { return c.Full + c.Evicted + c.TimedOut }

// Plus returns the field-by-field sum of c and d.
func (c Counts) Plus(d Counts) Counts {
	return Counts{
		Queued:   c.Queued + d.Queued,
		Pushed:   c.Pushed + d.Pushed,
		Served:   c.Served + d.Served,
		Removed:  c.Removed + d.Removed,
		Full:     c.Full + d.Full,
		Evicted:  c.Evicted + d.Evicted,
		Expired:  c.Expired + d.Expired,
		TimedOut: c.TimedOut + d.TimedOut,
	}
}

// Stats counts what a [Queue] did since [New]: first tries (attempt 1) and
// retries apart, since a queue that works serves the first and sheds the
// second. The zero value is all zeros.
type Stats struct {
	FirstTries Counts
	Retries    Counts
}

// Total returns the counts of first tries and retries together.
func (s Stats) Total() Counts { return s.FirstTries.Plus(s.Retries) }
