package engine

// Storage is the memory an [Engine] has grown: its heap, its cancellation
// slots and its fixed queues' rings. A program that runs simulations one
// after another takes it from a finished engine with [Engine.Release] and
// hands it to the next with [Engine.Reuse], so that each run does not grow
// (allocate, copy and clear) the same arrays again. It changes no result:
// the order of events does not depend on how much room the arrays have.
//
// A Storage holds as much memory as the engine it came from had grown, and
// nothing else; drop it to let the collector have it.
type Storage struct {
	k     []hkey
	v     []hval
	slots []uint64
	free  []uint32
	rings []ring
}

// ring is a fixed queue's storage.
type ring struct {
	buf  []Event
	dead []uint64
}

// Release returns e's storage. e must not be used afterwards, nor its
// fixed queues.
func (e *Engine) Release() *Storage {
	s := &Storage{k: e.heap.k, v: e.heap.v, slots: e.slots, free: e.free}
	for _, q := range e.queues {
		if len(q.buf) > 0 {
			s.rings = append(s.rings, ring{q.buf, q.dead})
		}
		q.buf, q.dead = nil, nil
	}
	*e = Engine{}
	return s
}

// Reuse makes e use s's storage: the heap and the cancellation slots start
// with s's room, and the fixed queues e creates next take s's rings, one
// each in turn, as long as there are some. e must be new: nothing
// scheduled yet and no fixed queue. s must not be used afterwards. A nil s
// is allowed and does nothing.
func (e *Engine) Reuse(s *Storage) {
	if s == nil {
		return
	}
	if e.seq != 0 || len(e.queues) > 0 {
		panic("engine: Reuse on an engine already in use")
	}
	if cap(s.k) >= 5 && cap(s.v) >= 1 {
		// The heap's invariant: the four keys past the end are sentinels.
		k := s.k[:0]
		for i := range 4 {
			k[:4][i] = sentinelKey
		}
		e.heap = eventHeap{k: k, v: s.v[:0]}
	}
	e.slots, e.free = s.slots[:0], s.free[:0]
	e.spare = s.rings
	*s = Storage{}
}
