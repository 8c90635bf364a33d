package supersede

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestTable(t *testing.T) {
	t0 := time.Unix(100, 0)
	type step struct {
		op     string // arrive-q, arrive-s (start at once), start, done, leave
		at     time.Duration
		key    string
		h      int
		want   Action // arrive
		old    int    // arrive: Decision.Old when want is Replace
		joined []int  // done: the waiters handed over; leave: [1] if h left
	}
	tests := []struct {
		name  string
		steps []step
		stats Stats
	}{
		{"a newer tap replaces a queued one", []step{
			{op: "arrive-q", key: "k", h: 1, want: Serve},
			{op: "arrive-q", key: "k", h: 2, want: Replace, old: 1},
			{op: "arrive-q", key: "k", h: 3, want: Replace, old: 2},
			{op: "start", key: "k"},
			{op: "done", key: "k", joined: []int{}},
		}, Stats{Superseded: 2}},
		{"a tap whose twin is in service waits for it", []step{
			{op: "arrive-s", key: "k", h: 1, want: Serve},
			{op: "arrive-q", key: "k", h: 2, want: Join},
			{op: "arrive-s", key: "k", h: 3, want: Join},
			{op: "done", key: "k", joined: []int{2, 3}},
			{op: "arrive-q", key: "k", h: 4, want: Serve}, // forgotten after done
		}, Stats{Joined: 2}},
		{"a queued twin that starts is joined, not replaced", []step{
			{op: "arrive-q", key: "k", h: 1, want: Serve},
			{op: "start", key: "k"},
			{op: "arrive-q", key: "k", h: 2, want: Join},
			{op: "done", key: "k", joined: []int{2}},
		}, Stats{Joined: 1}},
		{"keys apart", []step{
			{op: "arrive-q", key: "a", h: 1, want: Serve},
			{op: "arrive-q", key: "b", h: 2, want: Serve},
			{op: "arrive-q", key: "a", h: 3, want: Replace, old: 1},
		}, Stats{Superseded: 1}},
		{"waiters are bounded: the fifth is refused", []step{
			{op: "arrive-s", key: "k", h: 1, want: Serve},
			{op: "arrive-q", key: "k", h: 2, want: Join},
			{op: "arrive-q", key: "k", h: 3, want: Join},
			{op: "arrive-q", key: "k", h: 4, want: Join},
			{op: "arrive-q", key: "k", h: 5, want: Join},
			{op: "arrive-q", key: "k", h: 6, want: Refuse},
			{op: "leave", key: "k", h: 3, joined: []int{1}},
			{op: "leave", key: "k", h: 3, joined: []int{}}, // already gone
			{op: "arrive-q", key: "k", h: 7, want: Join},   // room again
			{op: "done", key: "k", joined: []int{2, 4, 5, 7}},
		}, Stats{Joined: 5, Refused: 1}},
		{"a key in service past its TTL keeps its waiters", []step{
			{op: "arrive-s", key: "k", h: 1, want: Serve},
			{op: "arrive-q", at: time.Second, key: "k", h: 2, want: Join},
			{op: "arrive-q", at: 5 * time.Second, key: "x", h: 9, want: Serve}, // sweeps
			{op: "arrive-q", at: 6 * time.Second, key: "k", h: 3, want: Join},
			{op: "done", at: 9 * time.Second, key: "k", joined: []int{2, 3}},
		}, Stats{Joined: 2}},
		{"a key in service past its TTL with nobody waiting is forgotten", []step{
			{op: "arrive-s", key: "k", h: 1, want: Serve},
			{op: "arrive-q", at: 2 * time.Second, key: "k", h: 2, want: Serve},
			{op: "done", at: 3 * time.Second, key: "k", joined: []int{}},
		}, Stats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := New[string, int](0, 2*time.Second, WithMaxWaiters(4))
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "arrive-q", "arrive-s":
					d := tab.ArriveAt(now, s.key, s.h, s.op == "arrive-q")
					if d.Action != s.want || (d.Action == Replace && d.Old != s.old) {
						t.Errorf("step %d: ArriveAt(%s, %d) = %v (old %d), want %v (old %d)", i, s.key, s.h, d.Action, d.Old, s.want, s.old)
					}
				case "start":
					tab.StartAt(now, s.key)
				case "done":
					if got := tab.DoneAt(now, s.key); fmt.Sprint(got) != fmt.Sprint(s.joined) && !(len(got) == 0 && len(s.joined) == 0) {
						t.Errorf("step %d: DoneAt = %v, want %v", i, got, s.joined)
					}
				case "leave":
					if got := tab.LeaveAt(now, s.key, s.h); got != (len(s.joined) == 1) {
						t.Errorf("step %d: LeaveAt(%s, %d) = %v, want %v", i, s.key, s.h, got, len(s.joined) == 1)
					}
				}
			}
			if got := tab.Stats(); got != tt.stats {
				t.Errorf("stats %+v, want %+v", got, tt.stats)
			}
		})
	}
}

