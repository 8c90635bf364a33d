package shed

import (
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/wire"
)

func TestOrder(t *testing.T) {
	mixed := []req{first("f1"), retry("r1"), first("f2"), retry("r2"), first("f3")}
	crit := []req{
		{name: "shed-r", attempt: 3, crit: wire.Sheddable},
		{name: "crit-r", attempt: 2},
		{name: "plus-f", attempt: 1, crit: wire.CriticalPlus},
		{name: "shed-f", attempt: 1, crit: wire.Sheddable},
		{name: "crit-f", attempt: 1},
		{name: "plus-r", attempt: 2, crit: wire.CriticalPlus},
		{name: "huge-f", attempt: 1, crit: 100}, // counts as critical-plus
		{name: "tiny-f", attempt: 0, crit: -9},  // a first try, counts as sheddable
	}
	tests := []struct {
		name string
		cfg  Config
		in   []req
		want []string
	}{
		{"fifo", Config{Order: FIFO, Priority: NoPriority}, mixed, []string{"f1", "r1", "f2", "r2", "f3"}},
		{"lifo", Config{Order: LIFO, Priority: NoPriority}, mixed, []string{"f3", "r2", "f2", "r1", "f1"}},
		{"first-tries-first (zero Config)", Config{}, mixed, []string{"f1", "f2", "f3", "r1", "r2"}},
		{"first tries first, lifo", Config{Order: LIFO}, mixed, []string{"f3", "f2", "f1", "r2", "r1"}},
		{"adaptive-lifo, not overloaded: fifo", Config{Order: AdaptiveLIFO, Priority: NoPriority}, mixed, []string{"f1", "r1", "f2", "r2", "f3"}},
		{"criticality then first tries", Config{Priority: ByCriticality}, crit,
			[]string{"plus-f", "huge-f", "plus-r", "crit-f", "crit-r", "shed-f", "tiny-f", "shed-r"}},
		{"first tries ignore criticality", Config{}, crit,
			[]string{"plus-f", "shed-f", "crit-f", "huge-f", "tiny-f", "shed-r", "crit-r", "plus-r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := mustNew[string](t, tt.cfg)
			for i, r := range tt.in {
				if a := q.PushAt(ms(float64(i)), r.item()); !a.Admitted() || a.HasVictim() {
					t.Fatalf("push %s: %+v", r.name, a)
				}
			}
			got, dropped := drain(q, ms(10))
			if !slices.Equal(got, tt.want) || dropped != nil {
				t.Errorf("served %v, dropped %v; want served %v", got, dropped, tt.want)
			}
			checkBooks(t, q)
		})
	}
}

