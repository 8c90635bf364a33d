package shed

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// script runs a random mix of pushes (with and without deadlines, first
// tries and retries), pops, removals and expiries on q and returns a log of
// every outcome, handles included.
func script(q *Queue[int], seed uint64, ops int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	var handles []Handle
	now := t0
	for i := range ops {
		now = now.Add(time.Duration(r.IntN(3)) * time.Millisecond)
		switch op := r.IntN(10); {
		case op < 6:
			it := Item[int]{Payload: i, Attempt: 1 + r.IntN(2)}
			if r.IntN(2) == 0 {
				it.Deadline = now.Add(time.Duration(1+r.IntN(40)) * time.Millisecond)
			}
			a := q.PushAt(now, it)
			handles = append(handles, a.Handle)
			fmt.Fprintf(&b, "push %d: %v %v %v %d\n", i, a.Refused, a.Handle, a.VictimReason, a.Victim.Payload)
		case op < 8:
			it, why, ok := q.PopAt(now)
			fmt.Fprintf(&b, "pop: %d %v %v\n", it.Payload, why, ok)
		case op < 9 && len(handles) > 0:
			h := handles[r.IntN(len(handles))]
			it, ok := q.Remove(h)
			fmt.Fprintf(&b, "remove %v: %d %v\n", h, it.Payload, ok)
		default:
			it, why, ok := q.ExpireAt(now)
			fmt.Fprintf(&b, "expire: %d %v %v\n", it.Payload, why, ok)
		}
	}
	fmt.Fprintf(&b, "%+v len %d\n", q.Stats(), q.Len())
	return b.String()
}

// TestReuse: a queue on the storage of another, left in any state, behaves
// exactly as a new queue, handles included.
func TestReuse(t *testing.T) {
	cfgs := []Config{
		{Capacity: 500},
		{Capacity: 100, Order: LIFO, Priority: NoPriority, MinRemaining: time.Millisecond},
		{Capacity: 300, Order: AdaptiveLIFO, Priority: FirstTries},
	}
	tests := []struct {
		name     string
		prev     Config
		prevOps  int
		wantUsed bool // the new queue takes old's storage
	}{
		{name: "after a big queue", prev: Config{Capacity: 5000}, prevOps: 20_000, wantUsed: true},
		{name: "after the same queue", prev: Config{Capacity: 300}, prevOps: 3000, wantUsed: true},
		{name: "after a small queue", prev: Config{Capacity: 10}, prevOps: 100},
	}
	for _, cfg := range cfgs {
		want := script(mustNew[int](t, cfg), 9, 5000)
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%d/%s", cfg.Capacity, tt.name), func(t *testing.T) {
				// The old queue is of the new one's kind (a plain
				// queue's ring, or slots), so that it has storage q can
				// take, unless the script's deadlines made it a list
				// and the new one is a ring.
				prev := tt.prev
				prev.Order, prev.Priority = cfg.Order, cfg.Priority
				old := mustNew[int](t, prev)
				script(old, 4, tt.prevOps)
				room := storage(old)
				q := mustNew[int](t, cfg)
				wantUsed := tt.wantUsed && (old.ring || !q.ring)
				q.Reuse(old)
				if used := storage(q) == room; used != wantUsed {
					t.Errorf("storage reused: %v, want %v", used, wantUsed)
				}
				if got := script(q, 9, 5000); got != want {
					t.Errorf("reused queue differs from a new one:\n%s", firstDiff(got, want))
				}
			})
		}
	}
}

// storage returns the address of the first item place of q: its ring's
// or its slots'.
func storage(q *Queue[int]) uintptr {
	if q.ring {
		return uintptr(unsafe.Pointer(&q.ritems[:1][0]))
	}
	return uintptr(unsafe.Pointer(&q.slots[:1][0]))
}

// TestReuseUsedQueue: Reuse leaves a queue that has held items alone.
func TestReuseUsedQueue(t *testing.T) {
	for _, cfg := range []Config{{Capacity: 1000}, {Capacity: 1000, Priority: NoPriority}} {
		old := mustNew[int](t, cfg)
		for i := range 500 {
			old.PushAt(t0, Item[int]{Payload: i})
		}
		q := mustNew[int](t, cfg)
		q.PushAt(t0, Item[int]{Payload: 1})
		before := storage(q)
		q.Reuse(old)
		if storage(q) != before {
			t.Errorf("%+v: Reuse replaced the storage of a queue in use", cfg)
		}
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(g), len(w))
}
