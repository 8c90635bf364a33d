package admit_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stormguard/stormguard/admit"
)

// keyed returns a first try with idempotency key k in scope "POST /pay".
func keyed(k string) admit.Request {
	return admit.Request{Attempt: 1, Key: k, KeyScope: "POST /pay"}
}

// supGate is a gate of limit n with supersession on.
func supGate(t *testing.T, n int, sc admit.SupersedeConfig) *admit.Gate {
	return mustGate(t, admit.Config{Limit: fixed(n), Supersede: &sc})
}

// A newer request with the same key replaces the older one still queued,
// which is answered Superseded; the queue holds one request per key
// whatever the taps; the newest runs.
func TestSupersedeReplacesQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := supGate(t, 1, admit.SupersedeConfig{})
		hold, _ := g.Admit(context.Background(), time.Now(), first) // takes the slot
		const taps = 5
		var last <-chan result
		for i := range taps {
			next := admitAsync(g, context.Background(), keyed("k"))
			synctest.Wait()
			if st := g.Stats(); st.Queued != 1 || st.Superseded != uint64(i) {
				t.Fatalf("tap %d: queued %d, superseded %d; want 1, %d", i+1, st.Queued, st.Superseded, i)
			}
			if last != nil {
				if got := (<-last).d; got.Answer != admit.Superseded {
					t.Fatalf("tap %d: %+v; want superseded", i, got)
				}
			}
			last = next
		}
		hold.Release(context.Background(), time.Now(), admit.Succeeded)
		r := <-last
		if !r.d.Admitted() || !r.t.Joinable() {
			t.Fatalf("the newest tap: %+v (joinable %v); want admitted, joinable", r.d, r.t.Joinable())
		}
		r.t.Release(context.Background(), time.Now(), admit.Succeeded)
		st := g.Stats()
		if st.Superseded != taps-1 || st.Goodput != 2 {
			t.Errorf("superseded %d, goodput %d; want %d, 2", st.Superseded, st.Goodput, taps-1)
		}
		checkBooks(t, st)
	})
}

// A request whose twin is in service waits for it and is answered with its
// result; the twin runs once.
func TestSupersedeJoinsInService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := supGate(t, 4, admit.SupersedeConfig{})
		twin, d := g.Admit(context.Background(), time.Now(), keyed("k"))
		if !d.Admitted() || !twin.Joinable() {
			t.Fatalf("twin: %+v; want admitted, joinable", d)
		}
		var joiners []<-chan result
		for range 3 {
			joiners = append(joiners, admitAsync(g, context.Background(), keyed("k")))
		}
		other := admitAsync(g, context.Background(), keyed("other")) // another key runs
		synctest.Wait()
		if st := g.Stats(); st.Joining != 3 || st.InFlight != 2 {
			t.Fatalf("joining %d, in flight %d; want 3, 2", st.Joining, st.InFlight)
		}
		o := <-other
		if !o.d.Admitted() {
			t.Fatalf("another key: %+v; want admitted", o.d)
		}
		o.t.Release(context.Background(), time.Now(), admit.Succeeded)
		twin.ReleaseWith(context.Background(), time.Now(), admit.Succeeded, "the twin's answer")
		for i, j := range joiners {
			if got := (<-j).d; got.Answer != admit.Joined || got.Result != "the twin's answer" {
				t.Errorf("joiner %d: %+v; want joined with the twin's answer", i, got)
			}
		}
		st := g.Stats()
		if st.Joined != 3 || st.Goodput != 2 || st.Started() != 2 {
			t.Errorf("joined %d, goodput %d, started %d; want 3, 2, 2", st.Joined, st.Goodput, st.Started())
		}
		// The key is forgotten: the next request with it runs.
		next, d := g.Admit(context.Background(), time.Now(), keyed("k"))
		if !d.Admitted() {
			t.Fatalf("after the twin ended: %+v; want admitted", d)
		}
		next.Release(context.Background(), time.Now(), admit.Succeeded)
		checkBooks(t, g.Stats())
	})
}