func TestFull(t *testing.T) {
	type push struct {
		r           req
		wantRefused Reason
		wantVictim  string // "" for none
	}
	tests := []struct {
		name  string
		cfg   Config
		fill  []req
		push  []push
		after []string // served afterwards
	}{
		{
			name: "a first try evicts the newest retry",
			cfg:  Config{Capacity: 3},
			fill: []req{first("f1"), retry("r1"), retry("r2")},
			push: []push{
				{first("f2"), None, "r2"},
				{first("f3"), None, "r1"},
				{first("f4"), QueueFull, ""}, // only first tries left: no one to evict
				{retry("r3"), QueueFull, ""},
			},
			after: []string{"f1", "f2", "f3"},
		},
		{
			name:  "a retry never evicts",
			cfg:   Config{Capacity: 2},
			fill:  []req{retry("r1"), retry("r2")},
			push:  []push{{retry("r3"), QueueFull, ""}},
			after: []string{"r1", "r2"},
		},
		{
			name:  "plain fifo refuses the newcomer",
			cfg:   Config{Capacity: 2, Priority: NoPriority},
			fill:  []req{retry("r1"), retry("r2")},
			push:  []push{{first("f1"), QueueFull, ""}},
			after: []string{"r1", "r2"},
		},
		{
			name:  "lifo keeps the newest: the oldest of the worst class goes",
			cfg:   Config{Capacity: 3, Order: LIFO},
			fill:  []req{first("f1"), retry("r1"), retry("r2")},
			push:  []push{{retry("r3"), None, "r1"}, {first("f2"), None, "r2"}, {first("f3"), None, "r3"}, {first("f4"), None, "f1"}},
			after: []string{"f4", "f3", "f2"},
		},
		{
			name: "criticality: the least critical goes first, retries before first tries",
			cfg:  Config{Capacity: 3, Priority: ByCriticality},
			fill: []req{
				{name: "shed-f", attempt: 1, crit: wire.Sheddable},
				{name: "crit-r", attempt: 2},
				{name: "plus-r", attempt: 2, crit: wire.CriticalPlus},
			},
			push: []push{
				{req{name: "crit-f", attempt: 1}, None, "shed-f"},
				{req{name: "shed-f2", attempt: 1, crit: wire.Sheddable}, QueueFull, ""},
				{req{name: "crit-f2", attempt: 1}, None, "crit-r"},
				{req{name: "plus-r2", attempt: 4, crit: wire.CriticalPlus}, None, "crit-f2"},
			},
			after: []string{"plus-r", "plus-r2", "crit-f"},
		},
		{
			name: "an item whose time is up goes before anything is evicted",
			cfg:  Config{Capacity: 2},
			fill: []req{first("f1"), {name: "r1", attempt: 2, deadline: ms(5)}},
			push: []push{
				{retry("r2"), None, "r1"}, // at 10 ms r1 is expired: it makes room even for a retry
				{retry("r3"), QueueFull, ""},
			},
			after: []string{"f1", "r2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := mustNew[string](t, tt.cfg)
			for _, r := range tt.fill {
				if a := q.PushAt(ms(0), r.item()); !a.Admitted() {
					t.Fatalf("fill %s: refused %v", r.name, a.Refused)
				}
			}
			for _, p := range tt.push {
				a := q.PushAt(ms(10), p.r.item())
				victim := ""
				if a.HasVictim() {
					victim = a.Victim.Payload
				}
				if a.Refused != p.wantRefused || victim != p.wantVictim {
					t.Errorf("push %s: refused %v, victim %q (%v); want refused %v, victim %q",
						p.r.name, a.Refused, victim, a.VictimReason, p.wantRefused, p.wantVictim)
				}
				if q.Len() > q.Cap() {
					t.Fatalf("len %d > cap %d", q.Len(), q.Cap())
				}
			}
			got, _ := drain(q, ms(10))
			if !slices.Equal(got, tt.after) {
				t.Errorf("served %v; want %v", got, tt.after)
			}
			checkBooks(t, q)
		})
	}
}

func TestIsRetry(t *testing.T) {
	for _, tt := range []struct {
		attempt int
		want    bool
	}{{-1, false}, {0, false}, {1, false}, {2, true}, {wire.MaxAttempt, true}} {
		if got := (Item[int]{Attempt: tt.attempt}).IsRetry(); got != tt.want {
			t.Errorf("attempt %d: IsRetry = %v; want %v", tt.attempt, got, tt.want)
		}
	}
}

func TestEvictionCounts(t *testing.T) {
	q := mustNew[string](t, Config{Capacity: 2})
	q.PushAt(ms(0), retry("r1").item())
	q.PushAt(ms(0), retry("r2").item())
	q.PushAt(ms(1), first("f1").item())
	q.PushAt(ms(1), first("f2").item())
	q.PushAt(ms(1), retry("r3").item())
	q.PushAt(ms(1), first("f3").item())
	st := q.Stats()
	want := Stats{
		FirstTries: Counts{Queued: 2, Pushed: 3, Full: 1},
		Retries:    Counts{Pushed: 3, Evicted: 2, Full: 1},
	}
	if st != want {
		t.Errorf("Stats = %+v; want %+v", st, want)
	}
	checkBooks(t, q)
}

