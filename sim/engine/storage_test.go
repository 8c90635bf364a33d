package engine

import (
	"hash/fnv"
	"testing"
	"time"
)

// storageHash is scenarioHash on an engine that reuses st (nil: a new
// engine), and returns the engine's storage afterwards.
func storageHash(st *Storage, seed uint64, events int) (uint64, *Storage) {
	s := &scenario{clients: make([]scenarioClient, 200)}
	s.e.Reuse(st)
	s.timeout = s.e.NewFixedQueue(50 * time.Millisecond)
	for i := range s.clients {
		c := &s.clients[i]
		c.r = Stream(seed, uint64(i))
		s.e.After(s.delay(c, 10*time.Millisecond), Event{Kind: kindSend, Target: uint32(i)})
	}
	h := fnv.New64a()
	s.trace = hashEvent(h)
	s.run(events)
	// Cancel what is pending, as a run stopped at its horizon leaves it.
	for i := range s.clients {
		s.e.Cancel(s.clients[i].timer)
	}
	return h.Sum64(), s.e.Release()
}

// TestReuseSameEvents: an engine on storage released by another, which
// stopped with events still pending in its heap and its ring (some
// cancelled), delivers the same events as a new engine.
func TestReuseSameEvents(t *testing.T) {
	tests := []struct {
		name        string
		prevEvents  int // events the previous engine ran; 0: no previous engine
		seed        uint64
		events      int
		prevSeedOff uint64
	}{
		{name: "new", seed: 3, events: 30_000},
		{name: "after a longer run", prevEvents: 80_000, seed: 3, events: 30_000, prevSeedOff: 1},
		{name: "after a shorter run", prevEvents: 500, seed: 3, events: 30_000, prevSeedOff: 2},
		{name: "after the same run", prevEvents: 30_000, seed: 3, events: 30_000},
	}
	want, _ := storageHash(nil, 3, 30_000)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st *Storage
			if tt.prevEvents > 0 {
				_, st = storageHash(nil, tt.seed+tt.prevSeedOff, tt.prevEvents)
			}
			got, st2 := storageHash(st, tt.seed, tt.events)
			if got != want {
				t.Errorf("hash %x, want %x (a new engine's)", got, want)
			}
			// And once more on the storage this run released.
			if got, _ := storageHash(st2, tt.seed, tt.events); got != want {
				t.Errorf("second reuse: hash %x, want %x", got, want)
			}
		})
	}
}

// TestReuseKeepsRoom: a run on the storage of a run like it grows nothing.
func TestReuseKeepsRoom(t *testing.T) {
	var st *Storage
	allocs := testing.AllocsPerRun(3, func() { // the warm-up run grows the arrays
		var e Engine
		e.Reuse(st)
		q := e.NewFixedQueue(time.Millisecond)
		for i := range 2000 {
			q.Add(Event{A: int64(i)})
			e.After(time.Duration(i), Event{A: int64(i)})
			e.AfterCancelable(time.Duration(i), Event{A: int64(i)})
		}
		st = e.Release()
	})
	// The engine, the queue, the lists of queues and of non-empty queues,
	// the Storage and its list of rings: six, however many events (a new
	// engine makes about 30 here).
	if allocs > 6 {
		t.Errorf("%v allocations, want at most 6", allocs)
	}
}

// TestReuseInUsePanics: Reuse refuses an engine that has scheduled events.
func TestReuseInUsePanics(t *testing.T) {
	var e Engine
	e.After(0, Event{})
	defer func() {
		if recover() == nil {
			t.Error("Reuse on a used engine did not panic")
		}
	}()
	e.Reuse(&Storage{})
}
