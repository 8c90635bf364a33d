package shed

import (
	"testing"
	"time"
)

var (
	sinkAdmission Admission[int32]
	sinkItem      Item[int32]
	sinkReason    Reason
)

// BenchmarkQueue measures the hot paths with the payload the simulator uses
// (an int32 request id) and a queue of the default capacity, 1000.
//
//	push-pop        a half-full queue: push one (with a deadline, so the
//	                expiry heap takes part), pop one
//	push-pop/adaptive-lifo  the same with adaptive LIFO, overloaded
//	plain-push-pop  push-pop on a plain queue (one class, FIFO) without
//	                deadlines, as the simulator's run queues are: its ring
//	reject          a full queue of first tries refuses a retry
//	evict           a full queue: a first try evicts a retry, one item is
//	                served and a retry takes its place
func BenchmarkQueue(b *testing.B) {
	const capacity = 1000
	// deadline is when the items are due: an hour on, or never (the zero
	// Time) for a plain queue's.
	deadline := func(cfg Config, now time.Time) time.Time {
		if cfg.Priority == NoPriority && cfg.Order == FIFO {
			return time.Time{}
		}
		return now.Add(time.Hour)
	}
	fill := func(b *testing.B, cfg Config, n, attempt int) *Queue[int32] {
		cfg.Capacity = capacity
		q := mustNew[int32](b, cfg)
		for i := range n {
			if a := q.PushAt(t0, Item[int32]{Payload: int32(i), Attempt: attempt, Deadline: deadline(cfg, t0)}); !a.Admitted() {
				b.Fatal(a.Refused)
			}
		}
		return q
	}
	pushPop := func(cfg Config) func(b *testing.B) {
		return func(b *testing.B) {
			q := fill(b, cfg, capacity/2, 1)
			now := t0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(time.Microsecond)
				sinkAdmission = q.PushAt(now, Item[int32]{Payload: int32(i), Attempt: 1 + i&1, Deadline: deadline(cfg, now)})
				sinkItem, sinkReason, _ = q.PopAt(now)
			}
			if cfg.Priority == NoPriority && cfg.Order == FIFO && !q.ring {
				b.Fatal("the plain queue is not a ring")
			}
		}
	}
	b.Run("push-pop", pushPop(Config{}))
	// CoDel timeouts would drop every item past 100 ms: give the items
	// enough slack, the point is to measure the LIFO path.
	b.Run("push-pop/adaptive-lifo", pushPop(Config{Order: AdaptiveLIFO, CoDelTarget: time.Hour, CoDelInterval: time.Hour}))
	b.Run("plain-push-pop", pushPop(Config{Order: FIFO, Priority: NoPriority}))
	b.Run("reject", func(b *testing.B) {
		q := fill(b, Config{}, capacity, 1)
		retry := Item[int32]{Payload: -1, Attempt: 2, Deadline: t0.Add(time.Hour)}
		now := t0.Add(time.Millisecond)
		b.ReportAllocs()
		for b.Loop() {
			sinkAdmission = q.PushAt(now, retry)
		}
		if sinkAdmission.Refused != QueueFull {
			b.Fatalf("refused %v; want QueueFull", sinkAdmission.Refused)
		}
	})
	b.Run("evict", func(b *testing.B) {
		q := fill(b, Config{}, capacity, 2)
		now := t0
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			now = now.Add(time.Microsecond)
			a := q.PushAt(now, Item[int32]{Payload: int32(i), Attempt: 1, Deadline: now.Add(time.Hour)})
			if a.VictimReason != Evicted {
				b.Fatalf("victim %v; want Evicted", a.VictimReason)
			}
			sinkItem, sinkReason, _ = q.PopAt(now)
			sinkAdmission = q.PushAt(now, Item[int32]{Payload: int32(i), Attempt: 2, Deadline: now.Add(time.Hour)})
		}
	})
}

// TestNoAllocs holds the promise of the package documentation: after New,
// nothing allocates.
func TestNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocation counts")
	}
	q := mustNew[string](t, Config{Capacity: 4, Order: AdaptiveLIFO, Priority: ByCriticality})
	now := t0
	it := Item[string]{Payload: "x", Attempt: 2, Deadline: t0.Add(time.Hour)}
	tests := []struct {
		name string
		f    func()
	}{
		{"push-pop", func() {
			now = now.Add(time.Millisecond)
			a := q.PushAt(now, it)
			q.PopAt(now)
			q.Remove(a.Handle)
		}},
		{"full", func() {
			for range 6 {
				q.PushAt(now, it)
			}
			q.ExpireAt(now.Add(time.Minute))
			q.NextExpiry()
			q.Overloaded(now)
			q.Stats()
			Decide(true, false, time.Second)
		}},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: %v allocations per run; want 0", tt.name, n)
		}
	}
}