func TestDeadlines(t *testing.T) {
	tests := []struct {
		name        string
		minRem      time.Duration
		deadline    float64 // ms; 0 = none
		pushAt      float64
		popAt       float64
		wantRefused Reason
		wantWhy     Reason // at PopAt, if admitted
	}{
		{"no deadline", 0, 0, 0, 1e6, None, None},
		{"served before the deadline", 0, 50, 0, 49.999, None, None},
		{"dropped at the deadline", 0, 50, 0, 50, None, Expired},
		{"dropped after the deadline", 0, 50, 0, 70, None, Expired},
		{"refused at the deadline", 0, 50, 50, 50, Expired, None},
		{"refused past the deadline", 0, 50, 60, 60, Expired, None},
		{"min remaining: more left, served", 10 * time.Millisecond, 50, 0, 39.999, None, None},
		{"min remaining: exactly that left, dropped", 10 * time.Millisecond, 50, 0, 40, None, Expired},
		{"min remaining: refused on arrival", 10 * time.Millisecond, 50, 41, 41, Expired, None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := mustNew[string](t, Config{MinRemaining: tt.minRem})
			r := first("x")
			if tt.deadline != 0 {
				r.deadline = ms(tt.deadline)
			}
			a := q.PushAt(ms(tt.pushAt), r.item())
			if a.Refused != tt.wantRefused {
				t.Fatalf("refused = %v; want %v", a.Refused, tt.wantRefused)
			}
			if a.Refused != None {
				if q.Len() != 0 || a.Handle != (Handle{}) {
					t.Errorf("refused item queued: len %d, handle %+v", q.Len(), a.Handle)
				}
			} else {
				it, why, ok := q.PopAt(ms(tt.popAt))
				if !ok || why != tt.wantWhy || it.Payload != "x" || !it.Enqueued.Equal(ms(tt.pushAt)) {
					t.Errorf("PopAt = %+v, %v, %v; want x, %v, true", it, why, ok, tt.wantWhy)
				}
			}
			st := q.Stats().FirstTries
			wantExpired := uint64(0)
			if tt.wantRefused == Expired || tt.wantWhy == Expired {
				wantExpired = 1
			}
			if st.Expired != wantExpired || st.Served != 1-wantExpired {
				t.Errorf("Stats = %+v; want %d expired", st, wantExpired)
			}
			checkBooks(t, q)
		})
	}
}

// TestExpiredNeverServed pushes items with staggered deadlines and pops them
// at various times: an item is served only before its deadline, and every
// item is served or counted as expired, in deadline order.
func TestExpiredNeverServed(t *testing.T) {
	q := mustNew[int](t, Config{Order: LIFO, Priority: NoPriority})
	for i := range 100 {
		q.PushAt(ms(0), Item[int]{Payload: i, Deadline: ms(float64(10 + i%7*10))})
	}
	var served, expired int
	lastExpired := time.Time{}
	for now := ms(0); q.Len() > 0; now = now.Add(3 * time.Millisecond) {
		it, why, ok := q.PopAt(now)
		if !ok {
			t.Fatal("PopAt failed on a non-empty queue")
		}
		switch why {
		case None:
			if !now.Before(it.Deadline) {
				t.Fatalf("served %d at %v, deadline %v", it.Payload, now, it.Deadline)
			}
			served++
		case Expired:
			if now.Before(it.Deadline) || it.Deadline.Before(lastExpired) {
				t.Fatalf("dropped %d at %v, deadline %v, previous %v", it.Payload, now, it.Deadline, lastExpired)
			}
			lastExpired = it.Deadline
			expired++
		default:
			t.Fatalf("reason %v", why)
		}
	}
	st := q.Stats().Total()
	if served+expired != 100 || st.Served != uint64(served) || st.Expired != uint64(expired) || expired == 0 {
		t.Errorf("served %d, expired %d, stats %+v", served, expired, st)
	}
}

func TestExpireAtAndNextExpiry(t *testing.T) {
	q := mustNew[string](t, Config{})
	if _, ok := q.NextExpiry(); ok {
		t.Error("NextExpiry on an empty queue")
	}
	q.PushAt(ms(0), req{name: "a", attempt: 1, deadline: ms(30)}.item())
	q.PushAt(ms(0), req{name: "none", attempt: 1}.item())
	q.PushAt(ms(0), req{name: "b", attempt: 2, deadline: ms(20)}.item())
	q.PushAt(ms(0), req{name: "c", attempt: 1, deadline: ms(20)}.item())
	steps := []struct {
		now      float64
		want     string // "" for nothing
		wantNext float64
	}{
		{19, "", 20},
		{20, "b", 20}, // same deadline: in push order
		{20, "c", 30},
		{20, "", 30},
		{45, "a", -1},
		{45, "", -1},
	}
	for _, s := range steps {
		it, why, ok := q.ExpireAt(ms(s.now))
		if got := map[bool]string{true: it.Payload}[ok]; got != s.want || ok && why != Expired {
			t.Errorf("ExpireAt(%v) = %q, %v; want %q", s.now, got, why, s.want)
		}
		next, ok := q.NextExpiry()
		if ok != (s.wantNext >= 0) || ok && !next.Equal(ms(s.wantNext)) {
			t.Errorf("after ExpireAt(%v): NextExpiry = %v, %v; want %v", s.now, next, ok, s.wantNext)
		}
	}
	if served, _ := drain(q, ms(50)); !slices.Equal(served, []string{"none"}) {
		t.Errorf("served %v", served)
	}
	checkBooks(t, q)
}

