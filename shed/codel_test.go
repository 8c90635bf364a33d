package shed

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestAdaptiveLIFOSwitch walks the queue into overload (not empty for a
// CoDelInterval), where it serves newest first and times out old items,
// and back to FIFO once it has emptied.
func TestAdaptiveLIFOSwitch(t *testing.T) {
	q := mustNew[string](t, Config{Order: AdaptiveLIFO, Priority: NoPriority}) // 5 ms, 100 ms
	type step struct {
		at             float64
		op             string // "push" (arg = name) or "pop" (arg = want "name" or "name:reason")
		arg            string
		wantOverloaded bool
	}
	steps := []step{
		{0, "push", "a", false}, // the queue goes non-empty at 0
		{1, "push", "b", false},
		{2, "push", "c", false},
		{10, "pop", "a", false}, // normal mode: oldest first
		{50, "push", "d", false},
		{99.999, "pop", "b", false},
		{100, "push", "e", true}, // not empty since 0: overloaded
		{101, "push", "f", true},
		{101, "pop", "c:queue-timeout", true}, // c and d waited through normal mode: cut off at 100
		{101, "pop", "d:queue-timeout", true},
		{101, "pop", "f", true}, // newest first
		{104, "pop", "e", false},
		{200, "push", "g", false}, // empty since 104: a new period starts at 200
		{201, "push", "h", false},
		{202, "push", "i", false},
		{203, "pop", "g", false}, // FIFO again
		{299.999, "pop", "h", false},
		{300, "push", "j", true},
		{300, "pop", "i:queue-timeout", true},
		{300, "pop", "j", false},
	}
	for _, s := range steps {
		now := ms(s.at)
		switch s.op {
		case "push":
			if a := q.PushAt(now, first(s.arg).item()); !a.Admitted() || a.HasVictim() {
				t.Fatalf("%v ms: push %s: %+v", s.at, s.arg, a)
			}
		case "pop":
			it, why, ok := q.PopAt(now)
			got := it.Payload
			if why != None {
				got += ":" + why.String()
			}
			if !ok || got != s.arg {
				t.Errorf("%v ms: PopAt = %q, %v; want %q", s.at, got, ok, s.arg)
			}
		}
		if got := q.Overloaded(now); got != s.wantOverloaded {
			t.Errorf("%v ms: after %s %s, Overloaded = %v; want %v", s.at, s.op, s.arg, got, s.wantOverloaded)
		}
	}
	st := q.Stats().FirstTries
	if st.TimedOut != 3 || st.Served != 7 {
		t.Errorf("Stats = %+v; want 3 timed out, 7 served", st)
	}
	checkBooks(t, q)
}

// TestAdaptiveTimeoutTable holds the package documentation's table: a queue
// that becomes non-empty at 0 and never drains (an item arrives every
// millisecond and none is served), defaults 5 ms and 100 ms.
func TestAdaptiveTimeoutTable(t *testing.T) {
	q := mustNew[string](t, Config{Order: AdaptiveLIFO})
	droppedAt := map[string]float64{}
	for m := 0; m <= 300; m++ {
		now := ms(float64(m))
		for {
			it, why, ok := q.ExpireAt(now)
			if !ok {
				break
			}
			if why != QueueTimeout {
				t.Fatalf("%s: %v", it.Payload, why)
			}
			droppedAt[it.Payload] = float64(m)
		}
		if m > 0 && q.Len() == 0 {
			t.Fatalf("the queue drained at %d ms", m)
		}
		q.PushAt(now, first(fmt.Sprint("p", m)).item())
	}
	for _, tt := range []struct {
		pushed, want float64
	}{{0, 100}, {60, 100}, {95, 100}, {97, 102}, {250, 255}, {295, 300}} {
		if got := droppedAt[fmt.Sprint("p", tt.pushed)]; got != tt.want {
			t.Errorf("pushed at %v ms: timed out at %v ms; want %v", tt.pushed, got, tt.want)
		}
	}
}

// TestAdaptiveDeadlineBeforeTimeout: the earlier of the deadline and the
// queue timeout applies, with its own reason.
func TestAdaptiveDeadlineBeforeTimeout(t *testing.T) {
	q := mustNew[string](t, Config{Order: AdaptiveLIFO, MinRemaining: 2 * time.Millisecond})
	q.PushAt(ms(0), req{name: "deadline", attempt: 1, deadline: ms(50)}.item()) // due at 48 < 100
	q.PushAt(ms(0), req{name: "timeout", attempt: 1, deadline: ms(500)}.item()) // due at 100
	for _, want := range []struct {
		at   float64
		name string
		why  Reason
	}{{48, "deadline", Expired}, {100, "timeout", QueueTimeout}} {
		if next, _ := q.NextExpiry(); !next.Equal(ms(want.at)) {
			t.Errorf("NextExpiry = %v; want %v ms", next.Sub(t0), want.at)
		}
		it, why, ok := q.ExpireAt(ms(want.at))
		if !ok || it.Payload != want.name || why != want.why {
			t.Errorf("ExpireAt(%v) = %q, %v; want %q, %v", want.at, it.Payload, why, want.name, want.why)
		}
	}
}

// TestOverloadedTrackedByEveryOrder: plain FIFO reports overload too, but
// keeps serving oldest first and times nothing out.
func TestOverloadedTrackedByEveryOrder(t *testing.T) {
	q := mustNew[string](t, Config{Priority: NoPriority, CoDelInterval: 20 * time.Millisecond})
	q.PushAt(ms(0), first("a").item())
	q.PushAt(ms(1), first("b").item())
	if !q.Overloaded(ms(20)) || q.Overloaded(ms(19)) {
		t.Error("overload not tracked")
	}
	if _, ok := q.NextExpiry(); ok {
		t.Error("FIFO times items out")
	}
	if served, dropped := drain(q, ms(1000)); len(served) != 2 || served[0] != "a" || dropped != nil {
		t.Errorf("served %v, dropped %v", served, dropped)
	}
}

// TestAdaptivePerClass: each priority class is its own CoDel queue, so
// retries left waiting put only the retry class into LIFO with short
// timeouts, while first tries, which drain, stay FIFO.
func TestAdaptivePerClass(t *testing.T) {
	q := mustNew[string](t, Config{Order: AdaptiveLIFO})
	for _, p := range []struct {
		at float64
		r  req
	}{
		{0, retry("r1")}, {1, retry("r2")}, // retry class non-empty from 0: times out at 100
		{10, first("f1")}, {11, first("f2")},
		{99, retry("r3")}, // max(99 + 5, 0 + 100) = 104
	} {
		q.PushAt(ms(p.at), p.r.item())
	}
	for _, want := range []string{"f1", "f2"} {
		if it, _, _ := q.PopAt(ms(13)); it.Payload != want {
			t.Fatalf("PopAt = %q; want %q", it.Payload, want)
		}
	}
	q.PushAt(ms(101), retry("r4").item()) // retry class overloaded: 101 + 5 = 106
	q.PushAt(ms(101), first("f3").item()) // first tries empty since 13: max(106, 101 + 100) = 201
	q.PushAt(ms(102), first("f4").item())
	if !q.Overloaded(ms(102)) {
		t.Error("the queue, not empty since 0, is not overloaded")
	}
	served, dropped := drain(q, ms(103))
	if want := []string{"f3", "f4", "r4", "r3"}; !slices.Equal(served, want) {
		t.Errorf("served %v; want %v (first tries FIFO, retries LIFO)", served, want)
	}
	if want := []string{"r1:queue-timeout", "r2:queue-timeout"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v; want %v", dropped, want)
	}
}
