package engine

// Kind says what an event means. The engine never interprets it: the model
// declares its own kinds, typically as constants
//
//	const (
//		Arrive engine.Kind = iota
//		Reply
//		Timeout
//	)
//
// and switches on them.
type Kind uint16

// Event is one scheduled occurrence, a small value struct (40 bytes, no
// pointers) that the engine stores by value in its own arrays: as it is in
// a [FixedQueue]'s ring, and in the heap split into its sort key (At, Seq)
// and the rest, so that finding the earliest event reads keys only.
//
// The model fills Kind, Target, A and B when it schedules an event; the
// engine sets At and Seq and ignores whatever the caller put there. An event
// that has been delivered can be scheduled again as it is (its At and Seq are
// overwritten), which makes recurring events cheap.
type Event struct {
	// At is the virtual time at which the event fires. Set by the engine.
	At Time
	// Seq is the event's scheduling sequence number on its Engine: 1 for the
	// first event scheduled, then 2, 3, … Set by the engine. Among events
	// with equal At, the lower Seq fires first (first scheduled, first fired).
	Seq uint64
	// A and B are payload for the model, for example a request id and an
	// attempt number, or a duration in nanoseconds.
	A, B int64
	// Target names the entity the event is for, for example an index into
	// the model's slice of clients.
	Target uint32
	// Kind says what the event means to the model.
	Kind Kind
}

// before reports whether a fires before b: by time, then by sequence number.
// Sequence numbers are unique, so this is a strict total order.
func before(a, b *Event) bool {
	return a.At < b.At || (a.At == b.At && a.Seq < b.Seq)
}

// Handle identifies a cancelable scheduled event; pass it to [Engine.Cancel]
// or [Engine.Pending]. It is a small value (16 bytes, no pointers) meant to
// be stored in the model's per-entity state.
//
// A Handle stays valid forever: once its event has fired or been cancelled,
// Cancel and Pending report false for it, even after the engine has reused
// the event's storage. The zero Handle refers to no event. A Handle is only
// meaningful to the Engine that returned it.
type Handle struct {
	id    uint64 // heap events: the event's Seq (0 for the zero Handle); queue entries: the entry's number
	slot  uint32 // heap events: the cancellation slot
	queue uint32 // 0 for heap events, else the FixedQueue's id
}

// Handler receives events from [Engine.Run], one call per event, in firing
// order. The engine's clock already reads ev.At when Handle is called, and
// Handle may schedule and cancel events freely.
type Handler interface {
	Handle(e *Engine, ev Event)
}

// HandlerFunc adapts a function to the [Handler] interface.
type HandlerFunc func(e *Engine, ev Event)

// Handle calls f(e, ev).
func (f HandlerFunc) Handle(e *Engine, ev Event) { f(e, ev) }

var _ Handler = HandlerFunc(nil)
