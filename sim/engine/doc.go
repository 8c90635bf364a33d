// Package engine is the discrete-event core of stormguard's simulator: a
// clock in virtual time, a queue of scheduled events, and seeded random
// streams. It knows nothing about clients, servers or networks; the models
// built on it do.
//
// # Time and events
//
// Virtual time is a [Time], int64 nanoseconds since the start of the run;
// spans are ordinary time.Duration values. An [Event] is a small value
// struct: a model-defined [Kind], a Target entity and two int64 words of
// payload, plus the time At and sequence number Seq that the engine
// assigns when the event is scheduled. Events are stored by value, inline
// in the engine's arrays: scheduling one allocates nothing, boxes nothing
// into an interface, and captures no closure.
// A program that runs simulations one after another can hand the arrays a
// finished engine has grown to the next one ([Engine.Release],
// [Engine.Reuse]) instead of growing them again.
//
// Events fire in order of At; events with equal At fire in the order they
// were scheduled (by Seq), whichever structure holds them.
//
// # Dispatch
//
// The engine does not call the model per event through closures. The model
// asks for the next event and switches on its kind:
//
//	var ev engine.Event
//	for e.NextUntil(end, &ev) {
//		switch ev.Kind {
//		case Arrive:
//			…
//		case Timeout:
//			…
//		}
//	}
//
// This is the fastest form — one call per event, which copies the event into
// the caller's variable, and a switch on a small integer — and it keeps the
// model's control flow in one readable place. [Engine.Next] and [Engine.NextUntil]
// return false when nothing is left (or nothing before the limit); the clock,
// [Engine.Now], always reads the time of the event just delivered. For
// models that prefer a method, [Engine.Run] calls a long-lived [Handler]
// once per event; that costs one interface call per event, nothing more.
//
// # Heap and fixed-delay queues
//
// Events scheduled with [Engine.At] or [Engine.After] go into a 4-ary
// min-heap ordered by (At, Seq): O(log n) per event. The heap keeps the
// 16-byte sort keys apart from the rest of each event, so that choosing
// among a node's four children reads one cache line. Many simulated timers
// share one delay — every client's request timeout, say — and for those
// the engine offers fixed-delay queues ([Engine.NewFixedQueue],
// [FixedQueue.Add]). Entries of one queue fire in the order they were added,
// so a queue is a FIFO ring with O(1) insertion and removal; when choosing
// the next event the engine compares the heap's head with the fronts of the
// queues (kept in a small heap of their own, so many queues are fine). A
// million pending timeouts then cost the heap nothing.
//
// # Cancellation
//
// Cancellation is lazy. [FixedQueue.Add] returns a [Handle], as do
// [Engine.AtCancelable] and [Engine.AfterCancelable]; [Engine.Cancel]
// marks the event dead in O(1) (a bit in the queue, or the event's slot in a
// table for heap events) and the event is discarded, never delivered, when
// it reaches the front. Cancelling an event that already fired, or was
// already cancelled, is a harmless no-op: handles are never confused with
// later events that reuse the storage. Plain At and After return no handle
// and skip the bookkeeping.
//
// # Determinism
//
// The engine has no goroutines, maps, global state or wall clock: the same
// sequence of calls produces the same sequence of events, bit for bit, on
// every run. Randomness comes from per-entity streams, [Stream](seed, id),
// which depend only on the seed and a stable id the model gives each entity,
// never on the order in which entities were created. A model that draws
// from these streams and iterates only over slices is reproducible from its
// seed. (Across processor architectures, floating-point results — and so
// anything derived from them — may differ in the last bit, because Go
// allows fused multiply-add on some of them.)
//
// # Cost
//
// BenchmarkEngine, on the 2-core development machine (a shared virtual
// machine: under load from neighbours the memory-bound cases lose up to a
// third; these are quiet-run figures), allocating nothing in steady state:
//
//	small       100 pending events, each scheduling the next after a     ~23 M events/s
//	            random delay (via Run and a Handler: ~19 M events/s)
//	pending1e6  10⁶ clients, each with a timeout pending in a FixedQueue, ~5.7 M events/s
//	            replies in the heap that cancel them (more than half of
//	            the cost is the model's random access to 24 MB of client
//	            state, about 150 ns a miss on this machine)
//	heap1e6     10⁶ events in the heap itself, for comparison            ~2.3 M events/s
//
// An Engine is not safe for concurrent use; run independent simulations on
// separate Engines, in parallel if you like.
package engine
