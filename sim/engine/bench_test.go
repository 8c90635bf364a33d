package engine

import (
	"testing"
	"time"
)

// BenchmarkEngine measures events delivered per second of wall time; one op
// is one delivered event, and cancelled events discarded on the way are
// part of its cost. Every case reports its steady state: setup and warm-up
// happen before the timed loop.
func BenchmarkEngine(b *testing.B) {
	b.Run("small", benchSmall)
	b.Run("small/run", benchSmallRun)
	b.Run("pending1e6", benchPending)
	b.Run("heap1e6", benchHeap1e6)
}

// benchSmall: 100 pending events; each delivered event schedules one new
// event after an exponential delay with mean 1 ms (the "hold" model).
func benchSmall(b *testing.B) {
	benchHold(b, 100)
}

// benchHeap1e6 is the hold model with 10⁶ events in the heap: the case
// fixed-delay queues exist to avoid, for comparison.
func benchHeap1e6(b *testing.B) {
	benchHold(b, 1_000_000)
}

func benchHold(b *testing.B, n int) {
	var e Engine
	r := Stream(1, 0)
	for i := range n {
		e.After(time.Duration(r.ExpFloat64()*1e6), Event{Target: uint32(i)})
	}
	var ev Event
	for range 3 * n { // warm up: every event has been rescheduled a few times
		e.Next(&ev)
		e.After(time.Duration(r.ExpFloat64()*1e6), ev)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Next(&ev)
		e.After(time.Duration(r.ExpFloat64()*1e6), ev)
	}
	reportRate(b, b.N)
}

// reschedule is a Handler that schedules every event again after an
// exponential delay with mean 1 ms, until n events have been handled.
type reschedule struct {
	r Rand
	n int
}

func (h *reschedule) Handle(e *Engine, ev Event) {
	if h.n--; h.n > 0 {
		e.After(time.Duration(h.r.ExpFloat64()*1e6), ev)
	}
}

// benchSmallRun is benchSmall through Run and a Handler, 1000 events per op.
func benchSmallRun(b *testing.B) {
	var e Engine
	h := &reschedule{r: Stream(1, 0)}
	refill := func() {
		for i := e.Len(); i < 100; i++ {
			e.After(time.Duration(h.r.ExpFloat64()*1e6), Event{Target: uint32(i)})
		}
	}
	refill()
	b.ReportAllocs()
	for b.Loop() {
		h.n = 1000
		e.Run(Never, h) // stops when the handler stops rescheduling
		refill()
	}
	reportRate(b, b.N*1000)
}

// benchPending models a retry storm with 10⁶ clients, each always waiting
// on one request whose 1 s timeout sits in a FixedQueue. A request is
// answered with probability ½ after an exponential delay with mean 10 ms
// (a heap event); otherwise it times out. An answer in time cancels the
// timeout; either way the client sends again at once. In steady state the
// engine holds 10⁶ live timeouts, about as many cancelled ones waiting to be
// discarded, and about 10⁴ replies in its heap; half the delivered events
// are timeouts and half are replies. The model's own state (24 bytes per
// client, touched at random) costs about as much as the engine.
func benchPending(b *testing.B) {
	const n = 1_000_000
	const (
		reply Kind = iota
		timeout
	)
	type client struct {
		timer   Handle
		attempt int64
	}
	var e Engine
	clients := make([]client, n)
	q := e.NewFixedQueue(time.Second)
	r := Stream(2, 0)
	send := func(target uint32) {
		c := &clients[target]
		c.attempt++
		c.timer = q.Add(Event{Kind: timeout, Target: target, A: c.attempt})
		if r.Uint64()&1 == 0 {
			e.After(time.Duration(r.ExpFloat64()*1e7), Event{Kind: reply, Target: target, A: c.attempt})
		}
	}
	// First sends spread over the first second.
	for i := range n {
		e.At(Time(r.Uint64N(uint64(time.Second))), Event{Kind: timeout, Target: uint32(i)})
	}
	var ev Event
	step := func() {
		e.Next(&ev)
		if ev.Kind == reply {
			c := &clients[ev.Target]
			if ev.A != c.attempt || !e.Cancel(c.timer) {
				return // late: the attempt already timed out
			}
		}
		send(ev.Target)
	}
	for e.Now() < Time(3*time.Second) { // reach steady state
		step()
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
	b.StopTimer()
	if q.Len() < n {
		b.Fatalf("the fixed queue holds %d entries, want ≥ %d", q.Len(), n)
	}
	b.ReportMetric(float64(e.heap.len()), "heap-events")
	reportRate(b, b.N)
}

func reportRate(b *testing.B, events int) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
