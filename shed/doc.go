// Package shed is a server's admission queue: it decides which waiting
// request runs next, which ones are dropped, and what a refused caller is
// told.
//
// [Queue] is a deterministic core. Production middleware wraps it with a
// mutex and one channel per waiter; the simulator drives the same code in
// virtual time. It never reads the clock, sleeps, starts goroutines or calls
// back: time is always an argument (the …At methods take now as a
// time.Time; the simulator passes time.Unix(0, ns) for its int64 nanosecond
// clock), and everything the queue gives up is returned to the caller, who
// answers it. After [New] it allocates nothing: items live in a slab
// preallocated to the capacity.
//
// # Disciplines
//
// Two fields of [Config] choose the discipline. Priority splits items into
// classes and always serves a better class first; Order chooses the item
// within the best class. The disciplines usually named map to them so:
//
//	discipline                        Order          Priority
//	first-tries-first (zero Config)   fifo           first-tries
//	fifo                              fifo           none
//	lifo                              lifo           none
//	adaptive LIFO (Facebook)          adaptive-lifo  none
//	first tries first, adaptive LIFO  adaptive-lifo  first-tries
//	criticality, then first tries     any            criticality
//
// Serving first tries before retries breaks a retry storm from the inside:
// new requests get through, succeed and cause no retries of their own, while
// the retries that overload would otherwise amplify wait, and are the first
// shed.
//
// # What leaves the queue, and why
//
// Every item pushed ends in exactly one way, and every way but the last is
// returned to the caller with a [Reason]:
//
//	served        PopAt returned it with None: run it
//	QueueFull     PushAt refused it: the queue was full of items it would serve first
//	Evicted       PushAt removed it from a full queue for a newcomer it would serve first
//	Expired       its deadline passed (or left no more than MinRemaining) before it started
//	QueueTimeout  it waited longer than adaptive LIFO allows (below)
//	removed       the caller took it back with Remove (its client went away)
//
// [Stats] counts each, for first tries and retries apart.
//
// # Adaptive LIFO
//
// With Order adaptive-lifo the queue follows the CoDel-inspired scheme that
// Facebook describes, applied to each priority class on its own. A class is
// overloaded when it has not been empty for CoDelInterval: it has items, and
// the last time it held none is at least CoDelInterval ago. While its class
// is overloaded an item is served newest first (LIFO), since the oldest are
// the likeliest to be abandoned by their callers; otherwise oldest first.
// Queued items also time out: an item may wait until CoDelTarget after it was
// pushed or until its class becomes overloaded, whichever is later, so at
// most CoDelInterval in a class that drains and CoDelTarget in one that does
// not:
//
//	queue timeout = max(pushed + CoDelTarget, lastEmpty + CoDelInterval)
//
// where lastEmpty is the instant the item's class last went from empty to
// not empty, which stays fixed as long as the item waits. With the defaults
// (5 ms, 100 ms), for a class that becomes non-empty at t = 0 and never
// drains:
//
//	pushed at   times out at   why
//	0 ms        100 ms         waited through normal mode; cut off when overload starts
//	60 ms       100 ms         idem
//	97 ms       102 ms         pushed + target
//	250 ms      255 ms         overloaded: pushed + target
//
// and from t = 100 ms the class is served newest first. Once it empties, the
// next push starts a new period in normal (FIFO) mode.
//
// With Priority none there is one class and this is Facebook's scheme as
// published. Judging each class apart matters once first tries come first:
// the retries they leave waiting keep the queue as a whole from ever
// draining, which would otherwise put the first tries, which do drain, under
// 5 ms timeouts too. [Queue.Overloaded] still reports on the whole queue.
//
// # Signals
//
// [Decide] tells a server which overload signal to send with a refusal: this
// instance is overloaded (retry elsewhere, after a delay) or the whole
// service is (do not retry at any layer). The HTTP and gRPC layers map it to
// status codes and headers (package wire names them).
package shed
