package killswitch

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestClientKey(t *testing.T) {
	tests := []struct {
		remote, want string
	}{
		{"192.0.2.7:1234", "192.0.2.7/32"},
		{"127.0.0.1:80", "127.0.0.1/32"},
		{"[::ffff:192.0.2.7]:1234", "192.0.2.7/32"}, // v4-mapped: the v4 client
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"}, // same /64, same client
		{"[fe80::1%eth0]:443", "fe80::/64"},
		{"@", "invalid Prefix"},
		{"", "invalid Prefix"},
		{"192.0.2.7", "invalid Prefix"}, // no port: not what net/http sets
	}
	for _, tt := range tests {
		if got := clientKey(tt.remote).String(); got != tt.want {
			t.Errorf("clientKey(%q) = %s; want %s", tt.remote, got, tt.want)
		}
	}
}

// A client may fail burst times, then once per every; its refusal says how
// long to wait; another client has its own bucket.
func TestAuthLimiter(t *testing.T) {
	l := newAuthLimiter(3, time.Minute)
	a := netip.MustParsePrefix("192.0.2.1/32")
	b := netip.MustParsePrefix("192.0.2.2/32")
	type op struct {
		at       time.Duration // since t0
		key      netip.Prefix
		wantOK   bool
		wantWait time.Duration
	}
	ops := []op{
		{0, a, true, 0},
		{0, a, true, 0},
		{0, a, true, 0},
		{0, a, false, time.Minute}, // burst spent
		{0, b, true, 0},            // b is not a
		{30 * time.Second, a, false, 30 * time.Second},
		{time.Minute, a, true, 0},                                 // one token back
		{time.Minute, a, false, time.Minute},                      // and spent
		{4 * time.Minute, a, true, 0},                             // full again
		{4 * time.Minute, a, true, 0},                             //
		{4 * time.Minute, a, true, 0},                             //
		{4*time.Minute + time.Second, a, false, 59 * time.Second}, //
	}
	for i, o := range ops {
		wait, ok := l.takeAt(o.key, t0.Add(o.at))
		if ok != o.wantOK || wait != o.wantWait {
			t.Fatalf("op %d (%v at +%v): ok %v, wait %v; want %v, %v", i, o.key, o.at, ok, wait, o.wantOK, o.wantWait)
		}
	}
}

// The limiter keeps at most maxAuthClients buckets: with the table full of
// clients that keep failing, new clients share one overflow bucket, which
// empties like any other (no address rotation resets it); once the
// buckets have refilled, the sweep makes room again.
func TestAuthLimiterBoundedMemory(t *testing.T) {
	l := newAuthLimiter(2, time.Second)
	addr := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	}
	for i := range maxAuthClients {
		if _, ok := l.takeAt(addr(i), t0); !ok {
			t.Fatalf("client %d refused on its first try", i)
		}
	}
	if n := l.size(); n != maxAuthClients {
		t.Fatalf("%d buckets; want %d", n, maxAuthClients)
	}
	// 1000 more addresses, one try each: they share the overflow bucket of
	// 2, so only 2 get through.
	through := 0
	for i := maxAuthClients; i < maxAuthClients+1000; i++ {
		if _, ok := l.takeAt(addr(i), t0); ok {
			through++
		}
	}
	if through != 2 || l.size() != maxAuthClients {
		t.Errorf("%d new clients got through, %d buckets; want 2 (the overflow bucket) and %d", through, l.size(), maxAuthClients)
	}
	// Two seconds on, every bucket is full again: the sweep drops them and
	// a new client gets a bucket of its own.
	later := t0.Add(2 * time.Second)
	if _, ok := l.takeAt(addr(5000), later); !ok {
		t.Fatal("a new client refused after every bucket refilled")
	}
	if n := l.size(); n != 1 {
		t.Errorf("%d buckets after the sweep; want 1", n)
	}
}

// Warnings come at most once per refill interval, with the count of
// refusals since the last one.
func TestAuthLimiterWarnings(t *testing.T) {
	l := newAuthLimiter(1, time.Second)
	var got []string
	for i := range 25 {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if n, warn := l.warnAt(now); warn {
			got = append(got, fmt.Sprintf("%v:%d", now.Sub(t0), n))
		}
	}
	want := []string{"0s:1", "1s:10", "2s:10"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("warnings %v; want %v", got, want)
	}
}
