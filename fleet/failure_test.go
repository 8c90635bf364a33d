package fleet

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/killswitch"
)

// storm retries through every budget in turn, every retry failing, for d,
// and returns the retries granted.
func storm(bs []*Budget, d time.Duration) int {
	granted := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, b := range bs {
			now := time.Now()
			b.BeginAt(now)
			b.EndAt(now, budget.Failure, budget.Ticket{})
			if tk, ok := b.RetryAt(now, budget.Transient); ok {
				granted++
				b.EndAt(now, budget.Failure, tk)
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	return granted
}

// joinN builds n budgets on key, each with its own client of addr.
func joinN(t *testing.T, addr, key string, n int, cfg Config) []*Budget {
	t.Helper()
	bs := make([]*Budget, n)
	for i := range bs {
		c := cfg
		c.Key = key
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s-%d", key, i)
		} else {
			c.ID = fmt.Sprintf("%s-%d", c.ID, i)
		}
		b, err := New(t.Context(), newClient(t, addr), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs[i] = b
	}
	return bs
}

// TestStateLossFreshProcessFirst: the fleet spends its budget, Redis loses
// the state (FLUSHALL, or a restart without persistence) and a process that
// never saw the old state reaches Redis first. The budget must not come
// back full: the fleet stays within capacity + lease slack over the whole
// run.
func TestStateLossFreshProcessFirst(t *testing.T) {
	for _, loss := range []string{"flushall", "restart"} {
		t.Run(loss, func(t *testing.T) {
			leakcheck.Check(t)
			srv := redistest.Start(t)
			logger, logs := testLogger()
			cfg := Config{Spec: aws2026(t), FleetSize: 3, LeaseTTL: hostspeed.Scale(600 * time.Millisecond), Timeout: hostspeed.Scale(100 * time.Millisecond), Logger: logger}
			old := joinN(t, srv.Addr(), "loss-"+loss, 2, cfg)
			endProbation(t, srv.Addr(), "loss-"+loss, old...)
			before := storm(old, hostspeed.Scale(400*time.Millisecond))
			switch loss {
			case "flushall":
				srv.MustDo("FLUSHALL")
			case "restart":
				srv.Kill()
				waitFor(t, hostspeed.Scale(3*time.Second), "both processes to fall back", func() bool {
					return old[0].Mode() == ModeFallback && old[1].Mode() == ModeFallback
				})
				srv.Restart()
			}
			fresh := cfg
			fresh.ID = "fresh"
			all := append(old, joinN(t, srv.Addr(), "loss-"+loss, 1, fresh)...)
			after := storm(all, cfg.LeaseTTL+hostspeed.Scale(400*time.Millisecond)) // past the probation
			slack := all[0].LeaseSlack()
			t.Logf("%d retries before the loss, %d after; bound (500 + slack %.0f) / 14 = %d", before, after, slack, int((500+slack)/14))
			if before < 30 {
				t.Fatalf("only %d retries before the loss: the budget was not spent", before)
			}
			if got := float64(before+after) * 14; got > 500+slack {
				t.Errorf("the fleet spent %.0f tokens, more than capacity 500 + slack %.0f", got, slack)
			}
			if strings.Contains(logs.String(), "fill") && !strings.Contains(logs.String(), "lost") {
				t.Logf("log:\n%s", logs.String())
			}
		})
	}
}

// TestStaleReplicaPromoted: the processes reach Redis through one address;
// a replica stops following the primary (promoted early, so it keeps an old
// state with most of the pool), the fleet spends the budget on the primary,
// then the address moves to the replica. A fresh process reaches the
// replica first. The stale pool must not be handed out again.
func TestStaleReplicaPromoted(t *testing.T) {
	leakcheck.Check(t)
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	proxy := redistest.StartProxy(t, primary.Addr())
	logger, logs := testLogger()
	cfg := Config{Spec: aws2026(t), FleetSize: 3, LeaseTTL: hostspeed.Scale(600 * time.Millisecond), Timeout: hostspeed.Scale(100 * time.Millisecond), Logger: logger}
	old := joinN(t, proxy.Addr(), "stale", 2, cfg)
	endProbation(t, proxy.Addr(), "stale", old...)
	waitFor(t, hostspeed.Scale(2*time.Second), "the replica to hold the state", func() bool {
		p, err := replica.Do("HGET", "stormguard:budget:{stale}", "pool")
		return err == nil && p == "444000"
	})
	replica.Promote() // from now on the replica's state grows old
	before := storm(old, hostspeed.Scale(400*time.Millisecond))
	primary.Kill()
	proxy.Block()
	fresh := cfg
	fresh.ID = "fresh"
	all := append(old, joinN(t, replica.Addr(), "stale", 1, fresh)...)
	proxy.SetTarget(replica.Addr())
	proxy.Unblock()
	after := storm(all, cfg.LeaseTTL+hostspeed.Scale(400*time.Millisecond)) // past the probation
	slack := all[0].LeaseSlack()
	t.Logf("%d retries before the failover, %d after; bound (500 + slack %.0f) / 14 = %d", before, after, slack, int((500+slack)/14))
	if before < 30 {
		t.Fatalf("only %d retries before the failover: the budget was not spent", before)
	}
	if got := float64(before+after) * 14; got > 500+slack {
		t.Errorf("the fleet spent %.0f tokens, more than capacity 500 + slack %.0f\n%s", got, slack, logs.String())
	}
}

// TestRejoinWithinRejoinInterval: after Redis comes back, every process
// that fell back rejoins within RejoinInterval and a round trip, even after
// an outage long enough for go-redis to stop dialing (it dials once a
// second after PoolSize failed dials).
func TestRejoinWithinRejoinInterval(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	logger, _ := testLogger()
	const rejoin = 100 * time.Millisecond
	bs := joinN(t, srv.Addr(), "rejoin", 3, Config{Spec: aws2026(t), FleetSize: 3, RejoinInterval: rejoin, Logger: logger, Timeout: hostspeed.Scale(50 * time.Millisecond)})
	srv.Kill()
	waitFor(t, hostspeed.Scale(3*time.Second), "every process to fall back", func() bool {
		for _, b := range bs {
			if b.Mode() != ModeFallback {
				return false
			}
		}
		return true
	})
	time.Sleep(1500 * time.Millisecond) // many failed dials
	srv.Restart()
	back := time.Now()
	bound := rejoin + hostspeed.Scale(100*time.Millisecond)
	waitFor(t, 10*time.Second, "every process to rejoin", func() bool {
		for _, b := range bs {
			if b.Mode() != ModeFleet {
				return false
			}
		}
		return true
	})
	took := time.Since(back)
	t.Logf("every process rejoined %v after Redis answered again (bound %v)", took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("rejoining took %v, more than RejoinInterval %v + a round trip (%v in all)", took, rejoin, bound)
	}
}

// TestCorruptStateRepaired: a state hash that holds garbage is reported as
// corrupt and rebuilt; the process stays in the fleet (no "unreachable"
// fallback while Redis answers) and the state is usable afterwards.
func TestCorruptStateRepaired(t *testing.T) {
	for _, c := range []struct {
		name string
		cmds [][]string // {KEY} stands for the state hash, {MEM} for the members set, {ID} for the process
	}{
		{"pool", [][]string{{"HSET", "{KEY}", "pool", "abc"}}},
		{"held", [][]string{{"HSET", "{KEY}", "held", "1e400"}}},
		{"gen", [][]string{{"HDEL", "{KEY}", "gen"}}},
		{"spec", [][]string{{"HSET", "{KEY}", "spec", "garbage"}}},
		{"answer", [][]string{{"HSET", "{KEY}", "g:{ID}", "garbage"}}},
		{"lease", [][]string{{"HSET", "{KEY}", "h:{ID}", "x"}}},
		{"seq", [][]string{{"HSET", "{KEY}", "s:{ID}", "nan"}}},
		{"string", [][]string{{"DEL", "{KEY}"}, {"SET", "{KEY}", "x"}}},
		{"members", [][]string{{"DEL", "{MEM}"}, {"HSET", "{MEM}", "a", "b"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			srv := redistest.Start(t)
			logger, logs := testLogger()
			key := "corrupt-" + c.name
			prefill(t, srv.Addr(), key, aws2026(t))
			b := joinN(t, srv.Addr(), key, 1, Config{Spec: aws2026(t), Logger: logger, Timeout: redisTimeout(), RejoinInterval: 20 * time.Millisecond})[0]
			base := "stormguard:budget:{" + key + "}"
			for _, cmd := range c.cmds {
				args := make([]string, len(cmd))
				for i, a := range cmd {
					a = strings.ReplaceAll(a, "{KEY}", base)
					a = strings.ReplaceAll(a, "{MEM}", base+":members")
					args[i] = strings.ReplaceAll(a, "{ID}", b.cfg.ID)
				}
				srv.MustDo(args...)
			}
			// Two retries empty the lease: the refill is a round trip.
			rt := b.Stats().RoundTrips
			for range 4 {
				if tk, ok := b.RetryAt(time.Now(), budget.Transient); ok {
					b.EndAt(time.Now(), budget.Failure, tk)
				}
			}
			waitFor(t, hostspeed.Scale(2*time.Second), "round trips after the corruption", func() bool { return b.Stats().RoundTrips >= rt+3 })
			time.Sleep(hostspeed.Scale(100 * time.Millisecond))
			s := b.Stats()
			if s.Fallbacks != 0 || s.Mode != ModeFleet {
				t.Errorf("the process fell back while Redis answered: %+v\n%s", s, logs.String())
			}
			if strings.Contains(logs.String(), "unreachable") {
				t.Errorf("the log says Redis is unreachable:\n%s", logs.String())
			}
			if !strings.Contains(logs.String(), "corrupt") {
				t.Errorf("the log does not report the corrupt state:\n%s", logs.String())
			}
			lv, err := Peek(t.Context(), newClient(t, srv.Addr()), key)
			if err != nil || !lv.Exists || lv.Processes != 1 || lv.Tokens > 500 || lv.Capacity != 500 {
				t.Errorf("after the repair: %+v, %v", lv, err)
			}
		})
	}
}

// TestSpecChangeAfterLastProcess: a changed spec is refused while a
// process of the old spec holds a live lease, and accepted once the last
// one left (at once after Close, after LeaseTTL after a crash), not a day
// later.
func TestSpecChangeAfterLastProcess(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	logger, _ := testLogger()
	s1 := aws2026(t)
	s2 := aws2026(t)
	s2.Capacity = 1000
	timeout := redisTimeout()

	a, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "respec", Spec: s1, Logger: logger, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "respec", Spec: s2, Logger: logger, Timeout: timeout})
	if err != nil {
		t.Fatalf("a new spec after the last process of the old one closed: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// A crash: the old spec's process never hands its lease back.
	ttl := hostspeed.Scale(400 * time.Millisecond)
	rdb := redis.NewClient(ClientOptions(srv.Addr(), "", timeout))
	c, err := New(t.Context(), rdb, Config{Key: "respec", Spec: s2, Logger: logger, Timeout: timeout, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	crashed := time.Now()
	c.Close() // cannot reach Redis: the lease stays until it expires
	if d, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "respec", Spec: s1, Logger: logger, Timeout: timeout}); err == nil {
		mode := d.Mode()
		d.Close()
		if mode == ModeFleet && time.Since(crashed) < ttl {
			t.Fatal("a new spec was accepted while a process of the old one held a live lease")
		}
	} else if !errors.Is(err, ErrSpecMismatch) {
		t.Fatalf("New with the old spec's lease live: %v, want ErrSpecMismatch", err)
	}
	waitFor(t, ttl+hostspeed.Scale(time.Second), "the new spec to be accepted", func() bool {
		d, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "respec", Spec: s1, Logger: logger, Timeout: timeout})
		if err != nil {
			return false
		}
		defer d.Close()
		return d.Mode() == ModeFleet
	})
	t.Logf("accepted %v after the crash (lease TTL %v)", time.Since(crashed).Round(time.Millisecond), ttl)
}

// TestMissingPasswordSaysAuthentication: a process without the password
// of a Redis that requires one says that authentication is required, not
// that Redis broke the protocol or cannot be reached.
func TestMissingPasswordSaysAuthentication(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t, "--requirepass", "s3cret")
	logger, logs := testLogger()
	b, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "auth", Spec: aws2026(t), Logger: logger, Timeout: redisTimeout()})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Close()
	if b.Stats().Fallbacks != 1 {
		t.Errorf("stats %+v", b.Stats())
	}
	for _, want := range []string{"requires authentication", "NOAUTH"} {
		if !strings.Contains(logs.String(), want) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the log and Close (%v) do not say %q:\n%s", err, want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "unreachable") {
		t.Errorf("the log says Redis is unreachable:\n%s", logs.String())
	}
}

