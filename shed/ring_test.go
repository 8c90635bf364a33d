package shed

import (
	"testing"
	"time"
)

// TestRing follows a plain queue's ring through its cases: it wraps at
// the end of its storage while it holds little, grows in place while it
// holds more than a quarter, becomes a list queue when it fills while
// wrapped (or meets a deadline, or a Remove), and keeps FIFO order and
// every handle across all of it.
func TestRing(t *testing.T) {
	type step struct {
		name         string
		push, pop    int
		deadline     bool // the pushes carry deadlines
		remove       int  // then Remove this payload's handle
		wantRing     bool
		wantSlots    int
		wantLen      int
		wantHeadTail [2]int32 // in ring mode
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"wraps, fills, becomes a list", []step{
			{name: "fill", push: 60, pop: 55, wantRing: true, wantSlots: 64, wantLen: 5, wantHeadTail: [2]int32{55, 60}},
			{name: "to the end", push: 4, wantRing: true, wantSlots: 64, wantLen: 9, wantHeadTail: [2]int32{55, 64}},
			{name: "wraps", push: 1, wantRing: true, wantSlots: 64, wantLen: 10, wantHeadTail: [2]int32{55, 1}},
			{name: "fills while wrapped", push: 54, wantRing: true, wantSlots: 64, wantLen: 64, wantHeadTail: [2]int32{55, 55}},
			{name: "one more: a list", push: 1, wantRing: false, wantSlots: 128, wantLen: 65},
			{name: "drains in order", pop: 65, wantRing: false, wantSlots: 128},
		}},
		{"grows in place", []step{
			{name: "fill", push: 64, pop: 10, wantRing: true, wantSlots: 64, wantLen: 54, wantHeadTail: [2]int32{10, 64}},
			{name: "grows", push: 1, wantRing: true, wantSlots: 128, wantLen: 55, wantHeadTail: [2]int32{10, 65}},
			{name: "drains in order", pop: 55, wantRing: true, wantSlots: 128, wantHeadTail: [2]int32{0, 0}},
		}},
		{"a deadline makes a list", []step{
			{name: "fill", push: 10, pop: 3, wantRing: true, wantSlots: 64, wantLen: 7, wantHeadTail: [2]int32{3, 10}},
			{name: "deadline", push: 1, deadline: true, wantRing: false, wantSlots: 64, wantLen: 8},
			{name: "drains in order", pop: 8, wantRing: false, wantSlots: 64},
		}},
		{"a remove makes a list", []step{
			{name: "fill", push: 10, pop: 3, wantRing: true, wantSlots: 64, wantLen: 7, wantHeadTail: [2]int32{3, 10}},
			{name: "remove", remove: 5, wantRing: false, wantSlots: 64, wantLen: 6},
			{name: "drains in order", pop: 6, wantRing: false, wantSlots: 64},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := mustNew[int](t, Config{Capacity: 1000, Priority: NoPriority})
			handles := map[int]Handle{}
			removed := map[int]bool{}
			pushed, next := 0, 0 // payloads pushed; the next one FIFO must serve
			now := t0
			for _, s := range tt.steps {
				for range s.push {
					now = now.Add(time.Millisecond)
					it := Item[int]{Payload: pushed}
					if s.deadline {
						it.Deadline = now.Add(time.Hour)
					}
					a := q.PushAt(now, it)
					if !a.Admitted() || a.HasVictim() {
						t.Fatalf("%s: push %d: %+v", s.name, pushed, a)
					}
					handles[pushed] = a.Handle
					pushed++
				}
				if s.remove > 0 {
					if it, ok := q.Remove(handles[s.remove]); !ok || it.Payload != s.remove {
						t.Fatalf("%s: Remove(%d) = %d, %v", s.name, s.remove, it.Payload, ok)
					}
					removed[s.remove] = true
				}
				for range s.pop {
					for removed[next] {
						next++
					}
					it, why, ok := q.PopAt(now)
					if !ok || why != None || it.Payload != next {
						t.Fatalf("%s: pop = %d, %v, %v; want %d", s.name, it.Payload, why, ok, next)
					}
					if _, ok := q.Remove(handles[next]); ok {
						t.Fatalf("%s: the handle of %d still removes it after it was served", s.name, next)
					}
					next++
				}
				places := len(q.slots) // the list's slots, or the ring's places
				if q.ring {
					places = len(q.ritems)
				}
				if q.ring != s.wantRing || places != s.wantSlots || q.Len() != s.wantLen {
					t.Fatalf("%s: ring %v, %d places, len %d; want %v, %d, %d", s.name, q.ring, places, q.Len(), s.wantRing, s.wantSlots, s.wantLen)
				}
				if q.ring && [2]int32{q.rhead, q.rtail} != s.wantHeadTail {
					t.Fatalf("%s: head, tail %d, %d; want %v", s.name, q.rhead, q.rtail, s.wantHeadTail)
				}
				// Every queued item's handle still finds it.
				for p := next; p < pushed; p++ {
					if removed[p] {
						continue
					}
					h := handles[p]
					if old, ok := q.Swap(h, p); !ok || old != p {
						t.Fatalf("%s: Swap(handle of %d) = %d, %v", s.name, p, old, ok)
					}
				}
			}
			checkBooks(t, q)
		})
	}
}