// What the waiters of a twin get, by how the twin ended: its result, or,
// with nothing fit to replay, another pass through the gate (the first
// runs, the others join it).
func TestSupersedeReplayRule(t *testing.T) {
	tests := []struct {
		name       string
		outcome    admit.Outcome
		result     any
		callerLeft bool
		late       bool // its deadline passed before it ended
		wantReplay bool
	}{
		{"success", admit.Succeeded, "r", false, false, true},
		{"a failure while its caller waited", admit.Failed, "r", false, false, true},
		{"an overload failure", admit.FailedOverload, "r", false, false, true},
		{"nothing kept", admit.Succeeded, nil, false, false, false},
		{"panicked", admit.Panicked, "r", false, false, false},
		{"its caller left and it failed", admit.Failed, "r", true, false, false},
		// A handler that returns when its context ends answers an implicit
		// 200 (or a 499, a gRPC CANCELED): nobody waited for it.
		{"its caller left and it succeeded anyway", admit.Succeeded, "r", true, false, false},
		// Its own short deadline passed: its handler's 408 (or DEADLINE
		// EXCEEDED) was for a caller that had given up.
		{"its deadline passed and it succeeded anyway", admit.Succeeded, "r", false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := supGate(t, 4, admit.SupersedeConfig{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				first := keyed("k")
				if tt.late {
					first.Timeout, first.HasTimeout = 50*time.Millisecond, true
				}
				twin, _ := g.Admit(ctx, time.Now(), first)
				a := admitAsync(g, context.Background(), keyed("k"))
				synctest.Wait()
				b := admitAsync(g, context.Background(), keyed("k"))
				synctest.Wait()
				if tt.callerLeft {
					cancel()
				}
				if tt.late {
					time.Sleep(100 * time.Millisecond)
				}
				twin.ReleaseWith(ctx, time.Now(), tt.outcome, tt.result)
				if tt.wantReplay {
					for _, w := range []<-chan result{a, b} {
						if got := (<-w).d; got.Answer != admit.Joined || got.Result != tt.result {
							t.Errorf("waiter: %+v; want joined with %v", got, tt.result)
						}
					}
					return
				}
				// The first waiter back runs (either may be first); the
				// other joins it.
				synctest.Wait()
				if st := g.Stats(); st.Joining != 1 || st.InFlight != 1 {
					t.Fatalf("joining %d, in flight %d; want one waiter running, one on it", st.Joining, st.InFlight)
				}
				var runs result
				var other <-chan result
				select {
				case runs = <-a:
					other = b
				case runs = <-b:
					other = a
				}
				if !runs.d.Admitted() {
					t.Fatalf("first waiter back: %+v; want admitted to run", runs.d)
				}
				runs.t.ReleaseWith(context.Background(), time.Now(), admit.Succeeded, "second run")
				if got := (<-other).d; got.Answer != admit.Joined || got.Result != "second run" {
					t.Errorf("other waiter: %+v; want joined with the second run", got)
				}
				if st := g.Stats(); st.Joined != 1 || st.Started() != 2 {
					t.Errorf("joined %d, started %d; want 1, 2", st.Joined, st.Started())
				}
			})
		})
	}
}

// Waiters per key are bounded: one more is refused as throttled (key-busy);
// one whose caller leaves takes itself off the list and makes room.
func TestSupersedeWaitersBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := supGate(t, 4, admit.SupersedeConfig{MaxWaiters: 2})
		twin, _ := g.Admit(context.Background(), time.Now(), keyed("k"))
		ctx, cancel := context.WithCancel(context.Background())
		leaves := admitAsync(g, ctx, keyed("k"))
		stays := admitAsync(g, context.Background(), keyed("k"))
		synctest.Wait()
		_, d := g.Admit(context.Background(), time.Now(), keyed("k"))
		if want := (admit.Decision{Answer: admit.Throttled, Reason: admit.ShedKeyBusy}); d != want {
			t.Errorf("a third waiter: %+v; want %+v", d, want)
		}
		cancel()
		if got := (<-leaves).d; got.Answer != admit.Canceled {
			t.Errorf("a waiter whose caller left: %+v; want canceled", got)
		}
		again := admitAsync(g, context.Background(), keyed("k")) // room again
		synctest.Wait()
		if st := g.Stats(); st.Joining != 2 {
			t.Fatalf("joining %d; want 2", st.Joining)
		}
		twin.ReleaseWith(context.Background(), time.Now(), admit.Succeeded, "r")
		for _, w := range []<-chan result{stays, again} {
			if got := (<-w).d; got.Answer != admit.Joined {
				t.Errorf("waiter: %+v; want joined", got)
			}
		}
		st := g.Stats()
		if st.Shed[admit.ShedKeyBusy] != 1 || st.Canceled != 1 || st.Joined != 2 {
			t.Errorf("key-busy %d, canceled %d, joined %d; want 1, 1, 2", st.Shed[admit.ShedKeyBusy], st.Canceled, st.Joined)
		}
		checkBooks(t, st)
	})
}

