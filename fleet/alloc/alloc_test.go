package alloc

import (
	"errors"
	"testing"
)

// bucket100 is the stormguard preset's budget: capacity 100 tokens.
var bucket100 = Params{Spec: "token-bucket 100000 10000/10000/10000 1000 true", Kind: Bucket, Capacity: 100_000,
	Rate: 1000, MinNextUS: 10_000, MaxNextUS: 5_000_000, LiveUS: 30_000_000, MaxProcs: 100_000}

const t0 = int64(1_700_000_000_000_000) // µs

func step(t *testing.T, s *State, p Params, m Message, now int64) Answer {
	t.Helper()
	a, err := Step(s, p, m, now, "srv1")
	if err != nil {
		t.Fatalf("step %+v: %v", m, err)
	}
	return a
}

func TestStepBucket(t *testing.T) {
	var s State
	type tc struct {
		name string
		m    Message
		dt   int64 // µs after t0
		want Answer
	}
	for _, c := range []tc{
		// A new state starts empty, whatever a process asks for.
		{"created empty", Message{ID: "a", Seq: 1, Need: 10_000, Want: 20_000}, 0,
			Answer{Gen: "1700000000000000.a", Ver: 1, Next: 10_000, Live: 1, Waiting: 1, Note: "created"}},
		// Credit fills the pool; a need it covers is granted first come,
		// first served, up to the want. The grant left less than the
		// need: the pool is contended, the process is told to wait too.
		{"credit then grant", Message{ID: "b", Seq: 1, Known: "1700000000000000.a", Seen: 1, Credit: 35_000, Need: 10_000, Want: 30_000}, 1000,
			Answer{Gen: "1700000000000000.a", Ver: 2, Grant: 30_000, Next: 10_000, Avail: 5_000, Live: 2, Waiting: 2}},
		// Less in the pool than the need: nothing granted, told to wait;
		// two processes wait now: ⌈2 × 1 s / 1000⌉ = 2 ms, raised to the
		// 10 ms minimum.
		{"unmet", Message{ID: "c", Seq: 1, Need: 10_000, Want: 10_000}, 2000,
			Answer{Gen: "1700000000000000.a", Ver: 3, Next: 10_000, Avail: 5_000, Live: 3, Waiting: 3}},
		// A repeat gets the first answer and changes nothing. (A process
		// that waited counts as waiting for 20 ms: twice its wait, the
		// hold being 0 here.)
		{"repeat", Message{ID: "b", Seq: 1, Credit: 35_000, Need: 10_000, Want: 30_000}, 2500,
			Answer{Gen: "1700000000000000.a", Ver: 3, Grant: 30_000, Next: 10_000, Avail: 5_000, Live: 3, Waiting: 3, Dup: true}},
		// The pool never exceeds the capacity.
		{"capped", Message{ID: "b", Seq: 2, Credit: 500_000}, 3000,
			Answer{Gen: "1700000000000000.a", Ver: 4, Avail: 100_000, Live: 3, Waiting: 3}},
		// The want is granted whole when the pool holds it.
		{"want", Message{ID: "c", Seq: 2, Need: 10_000, Want: 40_000}, 5000,
			Answer{Gen: "1700000000000000.a", Ver: 5, Grant: 40_000, Avail: 60_000, Live: 3, Waiting: 3}},
		// A process that leaves is forgotten; its credit still counts.
		{"leave", Message{ID: "c", Seq: 3, Credit: 15_000, Leave: true}, 6000,
			Answer{Gen: "1700000000000000.a", Ver: 6, Avail: 75_000, Live: 2, Waiting: 2}},
	} {
		c.want.Now = t0 + c.dt
		got := step(t, &s, bucket100, c.m, t0+c.dt)
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	if _, ok := s.Members()["c"]; ok {
		t.Error("c left but is remembered")
	}
}

func TestStepNextScalesWithWaiting(t *testing.T) {
	var s State
	p := bucket100
	for i := range 3000 {
		a := step(t, &s, p, Message{ID: string(rune('A'+i%26)) + itoa(i), Seq: 1, Need: 10_000, Want: 10_000}, t0)
		// Together the waiting processes make p.Rate round trips a
		// second: the i+1st waits ⌈(i+1)/1000⌉ s, within [10ms, 5s].
		want := min(max((int64(i+1)*1_000_000+999)/1000, p.MinNextUS), p.MaxNextUS)
		if a.Next != want {
			t.Fatalf("process %d told to wait %dµs, want %dµs", i, a.Next, want)
		}
	}
	// Once their wait lapses, they no longer count.
	a := step(t, &s, p, Message{ID: "late", Seq: 1, Need: 10_000, Want: 10_000}, t0+20_000_000)
	if a.Next != p.MinNextUS {
		t.Errorf("after the waits lapsed: told to wait %dµs, want %dµs", a.Next, p.MinNextUS)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestStepDrains(t *testing.T) {
	fill := func() *State {
		var s State
		step(t, &s, bucket100, Message{ID: "a", Seq: 1}, t0)
		step(t, &s, bucket100, Message{ID: "a", Seq: 2, Credit: 80_000}, t0+1)
		return &s
	}
	// Another server: the pool may be an old copy; it is emptied.
	s := fill()
	a, _ := Step(s, bucket100, Message{ID: "b", Seq: 1, Need: 10_000, Want: 10_000}, t0+2, "srv2")
	if a.Grant != 0 || a.Note != "moved" || s.Level != 0 {
		t.Errorf("moved: grant %d, note %q, level %d; want 0, moved, 0", a.Grant, a.Note, s.Level)
	}
	// A process saw a later version than the state holds.
	s = fill()
	a = step(t, s, bucket100, Message{ID: "b", Seq: 1, Known: s.Gen, Seen: 7, Need: 10_000, Want: 10_000}, t0+2)
	if a.Grant != 0 || a.Note != "stale" || s.Level != 0 {
		t.Errorf("stale: grant %d, note %q, level %d; want 0, stale, 0", a.Grant, a.Note, s.Level)
	}
	// A process of an earlier state finds none: the state is new, empty.
	var e State
	a = step(t, &e, bucket100, Message{ID: "b", Seq: 9, Known: "1.x", Seen: 3, Back: 5_000, Need: 10_000, Want: 10_000}, t0)
	if a.Note != "lost" || a.Grant != 0 || a.Avail != 5_000 {
		t.Errorf("lost: %+v; want note lost, no grant, 5 tokens", a)
	}
}

func TestStepSpec(t *testing.T) {
	var s State
	step(t, &s, bucket100, Message{ID: "a", Seq: 1}, t0)
	other := bucket100
	other.Spec, other.Capacity = "token-bucket 500000 14000/5000/14000 1000 true", 500_000
	_, err := Step(&s, other, Message{ID: "b", Seq: 1}, t0+1, "srv1")
	var se *SpecError
	if !errors.As(err, &se) || se.Live != 1 || se.Held != bucket100.Spec {
		t.Fatalf("another spec while a is live: %v", err)
	}
	// Once a is forgotten (silent longer than LiveUS), the state is
	// replaced.
	a := step(t, &s, other, Message{ID: "b", Seq: 1}, t0+bucket100.LiveUS+1)
	if a.Note != "spec" || s.Spec != other.Spec {
		t.Errorf("after a went silent: note %q, spec %q", a.Note, s.Spec)
	}
}

func TestStepForgetsBounded(t *testing.T) {
	p := bucket100
	p.MaxProcs = 50
	var s State
	for i := range 80 {
		step(t, &s, p, Message{ID: "p" + itoa(i), Seq: 1}, t0+int64(i))
	}
	if n := len(s.Members()); n != 50 {
		t.Errorf("%d processes remembered, want MaxProcs = 50", n)
	}
	if _, _, _, ok := s.Record("p0"); ok {
		t.Error("the longest silent process is still remembered")
	}
	if _, _, _, ok := s.Record("p79"); !ok {
		t.Error("the latest process was forgotten")
	}
	// Silent longer than LiveUS: forgotten, at most forgetLimit a message.
	step(t, &s, p, Message{ID: "new", Seq: 1}, t0+p.LiveUS+1000)
	if n := len(s.Members()); n != 1 {
		t.Errorf("%d remembered after all went silent, want 1", n)
	}
}

func TestStepWindow(t *testing.T) {
	// A window of 1 s in slots of 100 ms: 10 % of requests, floor 2.
	p := Params{Spec: "window 100000 100000 2000000", Kind: Window, SlotUS: 100_000, RatioMicro: 100_000, FloorMicro: 2_000_000,
		Rate: 1000, MinNextUS: 10_000, MaxNextUS: 5_000_000, LiveUS: 30_000_000, MaxProcs: 1000}
	var s State
	// A new window's allowance (the floor) is used up.
	a := step(t, &s, p, Message{ID: "a", Seq: 1, Need: Unit, Want: Unit}, t0)
	if a.Grant != 0 {
		t.Fatalf("new window granted %d", a.Grant)
	}
	// 30 requests: 10 % = 3 retries more.
	a = step(t, &s, p, Message{ID: "a", Seq: 2, Credit: 30, Need: Unit, Want: 5 * Unit}, t0+1000)
	if a.Grant != 3*Unit {
		t.Errorf("after 30 requests: granted %d, want 3 retries", a.Grant)
	}
	// A second later the first slot left the window: the floor is back.
	a = step(t, &s, p, Message{ID: "a", Seq: 3, Need: Unit, Want: 5 * Unit}, t0+1_000_000)
	if a.Grant != 2*Unit {
		t.Errorf("a window later: granted %d, want the floor of 2", a.Grant)
	}
}

func TestStepTimeNeverGoesBack(t *testing.T) {
	var s State
	step(t, &s, bucket100, Message{ID: "a", Seq: 1}, t0+5000)
	a := step(t, &s, bucket100, Message{ID: "a", Seq: 2}, t0)
	if a.Now != t0+5000 {
		t.Errorf("time went back to %d, want it held at %d", a.Now, t0+5000)
	}
}

// TestStepCreditCounted: while no process waits for the pool, earnings
// count up to the room the process saw and what it gives back counts
// whole; while processes wait, what was gathered since they began counts
// whole, and of what came before the earnings count up to the room and what
// was given back is lost.
func TestStepCreditCounted(t *testing.T) {
	p := bucket100
	var s State
	step(t, &s, p, Message{ID: "a", Seq: 1}, t0)
	for _, c := range []struct {
		name string
		m    Message
		dt   int64 // µs after t0
		want int64 // the level after
		lost int64
	}{
		{"room", Message{ID: "a", Seq: 2, Credit: 30_000, Span: 1000, Room: 20_000}, 1000, 20_000, 10_000},
		{"back", Message{ID: "a", Seq: 3, Back: 15_000}, 2000, 35_000, 0},
		// b waits from t0+3ms on (it asks for more than the pool holds).
		{"wait", Message{ID: "b", Seq: 1, Need: 40_000, Want: 40_000}, 3000, 35_000, 0},
		// a gathered 40 tokens earned and 10 given back over the last 10
		// ms, 3 of them while b waited: 15 count, and of the 28 earned
		// before, the room of 5.
		{"partly", Message{ID: "a", Seq: 4, Credit: 40_000, Back: 10_000, Span: 10, Room: 5_000}, 6000, 35_000 + 15_000 + 5_000, 30_000},
		// Waiting since before the span began: all of it.
		{"all", Message{ID: "a", Seq: 5, Credit: 20_000, Back: 3_000, Span: 2}, 8000, 78_000, 0},
	} {
		a := step(t, &s, p, c.m, t0+c.dt)
		if s.Level != c.want || a.Lost != c.lost {
			t.Errorf("%s: level %d, lost %d; want %d, %d", c.name, s.Level, a.Lost, c.want, c.lost)
		}
	}
}
