package engine

import "time"

// refEngine is the obvious, slow implementation of the engine's contract,
// for differential tests: every pending event in one slice, the earliest
// found by a linear scan over (At, Seq).
type refEngine struct {
	now     Time
	seq     uint64
	pending []Event
}

// schedule adds ev at time t and returns its Seq.
func (r *refEngine) schedule(t Time, ev Event) uint64 {
	r.seq++
	ev.At, ev.Seq = t, r.seq
	r.pending = append(r.pending, ev)
	return r.seq
}

func (r *refEngine) after(d time.Duration, ev Event) uint64 {
	return r.schedule(r.now.Add(d), ev)
}

// cancel removes the event with the given Seq and reports whether it was
// pending.
func (r *refEngine) cancel(seq uint64) bool {
	for i := range r.pending {
		if r.pending[i].Seq == seq {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			return true
		}
	}
	return false
}

func (r *refEngine) next(ev *Event) bool {
	if len(r.pending) == 0 {
		return false
	}
	m := 0
	for i := range r.pending {
		if before(&r.pending[i], &r.pending[m]) {
			m = i
		}
	}
	*ev = r.pending[m]
	r.pending = append(r.pending[:m], r.pending[m+1:]...)
	r.now = ev.At
	return true
}