// TestFallbackShareWithoutFleetSize: without Config.FleetSize, a process
// falls back to a share bounded by the processes the fleet knows of, not
// to the whole budget.
func TestFallbackShareWithoutFleetSize(t *testing.T) {
	leakcheck.Check(t)
	t.Run("never reached Redis", func(t *testing.T) {
		srv := redistest.Start(t)
		srv.Kill()
		logger, _ := testLogger()
		for i := range 3 {
			b, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "nosize", Spec: aws2026(t), Logger: logger, ID: fmt.Sprint("p", i)})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// It cannot know how many start with it: one lease, not the
			// whole capacity.
			if s := b.Stats(); s.Mode != ModeFallback || s.Hold > 28 {
				t.Errorf("process %d: %+v, want fallback with at most one lease (28 tokens)", i, s)
			}
		}
	})
	t.Run("after a rebuild", func(t *testing.T) {
		srv := redistest.Start(t)
		logger, logs := testLogger()
		bs := joinN(t, srv.Addr(), "learn", 3, Config{Spec: aws2026(t), Logger: logger, Timeout: redisTimeout()})
		// Each sees the three at its next round trip.
		for _, b := range bs {
			rt := b.Stats().RoundTrips
			for range 2 {
				if tk, ok := b.RetryAt(time.Now(), budget.Transient); ok {
					b.EndAt(time.Now(), budget.Failure, tk)
				}
			}
			waitFor(t, hostspeed.Scale(2*time.Second), "a round trip", func() bool { return b.Stats().RoundTrips > rt })
		}
		for i, b := range bs {
			if n := b.FleetSize(); n != 3 {
				t.Fatalf("process %d counts %d processes, want 3", i, n)
			}
		}
		// Redis loses the state; one process rebuilds it alone.
		srv.MustDo("FLUSHALL")
		b := bs[0]
		rt := b.Stats().RoundTrips
		for range 2 {
			if tk, ok := b.RetryAt(time.Now(), budget.Transient); ok {
				b.EndAt(time.Now(), budget.Failure, tk)
			}
		}
		waitFor(t, hostspeed.Scale(2*time.Second), "the rebuild", func() bool { return b.Stats().RoundTrips > rt })
		if n := b.FleetSize(); n != 3 {
			t.Errorf("after rebuilding the state alone the process counts %d processes, want the 3 it knew", n)
		}
		srv.Kill()
		waitFor(t, hostspeed.Scale(3*time.Second), "the fallback", func() bool { return b.Mode() == ModeFallback })
		if !strings.Contains(logs.String(), "share=1/3") {
			t.Errorf("the fallback share is not 1/3:\n%s", logs.String())
		}
	})
}

