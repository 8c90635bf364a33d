package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
)

func TestLeaseProtocol(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	ctx := t.Context()
	key := "lease"
	look := func() Level {
		t.Helper()
		lv, err := Peek(ctx, rdb, key)
		if err != nil {
			t.Fatal(err)
		}
		return lv
	}

	prefill(t, srv.Addr(), key, aws2026(t))
	b, err := New(ctx, rdb, Config{Key: key, Spec: aws2026(t), FleetSize: 1, MaxWait: hostspeed.Scale(100 * time.Millisecond), Timeout: redisTimeout()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if m := b.Mode(); m != ModeFleet {
		t.Fatalf("mode %v after New", m)
	}
	// Joining leases twice the highest cost (28) out of the full pool.
	if s := b.Stats(); s.Hold != 28 || s.Pool != 472 || s.RoundTrips != 1 {
		t.Fatalf("after New: %+v", s)
	}
	if lv := look(); lv.Tokens != 500 || lv.Pool != 472 || lv.Held != 28 || lv.Processes != 1 || lv.Capacity != 500 {
		t.Fatalf("Redis after New: %+v", lv)
	}

	// Two retries empty the lease; the second crosses the low-water mark
	// and the background goroutine refills it.
	now := time.Now()
	t1, ok1 := b.RetryAt(now, budget.Transient)
	t2, ok2 := b.RetryAt(now, budget.Transient)
	if !ok1 || !ok2 || !t1.Retry() {
		t.Fatal("retries refused with a full lease")
	}
	waitFor(t, hostspeed.Scale(2*time.Second), "the refill", func() bool { return b.Stats().Hold == 28 })
	if lv := look(); lv.Tokens != 472 || lv.Held != 28 {
		t.Fatalf("Redis after 2 retries: %+v", lv)
	}
	rt := b.Stats().RoundTrips

	// A refund and an ignore go back into the lease without a round trip.
	b.EndAt(now, budget.Success, t1)
	b.EndAt(now, budget.Ignore, t2)
	if s := b.Stats(); s.Hold != 56 || s.RoundTrips != rt {
		t.Fatalf("after a refund and an ignore: %+v (round trips before %d)", s, rt)
	}

	// 20 failed retries cost 280 tokens: the lease is refilled as it goes.
	for i := range 20 {
		tk, ok := b.RetryAt(time.Now(), budget.Transient)
		if !ok {
			t.Fatalf("retry %d refused; %+v", i, b.Stats())
		}
		b.EndAt(now, budget.Failure, tk)
	}
	// 100 first-try successes earn 100 tokens, sent in one batch.
	for range 100 {
		b.BeginAt(now)
		b.EndAt(now, budget.Success, budget.Ticket{})
	}
	waitFor(t, hostspeed.Scale(2*time.Second), "the successes to reach Redis", func() bool { return look().Tokens == 500-280+100 })

	// Close hands the lease back.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if lv := look(); lv.Tokens != 320 || lv.Held != 0 || lv.Processes != 0 {
		t.Fatalf("Redis after Close: %+v", lv)
	}
	if _, ok := b.RetryAt(now, budget.Transient); ok || b.Mode() != ModeClosed {
		t.Fatalf("a closed budget granted a retry (mode %v)", b.Mode())
	}
	b.EndAt(now, budget.Success, budget.Ticket{}) // no panic, no effect
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestAccountingExact runs three budgets (three "processes" in one) through
// a random mix of retries, refunds, ignores and successes while Redis is
// frozen for longer than the lease TTL, so that every process falls back,
// Redis reclaims their leases, and they rejoin. Kept away from the
// capacity, the shared level must come out exact: nothing lost, nothing
// counted twice.
func TestAccountingExact(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	ctx := t.Context()
	spec := aws2026(t)
	logger, logs := testLogger()
	prefill(t, srv.Addr(), "exact", spec)
	const n = 3
	var budgets [n]*Budget
	for i := range budgets {
		b, err := New(ctx, newClient(t, srv.Addr()), Config{
			Key: "exact", Spec: spec, FleetSize: n, LeaseTTL: 300 * time.Millisecond,
			ID: fmt.Sprintf("p%d", i), Logger: logger, MaxWait: hostspeed.Scale(20 * time.Millisecond),
			Timeout: hostspeed.Scale(50 * time.Millisecond),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		budgets[i] = b
	}
	// Phase 1: drain 8 retries each (336 tokens), so that what follows
	// never reaches the capacity.
	var spent float64
	for _, b := range budgets {
		for range 8 {
			tk, ok := b.RetryAt(time.Now(), budget.Transient)
			if !ok {
				t.Fatalf("drain refused: %+v", b.Stats())
			}
			b.EndAt(time.Now(), budget.Failure, tk)
			spent += 14
		}
	}

	// Phase 2: a random mix from three goroutines, Redis frozen in the
	// middle.
	var (
		mu    sync.Mutex
		total tally
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for i, b := range budgets {
		wg.Go(func() {
			var tl tally
			rewards := 0
			for k := uint64(0); ; k++ {
				select {
				case <-stop:
					mu.Lock()
					total.add(tl)
					mu.Unlock()
					return
				default:
				}
				now := time.Now()
				h := (k*2654435761 + uint64(i)*97) % 10
				switch {
				case h == 0 && rewards < 60:
					b.EndAt(now, budget.Success, budget.Ticket{})
					tl.Rewards++
					rewards++
				default:
					tk, ok := b.RetryAt(now, budget.Cause(h%3))
					if !ok {
						tl.Refused++
						break
					}
					c := []float64{14, 5, 14}[h%3]
					tl.Granted++
					tl.Charged += c
					switch h % 4 {
					case 0:
						b.EndAt(now, budget.Success, tk)
						tl.Refunded += c
					case 1:
						b.EndAt(now, budget.Ignore, tk)
						tl.Refunded += c
					default:
						b.EndAt(now, budget.Failure, tk)
					}
				}
				time.Sleep(300 * time.Microsecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(5*time.Second), "every process to fall back", func() bool {
		for _, b := range budgets {
			if b.Mode() != ModeFallback {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // longer than the lease TTL
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(5*time.Second), "every process to rejoin", func() bool {
		for _, b := range budgets {
			if b.Mode() != ModeFleet {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, b := range budgets {
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if s := b.Stats(); s.Fallbacks == 0 || s.Rejoins == 0 {
			t.Errorf("stats %+v: want a fallback and a rejoin", s)
		}
	}
	lv, err := Peek(ctx, newClient(t, srv.Addr()), "exact")
	if err != nil {
		t.Fatal(err)
	}
	want := 500 - spent - total.net() + total.Rewards
	t.Logf("phase 2: %d granted, %d refused, net %.0f tokens, %.0f rewards; level %.3f, want %.3f", total.Granted, total.Refused, total.net(), total.Rewards, lv.Tokens, want)
	if lv.Tokens != want || lv.Held != 0 {
		t.Errorf("shared level %+v, want %v tokens and none held", lv, want)
	}
	if total.Granted < 50 {
		t.Errorf("only %d retries granted: the test did not exercise the budget", total.Granted)
	}
	for _, s := range []string{"falling back", "rejoined", "mode=fallback"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("the log does not say %q:\n%s", s, logs.String())
		}
	}
}

// TestThreeProcessesShareBudget runs three OS processes on one budget
// against a dependency that keeps failing: together they stay within the
// one budget (plus the lease slack), where three local budgets would allow
// three times as much.
func TestThreeProcessesShareBudget(t *testing.T) {
	srv := redistest.Start(t)
	prefill(t, srv.Addr(), "procs", aws2026(t))
	const n = 3
	var children [n]*child
	for i := range children {
		children[i] = startHelper(t, "spend",
			"STORMGUARD_REDIS_ADDR="+srv.Addr(), "STORMGUARD_KEY=procs",
			"STORMGUARD_DURATION=1500ms", fmt.Sprintf("STORMGUARD_SEED=%d", i+1),
			"STORMGUARD_TIMEOUT="+hostspeed.Scale(200*time.Millisecond).String()) // a fallback is logged, not an error
	}
	for _, c := range children {
		if l := c.next(t, 20*time.Second); l != "ready" {
			t.Fatalf("helper said %q", l)
		}
	}
	for _, c := range children {
		fmt.Fprintln(c.stdin, "go")
	}
	var total tally
	var ops, trips float64
	for i, c := range children {
		var tl tally
		line := c.next(t, 20*time.Second)
		if err := json.Unmarshal([]byte(line), &tl); err != nil {
			t.Fatalf("helper %d: %v: %q", i, err, line)
		}
		if tl.Mode != "fleet" || tl.Stats.Fallbacks != 0 {
			// Not an error: a round trip slower than the timeout on a
			// loaded machine. The bound below must hold all the same.
			t.Logf("helper %d fell back: %+v", i, tl)
		}
		t.Logf("process %d: %d requests, %d retries granted, %d refused, net %.0f tokens, %.0f rewards, %d round trips, max RetryAt %v",
			i, tl.Requests, tl.Granted, tl.Refused, tl.net(), tl.Rewards, tl.Stats.RoundTrips, tl.MaxRetryWait)
		total.add(tl)
		ops += float64(2*tl.Requests + 2*tl.Granted + tl.Refused)
		trips += float64(tl.Stats.RoundTrips)
	}
	slack := float64(n * 2 * 28)
	bound := 500 + total.Rewards
	t.Logf("fleet: net %.0f tokens for a budget of %.0f (500 + rewards), slack %.0f; %.2f round trips per 100 operations",
		total.net(), bound, slack, 100*trips/ops)
	if total.net() > bound+slack {
		t.Errorf("the fleet spent %.0f tokens on retries, more than the budget %.0f + slack %.0f", total.net(), bound, slack)
	}
	if total.net() < 500-slack {
		t.Errorf("the fleet spent only %.0f tokens: the budget was not used", total.net())
	}
	if lv, err := Peek(t.Context(), newClient(t, srv.Addr()), "procs"); err != nil {
		t.Fatal(err)
	} else if lv.Held != 0 || lv.Processes != 0 || lv.Tokens > 500-total.net()+total.Rewards+1e-9 {
		t.Errorf("after the processes closed: %+v", lv)
	}
}

// TestDeadProcessLeaseReturns kills a process that holds a lease: after
// the lease TTL, Redis gives its tokens back to the pool (including the 14
// it spent since its last round trip: that is the lease slack).
func TestDeadProcessLeaseReturns(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	prefill(t, srv.Addr(), "dead", aws2026(t))
	c := startHelper(t, "hold", "STORMGUARD_REDIS_ADDR="+srv.Addr(), "STORMGUARD_KEY=dead",
		"STORMGUARD_TIMEOUT="+redisTimeout().String())
	if l := c.next(t, 20*time.Second); l != "ready" {
		t.Fatalf("helper said %q", l)
	}
	lv, err := Peek(t.Context(), rdb, "dead")
	if err != nil || lv.Held != 28 || lv.Processes != 1 {
		t.Fatalf("with the helper alive: %+v %v", lv, err)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// A live process's next round trip reclaims the dead lease.
	b, err := New(t.Context(), rdb, Config{Key: "dead", Spec: aws2026(t), LeaseTTL: 300 * time.Millisecond, Timeout: redisTimeout()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitFor(t, hostspeed.Scale(3*time.Second), "the dead lease to return", func() bool {
		lv, err := Peek(t.Context(), rdb, "dead")
		return err == nil && lv.Processes == 1 && lv.Held == 28 && lv.Tokens == 500
	})
}

// TestOutageKillRestart kills Redis in the middle of a storm and starts it
// again, empty: every process falls back, then rejoins, and the fleet
// never spends more than the budget plus the lease slack.
func TestOutageKillRestart(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	ctx := t.Context()
	logger, logs := testLogger()
	prefill(t, srv.Addr(), "outage", aws2026(t))
	const n = 3
	var budgets [n]*Budget
	for i := range budgets {
		b, err := New(ctx, newClient(t, srv.Addr()), Config{Key: "outage", Spec: aws2026(t), FleetSize: n, Logger: logger, Timeout: hostspeed.Scale(50 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		budgets[i] = b
	}
	slack := budgets[0].LeaseSlack()
	w := workload{pFirst: 0.05, pRetry: 0.3, cost: 14, reward: 1, pause: 100 * time.Microsecond}
	var (
		mu    sync.Mutex
		total tally
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for i, b := range budgets {
		wg.Go(func() {
			tl := w.run(b, uint64(i+1), time.Now().Add(time.Minute), stop)
			mu.Lock()
			total.add(tl)
			mu.Unlock()
		})
	}
	all := func(m Mode) func() bool {
		return func() bool {
			for _, b := range budgets {
				if b.Mode() != m {
					return false
				}
			}
			return true
		}
	}
	time.Sleep(400 * time.Millisecond)
	srv.Kill()
	killed := time.Now()
	waitFor(t, hostspeed.Scale(3*time.Second), "every process to fall back", all(ModeFallback))
	t.Logf("all processes in fallback %v after the kill", time.Since(killed).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	srv.Restart()
	restarted := time.Now()
	waitFor(t, hostspeed.Scale(5*time.Second), "every process to rejoin", all(ModeFleet))
	t.Logf("all processes rejoined %v after the restart", time.Since(restarted).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	over := total.net() - (500 + total.Rewards)
	t.Logf("net %.0f tokens on retries, budget 500 + %.0f rewards: overshoot %.0f tokens, lease slack %.0f; max RetryAt %v",
		total.net(), total.Rewards, max(over, 0), slack, total.MaxRetryWait)
	if over > slack {
		t.Errorf("the fleet exceeded the budget by %.0f tokens, more than the lease slack %.0f", over, slack)
	}
	// That a RetryAt never waits on Redis is checked where it can show, with
	// Redis frozen (TestRetryAtBoundedWhileRedisHangs): here a round trip to
	// a killed Redis fails at once, and a slow RetryAt is the host's.
	for _, s := range []string{"falling back", "rejoined", "lost the shared state"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("the log does not say %q", s)
		}
	}
}

// TestRetryAtBoundedWhileRedisHangs freezes Redis: no RetryAt waits more
// than MaxWait (plus scheduling), the process falls back, and retries go on
// from the local share.
func TestRetryAtBoundedWhileRedisHangs(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	logger, _ := testLogger()
	// A long timeout: a RetryAt that waited on Redis would take a second.
	timeout := hostspeed.Scale(time.Second)
	rdb := redis.NewClient(ClientOptions(srv.Addr(), "", timeout))
	t.Cleanup(func() { rdb.Close() })
	prefill(t, srv.Addr(), "hang", aws2026(t))
	b, err := New(t.Context(), rdb, Config{Key: "hang", Spec: aws2026(t), FleetSize: 4, Logger: logger, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	var slowest time.Duration
	granted, rewards := 0, 0
	deadline := time.Now().Add(2*timeout + 200*time.Millisecond)
	for time.Now().Before(deadline) {
		start := time.Now()
		tk, ok := b.RetryAt(start, budget.Transient)
		slowest = max(slowest, time.Since(start))
		if ok {
			granted++
			b.EndAt(start, budget.Failure, tk)
		}
		b.EndAt(start, budget.Success, budget.Ticket{})
		rewards++
		time.Sleep(100 * time.Microsecond)
	}
	t.Logf("slowest RetryAt %v; %d retries granted; %+v", slowest, granted, b.Stats())
	// A RetryAt that waited on a round trip to the frozen Redis would take
	// the whole Timeout; anything shorter than half of it is MaxWait (2ms)
	// and the host's scheduling (under -race on a busy host, one RetryAt in
	// thousands was seen to take 0.8s).
	if bound := timeout / 2; slowest > bound {
		t.Errorf("a RetryAt waited %v on a frozen Redis, more than half the round trip timeout %v", slowest, timeout)
	}
	if b.Mode() != ModeFallback {
		t.Errorf("mode %v with Redis frozen", b.Mode())
	}
	// At most its lease, what it borrowed (one lease) and the rewards.
	if granted == 0 || granted*14 > 2*28+rewards {
		t.Errorf("%d retries granted in fallback", granted)
	}
}

// TestNoRedisAtStart: New answers at once with a working budget in
// fallback, then joins when Redis appears.
func TestNoRedisAtStart(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	srv.Kill()
	logger, _ := testLogger()
	start := time.Now()
	b, err := New(t.Context(), newClient(t, srv.Addr()), Config{Key: "late", Spec: aws2026(t), FleetSize: 5, Logger: logger, RejoinInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if d, bound := time.Since(start), hostspeed.Scale(300*time.Millisecond); d > bound {
		t.Errorf("New took %v without Redis, more than %v", d, bound)
	}
	if s := b.Stats(); s.Mode != ModeFallback || s.Hold != 100 {
		t.Fatalf("without Redis: %+v, want fallback with a full share of 100 tokens", s)
	}
	granted := 0
	for {
		tk, ok := b.RetryAt(time.Now(), budget.Transient)
		if !ok {
			break
		}
		granted++
		b.EndAt(time.Now(), budget.Failure, tk)
	}
	if granted != 7 { // ⌊100 / 14⌋
		t.Errorf("%d retries from a share of 100 tokens, want 7", granted)
	}
	srv.Restart()
	waitFor(t, hostspeed.Scale(3*time.Second), "the budget to join", func() bool { return b.Mode() == ModeFleet })
	// It created the state, empty for the probation; then the pool fills
	// and it spent 98 tokens from a share it never had: the fleet is
	// charged.
	waitFor(t, hostspeed.Scale(3*time.Second), "the settlement", func() bool {
		lv, err := Peek(t.Context(), newClient(t, srv.Addr()), "late")
		return err == nil && lv.Tokens == -98
	})
	endProbation(t, srv.Addr(), "late", b)
	waitFor(t, hostspeed.Scale(3*time.Second), "the spending to be settled", func() bool {
		lv, err := Peek(t.Context(), newClient(t, srv.Addr()), "late")
		return err == nil && lv.Tokens == 500-98
	})
}

func TestWindowShared(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	ctx := t.Context()
	spec := budget.Spec{Kind: budget.KindWindow, Window: 10 * time.Second, Ratio: 0.5}
	var bs [2]*Budget
	for i := range bs {
		b, err := New(ctx, newClient(t, srv.Addr()), Config{Key: "win", Spec: spec, LeaseSize: 5, FlushEvery: 10, MaxWait: hostspeed.Scale(20 * time.Millisecond), Timeout: redisTimeout()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		bs[i] = b
		if !b.NeedsClock() {
			t.Error("a window must read the clock")
		}
	}
	// No requests yet: no retry allowed.
	if _, ok := bs[0].RetryAt(time.Now(), budget.Transient); ok {
		t.Fatal("retry granted with no requests in the window")
	}
	// 100 requests in each process allow 0.5 × 200 = 100 retries in all.
	for _, b := range bs {
		for range 100 {
			b.BeginAt(time.Now())
		}
	}
	waitFor(t, hostspeed.Scale(2*time.Second), "the requests to reach Redis", func() bool {
		lv, err := Peek(ctx, newClient(t, srv.Addr()), "win")
		return err == nil && lv.Requests == 200
	})
	granted := 0
	for i := 0; i < 400; i++ {
		b := bs[i%2]
		tk, ok := b.RetryAt(time.Now(), budget.Transient)
		if ok {
			granted++
			if i%10 == 0 { // abandoned before it started: given back
				b.EndAt(time.Now(), budget.Ignore, tk)
				granted--
			} else {
				b.EndAt(time.Now(), budget.Failure, tk)
			}
		}
		if !ok {
			time.Sleep(2 * time.Millisecond) // let a refill land
		}
	}
	slack := bs[0].LeaseSlack()
	t.Logf("%d retries granted for an allowance of 100 (slack %.0f)", granted, slack)
	if granted > 100 || float64(granted) < 100-slack {
		t.Errorf("%d retries granted, want at most 100 and close to it", granted)
	}
	lv, err := Peek(ctx, newClient(t, srv.Addr()), "win")
	if err != nil {
		t.Fatal(err)
	}
	if lv.Kind != budget.KindWindow || lv.Allowed != 100 || lv.Retries > 100 || lv.Window != 10*time.Second {
		t.Errorf("Redis: %+v", lv)
	}
}

func TestSpecMismatch(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	b, err := New(t.Context(), rdb, Config{Key: "spec", Spec: aws2026(t), Timeout: redisTimeout()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other := aws2026(t)
	other.Capacity = 1000
	if _, err := New(t.Context(), rdb, Config{Key: "spec", Spec: other, Timeout: redisTimeout()}); !errors.Is(err, ErrSpecMismatch) {
		t.Fatalf("New with another spec: %v, want ErrSpecMismatch", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{Spec: budget.Spec{Kind: budget.KindTokenBucket}},
		{Key: "a{b}", Spec: budget.Spec{Kind: budget.KindTokenBucket}},
		{Key: "k"},
		{Key: "k", Spec: budget.Spec{Kind: budget.KindConcurrency}},
		{Key: "k", Spec: budget.Spec{Kind: budget.KindTokenBucket, RetryCost: 5}, LeaseSize: 4},
		{Key: "k", Spec: budget.Spec{Kind: budget.KindWindow, Ratio: 0.1}, LeaseSize: 1.5},
		{Key: "k", Spec: budget.Spec{Kind: budget.KindWindow, Ratio: 0.1, Window: time.Millisecond}},
		{Key: "k", Spec: budget.Spec{Kind: budget.KindTokenBucket}, LeaseTTL: time.Millisecond},
		{Key: "k", Spec: budget.Spec{Kind: budget.KindTokenBucket}, ID: "a b"},
	} {
		if _, err := New(context.Background(), nil, c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): %v, want ErrInvalidConfig", c, err)
		}
	}
}

// TestSpecDefaultsMatchBudget checks that the fleet fills a spec's zero
// fields as the budget package does.
func TestSpecDefaultsMatchBudget(t *testing.T) {
	s := specDefaults(budget.Spec{Kind: budget.KindTokenBucket})
	local, err := budget.Spec{Kind: budget.KindTokenBucket}.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := local.(*budget.TokenBucket)
	if tb.Capacity() != s.Capacity {
		t.Errorf("capacity %v, budget says %v", s.Capacity, tb.Capacity())
	}
	for c, want := range []float64{s.RetryCost, s.ThrottleCost, s.TimeoutCost} {
		fresh, _ := budget.Spec{Kind: budget.KindTokenBucket}.New()
		before := fresh.(*budget.TokenBucket).Level()
		fresh.RetryAt(time.Time{}, budget.Cause(c))
		if got := before - fresh.(*budget.TokenBucket).Level(); math.Abs(got-want) > 1e-9 {
			t.Errorf("cause %v costs %v, budget says %v", budget.Cause(c), want, got)
		}
	}
	fresh, _ := budget.Spec{Kind: budget.KindTokenBucket}.New()
	tk, _ := fresh.RetryAt(time.Time{}, budget.Transient)
	fresh.EndAt(time.Time{}, budget.Failure, tk)
	before := fresh.(*budget.TokenBucket).Level()
	fresh.EndAt(time.Time{}, budget.Success, budget.Ticket{})
	if got := fresh.(*budget.TokenBucket).Level() - before; got != s.SuccessReward {
		t.Errorf("reward %v, budget says %v", s.SuccessReward, got)
	}
	if w := specDefaults(budget.Spec{Kind: budget.KindWindow}).Window; w != 10*time.Second {
		t.Errorf("window %v", w)
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{ModeFleet: "fleet", ModeFallback: "fallback", ModeClosed: "closed", 9: "fleet.Mode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q", m, m.String())
		}
	}
	if !ModeFallback.Fallback() || ModeFleet.Fallback() {
		t.Error("Fallback()")
	}
}
