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
		op     string // arrive-q, arrive-s (start at once), start, done
		key    string
		h      int
		want   Action
		old    int
		joined []int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a newer tap replaces a queued one", []step{
			{"arrive-q", "k", 1, Serve, 0, nil},
			{"arrive-q", "k", 2, Replace, 1, nil},
			{"arrive-q", "k", 3, Replace, 2, nil},
			{"start", "k", 0, 0, 0, nil},
			{"done", "k", 0, 0, 0, []int{}},
		}},
		{"a tap whose twin is in service waits for it", []step{
			{"arrive-s", "k", 1, Serve, 0, nil},
			{"arrive-q", "k", 2, Join, 0, nil},
			{"arrive-s", "k", 3, Join, 0, nil},
			{"done", "k", 0, 0, 0, []int{2, 3}},
			{"arrive-q", "k", 4, Serve, 0, nil}, // forgotten after done
		}},
		{"keys apart", []step{
			{"arrive-q", "a", 1, Serve, 0, nil},
			{"arrive-q", "b", 2, Serve, 0, nil},
			{"arrive-q", "a", 3, Replace, 1, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := New[string, int](0, 0)
			for i, s := range tt.steps {
				switch s.op {
				case "arrive-q", "arrive-s":
					d := tab.ArriveAt(t0, s.key, s.h, s.op == "arrive-q")
					if d.Action != s.want || (d.Action == Replace && d.Old != s.old) {
						t.Errorf("step %d: ArriveAt(%s, %d) = %+v, want %v (old %d)", i, s.key, s.h, d, s.want, s.old)
					}
				case "start":
					tab.StartAt(t0, s.key)
				case "done":
					if got := tab.DoneAt(t0, s.key); fmt.Sprint(got) != fmt.Sprint(s.joined) && !(len(got) == 0 && len(s.joined) == 0) {
						t.Errorf("step %d: DoneAt = %v, want %v", i, got, s.joined)
					}
				}
			}
		})
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