// TestWatcherIgnoresOldAnnouncement: an announcement whose version does not
// move forward (delayed, or replayed) is not applied.
func TestWatcherIgnoresOldAnnouncement(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	logger, _ := testLogger()
	const name = "replay"
	// Record the announcements.
	sub := rdb.Subscribe(t.Context(), dialsKey(name))
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	d := new(killswitch.Dials)
	applied := make(chan int64, 10)
	w, err := Watch(rdb, name, d, WatchConfig{PollInterval: time.Hour, Logger: logger, OnChange: func(s DialsState) { applied <- s.Version }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	waitFor(t, hostspeed.Scale(2*time.Second), "the watcher to connect", func() bool { return w.Stats().Connected })
	time.Sleep(hostspeed.Scale(50 * time.Millisecond)) // subscribed
	if _, err := SetDials(t.Context(), rdb, name, DialsChange{RetriesOff: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	first, err := sub.ReceiveMessage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetDials(t.Context(), rdb, name, DialsChange{RetriesOff: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(2*time.Second), "version 2", func() bool { return w.Stats().Version == 2 })
	if err := rdb.Publish(t.Context(), dialsKey(name), first.Payload).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := SetDials(t.Context(), rdb, name, DialsChange{ShedFraction: ptr(0.5)}); err != nil {
		t.Fatal(err)
	}
	// The versions applied, in turn, up to 3 (OnChange runs after Stats
	// shows a version: read the channel, not Stats).
	var got []int64
	timeout := time.After(hostspeed.Scale(2 * time.Second))
	for len(got) == 0 || got[len(got)-1] != 3 {
		select {
		case v := <-applied:
			got = append(got, v)
		case <-timeout:
			t.Fatalf("version 3 not applied; applied %v", got)
		}
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("versions applied in turn: %v, want [1 2 3] (the replayed version 1 ignored)", got)
	}
}

// TestClientOptionsDialAfterFailedDials: a client from ClientOptions that
// failed to dial many times reaches Redis at its first command once Redis
// is back (go-redis alone answers with the last dial error for up to a
// second after PoolSize failed dials).
func TestClientOptionsDialAfterFailedDials(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	srv.Kill()
	for i := range 10 {
		err := rdb.Ping(t.Context()).Err()
		if err == nil {
			t.Fatal("a ping reached a killed Redis")
		}
		if i == 0 && !strings.Contains(err.Error(), "dial tcp "+srv.Addr()) {
			t.Errorf("the error does not name the dial: %v", err)
		}
	}
	srv.Restart()
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Errorf("the first ping after Redis came back: %v", err)
	}
}

// TestNewBudgetFillsAfterProbation: a budget new to Redis starts empty and
// fills to the capacity one lease TTL later, by itself.
func TestNewBudgetFillsAfterProbation(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	logger, logs := testLogger()
	ttl := hostspeed.Scale(300 * time.Millisecond)
	// The probation starts inside the join, so after this instant: the
	// pool may fill no sooner than ttl after it (an instant taken after the
	// join returned would be late by the join's round trip).
	joining := time.Now()
	b := joinN(t, srv.Addr(), "probation", 1, Config{Spec: aws2026(t), Logger: logger, LeaseTTL: ttl, Timeout: redisTimeout()})[0]
	lv, err := Peek(t.Context(), newClient(t, srv.Addr()), "probation")
	if err != nil || lv.Tokens != 0 || lv.Probation.IsZero() {
		t.Fatalf("a new budget: %+v, %v; want empty, in probation", lv, err)
	}
	if _, ok := b.RetryAt(time.Now(), budget.Transient); ok {
		t.Error("a retry granted during the probation")
	}
	waitFor(t, ttl+hostspeed.Scale(time.Second), "the lease after the probation", func() bool { return b.Stats().Hold == 28 })
	if d := time.Since(joining); d < ttl {
		t.Errorf("the pool filled %v after the first process began to join, before the probation of %v ended", d, ttl)
	}
	lv, err = Peek(t.Context(), newClient(t, srv.Addr()), "probation")
	if err != nil || lv.Tokens != 500 || !lv.Probation.IsZero() {
		t.Errorf("after the probation: %+v, %v; want 500 tokens", lv, err)
	}
	if !strings.Contains(logs.String(), "the pool filled to the capacity") {
		t.Errorf("the log does not say the pool filled:\n%s", logs.String())
	}
}

// TestCorruptWindowRepaired: the window's fields are checked too.
func TestCorruptWindowRepaired(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	logger, logs := testLogger()
	spec := budget.Spec{Kind: budget.KindWindow, Window: time.Second, Ratio: 0.5}
	b := joinN(t, srv.Addr(), "corrupt-window", 1, Config{Spec: spec, Logger: logger, Timeout: redisTimeout(), FlushEvery: 10})[0]
	srv.MustDo("HSET", "stormguard:budget:{corrupt-window}", "lo", "x")
	rt := b.Stats().RoundTrips
	for range 20 {
		b.BeginAt(time.Now())
	}
	waitFor(t, hostspeed.Scale(2*time.Second), "a round trip", func() bool { return b.Stats().RoundTrips > rt+1 })
	if s := b.Stats(); s.Fallbacks != 0 || !strings.Contains(logs.String(), "corrupt=\"lo = \\\"x\\\"\"") {
		t.Errorf("stats %+v; log:\n%s", s, logs.String())
	}
	if lv, err := Peek(t.Context(), newClient(t, srv.Addr()), "corrupt-window"); err != nil || lv.Kind != budget.KindWindow {
		t.Errorf("after the repair: %+v, %v", lv, err)
	}
}

// TestMovedStateStartsItsOwnProbation: a state last written by another
// Redis server grants nothing for one LeaseTTL counted from when a process
// finds it there, whatever probation the copy carries. "ended, not
// cleared": the copy was taken after a probation ended but before a round
// trip cleared it (TestMultiProcessFailover/stale did this under load: its
// processes started slower than the probation, and the test's own end of
// it came after the pool had filled). "new budget's": the copy was taken
// during a new budget's probation, which ended before the replica was
// promoted. Kept as it was, the copy's probation had ended: the promoted
// replica granted the stale pool at once (the whole capacity, filled, in
// the second case) to a process that never saw the old state, before the
// processes that had spent it could report.
func TestMovedStateStartsItsOwnProbation(t *testing.T) {
	for _, c := range []struct {
		name   string
		filled bool // the pool filled on the primary before the copy
	}{
		{"ended, not cleared", true},
		{"new budget's", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			leakcheck.Check(t)
			primary := redistest.Start(t)
			replica := redistest.StartReplica(t, primary)
			key := "moved-probation"
			st := "stormguard:budget:{" + key + "}"
			logger, logs := testLogger()
			ttl := hostspeed.Scale(300 * time.Millisecond)
			cfg := Config{Spec: aws2026(t), LeaseTTL: ttl, Timeout: redisTimeout(), Logger: logger}
			old := joinN(t, primary.Addr(), key, 1, cfg)[0]
			if c.filled {
				endProbation(t, primary.Addr(), key, old)
			}
			// No process is left to clear or end a probation on the primary.
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			if c.filled {
				primary.MustDo("HSET", st, "prob", "1") // a probation that ended, not yet cleared
			}
			// The copy holds that ended probation, or the new budget's one
			// (with the fill that ends it).
			field := map[bool]string{true: "prob", false: "fill"}[c.filled]
			waitFor(t, hostspeed.Scale(2*time.Second), "the replica to hold the copy", func() bool {
				v, err := replica.Do("HGET", st, field)
				return err == nil && v == "1"
			})
			replica.Promote()
			rdb := newClient(t, replica.Addr())
			waitFor(t, ttl+hostspeed.Scale(2*time.Second), "the copy's probation to end", func() bool {
				p, err := replica.Do("HGET", st, "prob")
				if err != nil {
					return false
				}
				lv, err := Peek(t.Context(), rdb, key)
				return err == nil && p != "" && lv.Probation.IsZero()
			})

			joining := time.Now()
			fc := cfg
			fc.ID = "fresh"
			fresh := joinN(t, replica.Addr(), key, 1, fc)[0]
			if !strings.Contains(logs.String(), "written by another Redis server") {
				t.Fatalf("the fresh process did not find the state moved:\n%s", logs.String())
			}
			lv, err := Peek(t.Context(), rdb, key)
			if err != nil || lv.Probation.IsZero() {
				t.Errorf("the moved state: %+v, %v; want a probation", lv, err)
			} else if got := lv.Probation.Sub(lv.ServerTime); got < ttl-hostspeed.Scale(200*time.Millisecond) {
				t.Errorf("the moved state's probation ends %v after the join, want about the lease TTL %v", got, ttl)
			}
			if _, ok := fresh.RetryAt(time.Now(), budget.Transient); ok {
				t.Error("a retry granted from the moved state during its probation")
			}
			if h := fresh.Stats().Hold; h != 0 {
				t.Errorf("the fresh process holds %g tokens during the probation, want 0", h)
			}
			// Then, no process of an earlier state having reported, the pool
			// grants: the copy as it is, or the new budget filled.
			waitFor(t, ttl+hostspeed.Scale(2*time.Second), "a lease after the probation", func() bool { return fresh.Stats().Hold == 28 })
			if d := time.Since(joining); d < ttl {
				t.Errorf("the moved state granted %v after the join began, before a probation of %v", d, ttl)
			}
		})
	}
}