// Held tells a shell whether a request still holds its key: after the TTL
// forgot it and a newer request took the key, the older one's end must not
// end the newer's.
func TestHeld(t *testing.T) {
	t0 := time.Unix(100, 0)
	tab := New[string, int](0, time.Second)
	if _, _, ok := tab.Held("k"); ok {
		t.Fatal("an empty table holds k")
	}
	tab.ArriveAt(t0, "k", 1, true)
	if h, queued, ok := tab.Held("k"); h != 1 || !queued || !ok {
		t.Errorf("Held = %d, %v, %v; want 1, queued", h, queued, ok)
	}
	tab.StartAt(t0, "k")
	tab.ArriveAt(t0.Add(2*time.Second), "k", 2, false) // 1 is forgotten
	if h, queued, ok := tab.Held("k"); h != 2 || queued || !ok {
		t.Errorf("Held = %d, %v, %v; want 2, in service", h, queued, ok)
	}
}

// TestBounded: a full table tracks no new key, and keys expire after the
// TTL, so the memory is bounded whatever the callers send.
func TestBounded(t *testing.T) {
	t0 := time.Unix(100, 0)
	tab := New[string, int](3, time.Second)
	for i := range 3 {
		tab.ArriveAt(t0, fmt.Sprint(i), i, true)
	}
	if d := tab.ArriveAt(t0, "x", 9, true); d.Action != Untracked || tab.Len() != 3 {
		t.Fatalf("a fourth key in a table of 3: %v, %d keys", d.Action, tab.Len())
	}
	if d := tab.ArriveAt(t0.Add(time.Second), "x", 9, true); d.Action != Serve || tab.Len() != 1 {
		t.Errorf("after the TTL: %v, %d keys held; want Serve and only the new key", d.Action, tab.Len())
	}
	if d := tab.ArriveAt(t0.Add(3*time.Second), "x", 10, true); d.Action != Serve {
		t.Errorf("a key seen 2 s ago with a TTL of 1 s: %v, want Serve (forgotten)", d.Action)
	}
	if s := tab.Stats(); s.Untracked != 1 {
		t.Errorf("stats %+v", s)
	}
	// A thumb that does not stop: waiters are bounded at the default.
	tab = New[string, int](0, 0)
	tab.ArriveAt(t0, "k", 0, false)
	var refused int
	for i := 1; i <= 1000; i++ {
		if tab.ArriveAt(t0, "k", i, true).Action == Refuse {
			refused++
		}
	}
	if got := len(tab.DoneAt(t0, "k")); got != DefaultMaxWaiters || refused != 1000-DefaultMaxWaiters {
		t.Errorf("%d waiters handed over, %d refused; want %d and %d", got, refused, DefaultMaxWaiters, 1000-DefaultMaxWaiters)
	}
}

func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{` "8e03978e" `, "8e03978e", true},
		{"", "", false},
		{`""`, "", false},
		{"a\x00b", "", false},
		{"é", "", false},
		{string(make([]byte, 256)), "", false},
	} {
		got, err := ParseKey(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrBadKey) {
			t.Errorf("ParseKey(%q): %v does not wrap ErrBadKey", c.in, err)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, "", " x ", "\x7f", `"`, `" "`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := ParseKey(v)
		if err != nil {
			return
		}
		if len(k) == 0 || len(k) > MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: length out of bounds", v, k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e || k[i] == '"' {
				t.Fatalf("ParseKey(%q) = %q: byte %#x", v, k, k[i])
			}
		}
		if again, err := ParseKey(k); err != nil || again != k {
			t.Fatalf("ParseKey(%q) = %q, %v: a key must parse to itself", k, again, err)
		}
	})
}

// Scopes built from different parts never read alike, whatever the
// parts' bytes: each goes in with its tag and length.
func TestScope(t *testing.T) {
	build := func(f func(s *Scope)) string {
		var s Scope
		f(&s)
		return s.String()
	}
	scopes := map[string]string{
		"path a, query b":   build(func(s *Scope) { s.Add('p', "a"); s.Add('q', "b") }),
		"path ab":           build(func(s *Scope) { s.Add('p', "ab"); s.Add('q', "") }),
		"path a1:b":         build(func(s *Scope) { s.Add('p', "a1:b") }),
		"query a":           build(func(s *Scope) { s.Add('q', "a") }),
		"no credentials":    build(func(s *Scope) { s.Caller(nil, nil, nil) }),
		"authorization x":   build(func(s *Scope) { s.Caller([]string{"x"}, nil, nil) }),
		"cookie x":          build(func(s *Scope) { s.Caller(nil, []string{"x"}, nil) }),
		"two authorization": build(func(s *Scope) { s.Caller([]string{"x", "y"}, nil, nil) }),
		"certificate x":     build(func(s *Scope) { s.Caller(nil, nil, []byte("x")) }),
	}
	seen := map[string]string{}
	for name, s := range scopes {
		if other, ok := seen[s]; ok {
			t.Errorf("%s and %s read alike: %q", name, other, s)
		}
		seen[s] = name
	}
	if a, b := build(func(s *Scope) { s.Caller([]string{"x"}, []string{"c"}, []byte{0, 1}) }),
		build(func(s *Scope) { s.Caller([]string{"x"}, []string{"c"}, []byte{0, 1}) }); a != b {
		t.Errorf("the same parts: %q and %q", a, b)
	}
}