// Keys are collapsed only within their scope, only when supersession is
// on, and not at all once the table is full.
func TestSupersedeScopeAndOff(t *testing.T) {
	tests := []struct {
		name       string
		sc         *admit.SupersedeConfig
		a, b       admit.Request
		wantJoined bool
	}{
		{"same key, same scope", &admit.SupersedeConfig{}, keyed("k"), keyed("k"), true},
		{"same key, another scope", &admit.SupersedeConfig{}, keyed("k"), admit.Request{Key: "k", KeyScope: "POST /refund"}, false},
		{"scope and key do not run together", &admit.SupersedeConfig{}, admit.Request{Key: "b", KeyScope: "a"}, admit.Request{Key: "", KeyScope: "ab"}, false},
		{"off by default", nil, keyed("k"), keyed("k"), false},
		{"a full table tracks no new key", &admit.SupersedeConfig{MaxKeys: 1}, keyed("k"), keyed("k"), false},
		{"no key", &admit.SupersedeConfig{}, first, first, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := mustGate(t, admit.Config{Limit: fixed(4), Supersede: tt.sc})
				if tt.name == "a full table tracks no new key" {
					fill, _ := g.Admit(context.Background(), time.Now(), keyed("filler"))
					defer fill.Release(context.Background(), time.Now(), admit.Succeeded)
				}
				ta, _ := g.Admit(context.Background(), time.Now(), tt.a)
				b := admitAsync(g, context.Background(), tt.b)
				synctest.Wait()
				ta.ReleaseWith(context.Background(), time.Now(), admit.Succeeded, "a's")
				rb := <-b
				if got := rb.d.Answer == admit.Joined; got != tt.wantJoined {
					t.Errorf("b: %+v; joined %v, want %v", rb.d, got, tt.wantJoined)
				}
				rb.t.Release(context.Background(), time.Now(), admit.Succeeded)
			})
		})
	}
}

// A queued keyed request that leaves the queue without running (evicted,
// expired, its caller gone) gives its key up: the next request with the
// key is served, not taken for a twin.
func TestSupersedeQueuedEndsFreeTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := supGate(t, 1, admit.SupersedeConfig{})
		hold, _ := g.Admit(context.Background(), time.Now(), first)
		ctx, cancel := context.WithCancel(context.Background())
		gone := admitAsync(g, ctx, keyed("k"))
		synctest.Wait()
		cancel()
		if got := (<-gone).d; got.Answer != admit.Canceled {
			t.Fatalf("caller left: %+v", got)
		}
		short := keyed("k")
		short.Timeout, short.HasTimeout = 50*time.Millisecond, true
		expires := admitAsync(g, context.Background(), short)
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		if got := (<-expires).d; got.Answer != admit.Expired {
			t.Fatalf("deadline passed in the queue: %+v", got)
		}
		next := admitAsync(g, context.Background(), keyed("k"))
		synctest.Wait()
		hold.Release(context.Background(), time.Now(), admit.Succeeded)
		r := <-next
		if !r.d.Admitted() {
			t.Fatalf("next: %+v; want admitted", r.d)
		}
		r.t.Release(context.Background(), time.Now(), admit.Succeeded)
		st := g.Stats()
		if st.Superseded != 0 || st.Canceled != 1 || st.Expired != 1 {
			t.Errorf("superseded %d, canceled %d, expired %d; want 0, 1, 1", st.Superseded, st.Canceled, st.Expired)
		}
		checkBooks(t, st)
	})
}