func TestRemove(t *testing.T) {
	q := mustNew[string](t, Config{Capacity: 2})
	a := q.PushAt(ms(0), first("a").item())
	b := q.PushAt(ms(0), req{name: "b", attempt: 1, deadline: ms(10)}.item())
	if it, ok := q.Remove(b.Handle); !ok || it.Payload != "b" {
		t.Fatalf("Remove(b) = %v, %v", it, ok)
	}
	if _, ok := q.Remove(b.Handle); ok {
		t.Error("removed b twice")
	}
	if _, ok := q.NextExpiry(); ok {
		t.Error("b's deadline is still tracked")
	}
	c := q.PushAt(ms(1), first("c").item()) // reuses b's slot
	if _, ok := q.Remove(b.Handle); ok {
		t.Error("a stale handle removed the item now in its slot")
	}
	for _, h := range []Handle{{}, {slot: -1, gen: 1}, {slot: 99, gen: 1}} {
		if _, ok := q.Remove(h); ok {
			t.Errorf("Remove(%+v) succeeded", h)
		}
	}
	if it, _, _ := q.PopAt(ms(2)); it.Payload != "a" {
		t.Errorf("served %q; want a", it.Payload)
	}
	if _, ok := q.Remove(a.Handle); ok {
		t.Error("removed a served item")
	}
	if it, ok := q.Remove(c.Handle); !ok || it.Payload != "c" {
		t.Errorf("Remove(c) = %v, %v", it, ok)
	}
	st := q.Stats().FirstTries
	if st.Removed != 2 || st.Served != 1 || q.Len() != 0 {
		t.Errorf("Stats = %+v, len %d", st, q.Len())
	}
	checkBooks(t, q)
}

func TestZeroQueue(t *testing.T) {
	var q Queue[string]
	if a := q.PushAt(ms(0), first("a").item()); a.Refused != QueueFull || a.HasVictim() {
		t.Errorf("PushAt on the zero Queue = %+v; want QueueFull", a)
	}
	if _, _, ok := q.PopAt(ms(0)); ok {
		t.Error("PopAt on the zero Queue returned an item")
	}
	if q.Len() != 0 || q.Cap() != 0 || q.Overloaded(ms(1e6)) {
		t.Error("zero Queue is not empty")
	}
	checkBooks(t, &q)
}

func TestCapacityOne(t *testing.T) {
	q := mustNew[string](t, Config{Capacity: 1, Order: AdaptiveLIFO})
	q.PushAt(ms(0), retry("r1").item())
	// An eviction does not count as the queue going empty: overload is
	// measured from 0.
	if a := q.PushAt(ms(50), first("f1").item()); a.Victim.Payload != "r1" {
		t.Fatalf("victim %+v", a)
	}
	if !q.Overloaded(ms(100)) {
		t.Error("not overloaded at 100 ms")
	}
}

// TestDueVictimEmptiesTheQueue: an item whose time was up when PushAt took
// it out counts as gone since its due time, as if ExpireAt had run then: the
// newcomer starts a new period in normal mode.
func TestDueVictimEmptiesTheQueue(t *testing.T) {
	q := mustNew[string](t, Config{Capacity: 1, Order: AdaptiveLIFO})
	q.PushAt(ms(0), req{name: "a", attempt: 1, deadline: ms(50)}.item())
	a := q.PushAt(ms(200), first("b").item())
	if a.Victim.Payload != "a" || a.VictimReason != Expired || !a.Admitted() {
		t.Fatalf("PushAt = %+v", a)
	}
	if q.Overloaded(ms(200)) {
		t.Error("overloaded right after the queue emptied")
	}
	if next, _ := q.NextExpiry(); !next.Equal(ms(300)) {
		t.Errorf("b times out at %v; want 300ms", next.Sub(t0))
	}
}

// TestSwap: a swapped item keeps its place and deadline; a handle of an
// item that left swaps nothing.
func TestSwap(t *testing.T) {
	q, err := New[string](Config{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	a := q.PushAt(t0, Item[string]{Payload: "a", Attempt: 1})
	q.PushAt(t0, Item[string]{Payload: "b", Attempt: 1})
	if old, ok := q.Swap(a.Handle, "a2"); !ok || old != "a" {
		t.Fatalf("Swap = %q, %v; want a, true", old, ok)
	}
	for _, want := range []string{"a2", "b"} {
		it, _, ok := q.PopAt(t0)
		if !ok || it.Payload != want {
			t.Fatalf("PopAt = %q, %v; want %q", it.Payload, ok, want)
		}
	}
	if _, ok := q.Swap(a.Handle, "x"); ok {
		t.Error("Swap of an item that left the queue succeeded")
	}
}