// A newer request takes its twin's place in the queue, and the twin's
// deadline there; if its own deadline is sooner and passes first, it is
// answered Expired when its turn comes, never run late.
func TestSupersedeNewerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := supGate(t, 1, admit.SupersedeConfig{})
		hold, _ := g.Admit(context.Background(), time.Now(), first)
		older := admitAsync(g, context.Background(), keyed("k"))
		synctest.Wait()
		newer := keyed("k")
		newer.Timeout, newer.HasTimeout = 50*time.Millisecond, true
		nr := admitAsync(g, context.Background(), newer)
		synctest.Wait()
		if got := (<-older).d; got.Answer != admit.Superseded {
			t.Fatalf("older: %+v; want superseded", got)
		}
		time.Sleep(100 * time.Millisecond)
		hold.Release(context.Background(), time.Now(), admit.Succeeded)
		if got := (<-nr).d; got.Answer != admit.Expired {
			t.Errorf("newer, past its own deadline: %+v; want expired", got)
		}
		if n := g.Limiter().InFlight(); n != 0 {
			t.Errorf("limiter in flight %d; want its permit passed back", n)
		}
		checkBooks(t, g.Stats())
	})
}

func TestSupersedeConfigValidate(t *testing.T) {
	tests := []struct {
		sc admit.SupersedeConfig
		ok bool
	}{
		{admit.SupersedeConfig{}, true},
		{admit.SupersedeConfig{MaxKeys: 10, TTL: time.Minute, MaxWaiters: 4, MaxReplayBytes: 1 << 20}, true},
		{admit.SupersedeConfig{MaxKeys: -1}, false},
		{admit.SupersedeConfig{MaxKeys: 10_000_001}, false},
		{admit.SupersedeConfig{TTL: -time.Second}, false},
		{admit.SupersedeConfig{MaxWaiters: -1}, false},
		{admit.SupersedeConfig{MaxWaiters: 1025}, false},
		{admit.SupersedeConfig{MaxReplayBytes: -1}, false},
	}
	for _, tt := range tests {
		err := admit.Config{Supersede: &tt.sc}.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%+v: Validate = %v; want ok %v", tt.sc, err, tt.ok)
		}
	}
	if d := (admit.SupersedeConfig{}).WithDefaults(); d.MaxKeys != 100_000 || d.TTL != time.Minute || d.MaxWaiters != 16 || d.MaxReplayBytes != 64<<10 {
		t.Errorf("defaults %+v", d)
	}
}

// A queued request whose caller leaves just as a newer twin takes its
// place is counted once (superseded or canceled), and the newer one keeps
// the place: it is admitted when the slot frees.
func TestSupersedeCallerLeavesAsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := supGate(t, 1, admit.SupersedeConfig{})
		seen := map[admit.Answer]int{}
		const rounds = 50
		for i := range rounds {
			k := fmt.Sprint("k", i)
			hold, _ := g.Admit(context.Background(), time.Now(), first)
			ctx, cancel := context.WithCancel(context.Background())
			older := admitAsync(g, ctx, keyed(k))
			synctest.Wait()
			cancel()                                               // the older's caller leaves…
			newer := admitAsync(g, context.Background(), keyed(k)) // …as a newer tap arrives
			synctest.Wait()
			seen[(<-older).d.Answer]++
			hold.Release(context.Background(), time.Now(), admit.Succeeded)
			r := <-newer
			if !r.d.Admitted() {
				t.Fatalf("round %d: newer %+v; want admitted", i, r.d)
			}
			r.t.Release(context.Background(), time.Now(), admit.Succeeded)
		}
		if seen[admit.Superseded]+seen[admit.Canceled] != rounds {
			t.Errorf("older answers %v; want superseded or canceled", seen)
		}
		checkBooks(t, g.Stats())
	})
}
