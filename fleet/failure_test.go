package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/lab"
)

// stormWork is the workload of the worst-case tests: most first tries fail
// (the fleet earns little), every retry fails (no refund).
var stormWork = workload{pFirst: 0.2, pRetry: 0, cost: 14, reward: 1, pause: 300 * time.Microsecond}

// fleetRun runs workers on budgets until stop is closed, and checks the
// bound when it ends: the retries cost, net of refunds, at most what the
// fleet earned (the pool starts empty; only earnings fill it).
type fleetRun struct {
	t      *testing.T
	before float64 // tokens the fleet earned before the run (credit)
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	total  tally
}

func startRun(t *testing.T, before float64, w workload, bs ...*Budget) *fleetRun {
	r := &fleetRun{t: t, before: before, stop: make(chan struct{})}
	for i, b := range bs {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			tl := w.run(b, uint64(i+1), time.Now().Add(time.Hour), r.stop)
			r.mu.Lock()
			r.total.add(tl)
			r.mu.Unlock()
		}()
	}
	return r
}

// end stops the workers and checks the bound.
func (r *fleetRun) end() tally {
	r.t.Helper()
	close(r.stop)
	r.wg.Wait()
	tl := r.total
	r.t.Logf("%d requests, %.0f tokens earned (and %.0f before), %d retries granted (%.0f tokens net), %d refused", tl.Requests, tl.Rewards, r.before, tl.Granted, tl.net(), tl.Refused)
	if tl.net() > tl.Rewards+r.before {
		r.t.Errorf("the fleet spent %.0f tokens net, more than the %.0f it earned", tl.net(), tl.Rewards+r.before)
	}
	return tl
}

// outageConfig: budgets that notice an outage fast.
func outageConfig(key, id string) Config {
	return Config{Key: key, ID: id, Timeout: hostspeed.Scale(50 * time.Millisecond), MaxWait: 5 * time.Millisecond,
		RejoinInterval: 50 * time.Millisecond, LeaseTTL: hostspeed.Scale(300 * time.Millisecond)}
}

// TestRedisRestartedEmpty: Redis is killed while the fleet retries and comes
// back empty. The processes fall back to what they hold and earn, rejoin
// within RejoinInterval and a round trip of Redis answering again, and the
// new state starts empty: the fleet never spends more than it earned.
func TestRedisRestartedEmpty(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	credit(t, srv.Addr(), "restart", 500)
	var bs []*Budget
	for i := range 4 {
		b, _ := newBudget(t, srv.Addr(), outageConfig("restart", fmt.Sprint("w", i)))
		bs = append(bs, b)
	}
	r := startRun(t, 500, stormWork, bs...)
	time.Sleep(hostspeed.Scale(300 * time.Millisecond))
	srv.Kill()
	waitFor(t, hostspeed.Scale(3*time.Second), "every process to fall back", func() bool {
		for _, b := range bs {
			if b.Mode() != ModeFallback {
				return false
			}
		}
		return true
	})
	time.Sleep(hostspeed.Scale(200 * time.Millisecond))
	srv.Restart()
	back := time.Now()
	var slowest time.Duration
	for _, b := range bs {
		waitFor(t, hostspeed.Scale(3*time.Second), "a rejoin", func() bool { return b.Mode() == ModeFleet })
		slowest = max(slowest, time.Since(back))
	}
	t.Logf("every process rejoined within %v of Redis answering again (RejoinInterval 50ms)", slowest)
	time.Sleep(hostspeed.Scale(300 * time.Millisecond))
	r.end()
	if lv := peek(t, srv.Addr(), "restart"); lv.Pool > 0 && lv.Generation == "" {
		t.Errorf("after the restart: %+v", lv)
	}
}

// TestFailoverToLaggingReplica: the fleet moves to a replica promoted while
// it lagged (it stopped following once the pool was full; the fleet spent
// the pool on the primary since). The copy's pool is never granted: the
// state was written by another server, so its pool is emptied.
func TestFailoverToLaggingReplica(t *testing.T) {
	leakcheck.Check(t)
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	proxy := redistest.StartProxy(t, primary.Addr())
	credit(t, primary.Addr(), "failover", 500)
	key := "stormguard:budget:{failover}"
	waitFor(t, hostspeed.Scale(3*time.Second), "the replica to hold the full pool", func() bool {
		return replica.MustDo("HGET", key, "level") == "500000"
	})
	replica.Promote() // a frozen copy: it lags from now on
	var bs []*Budget
	for i := range 4 {
		b, _ := newBudget(t, proxy.Addr(), outageConfig("failover", fmt.Sprint("w", i)))
		bs = append(bs, b)
	}
	r := startRun(t, 500, stormWork, bs...)
	time.Sleep(hostspeed.Scale(300 * time.Millisecond)) // the pool is spent on the primary
	primary.Kill()
	proxy.SetTarget(replica.Addr())
	time.Sleep(hostspeed.Scale(500 * time.Millisecond))
	// Had the copy's pool been granted, the fleet would have spent up to
	// 500 tokens more than it earned.
	r.end()
}

// TestPartitionHalfTheFleet: half the processes are cut off from Redis by a
// TCP proxy (lab.Proxy: open connections go silent, new ones are reset).
// They fall back to what they hold and earn; the others go on sharing the
// pool; when the partition heals, the cut-off ones rejoin. The fleet never
// spends more than it earned.
func TestPartitionHalfTheFleet(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := lab.NewProxy(ln, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go px.Serve(ctx)
	t.Cleanup(func() { cancel(); px.Close() })
	credit(t, srv.Addr(), "partition", 300)
	var bs []*Budget
	for i := range 4 {
		addr := srv.Addr()
		if i%2 == 1 {
			addr = px.Addr().String()
		}
		b, _ := newBudget(t, addr, outageConfig("partition", fmt.Sprint("w", i)))
		bs = append(bs, b)
	}
	r := startRun(t, 300, stormWork, bs...)
	time.Sleep(hostspeed.Scale(200 * time.Millisecond))
	px.SetCut(true)
	waitFor(t, hostspeed.Scale(3*time.Second), "the cut-off processes to fall back", func() bool {
		return bs[1].Mode() == ModeFallback && bs[3].Mode() == ModeFallback
	})
	if bs[0].Mode() != ModeFleet || bs[2].Mode() != ModeFleet {
		t.Errorf("processes that reach Redis fell back: %v %v", bs[0].Mode(), bs[2].Mode())
	}
	time.Sleep(hostspeed.Scale(400 * time.Millisecond))
	px.SetCut(false)
	healed := time.Now()
	waitFor(t, hostspeed.Scale(3*time.Second), "the cut-off processes to rejoin", func() bool {
		return bs[1].Mode() == ModeFleet && bs[3].Mode() == ModeFleet
	})
	t.Logf("rejoined %v after the partition healed", time.Since(healed))
	r.end()
}

// TestNeverReachedRedis: processes that start while Redis cannot be reached
// (and know no fleet size) retry only with what they earn, and join when it
// comes up.
func TestNeverReachedRedis(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	srv.Kill()
	var bs []*Budget
	for i := range 3 {
		b, logs := newBudget(t, srv.Addr(), outageConfig("never", fmt.Sprint("w", i)))
		if b.Mode() != ModeFallback || !strings.Contains(logs.String(), "Redis unreachable") {
			t.Fatalf("without Redis: mode %v, log %s", b.Mode(), logs)
		}
		bs = append(bs, b)
	}
	r := startRun(t, 0, stormWork, bs...)
	time.Sleep(hostspeed.Scale(300 * time.Millisecond))
	srv.Restart()
	for _, b := range bs {
		waitFor(t, hostspeed.Scale(3*time.Second), "a join", func() bool { return b.Mode() == ModeFleet })
	}
	time.Sleep(hostspeed.Scale(200 * time.Millisecond))
	if tl := r.end(); tl.Granted == 0 {
		t.Error("no retry granted: the processes' own earnings were not spent")
	}
}

// TestRetryAtBoundedWhileRedisHangs: Redis stops answering (SIGSTOP); a
// retry never waits more than MaxWait, and the processes fall back.
func TestRetryAtBoundedWhileRedisHangs(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	credit(t, srv.Addr(), "hang", 28)
	b, _ := newBudget(t, srv.Addr(), outageConfig("hang", "w"))
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for range 50 {
		start := time.Now()
		b.RetryAt(time.Now(), budget.Transient)
		slowest = max(slowest, time.Since(start))
	}
	if limit := 5*time.Millisecond + hostspeed.Scale(20*time.Millisecond); slowest > limit {
		t.Errorf("a retry waited %v on a hung Redis, want ≤ MaxWait (5ms) and scheduling (%v)", slowest, limit)
	}
	waitFor(t, hostspeed.Scale(3*time.Second), "the fallback", func() bool { return b.Mode() == ModeFallback })
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(3*time.Second), "the rejoin", func() bool { return b.Mode() == ModeFleet })
}

// TestCorruptStateRepaired: a state whose fields are not numbers, or a key
// of another type, is reported and started again, empty; the process stays
// in the fleet.
func TestCorruptStateRepaired(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	for _, c := range []struct {
		key   string
		setup []string
		want  string
	}{
		{"c1", []string{"HSET", "stormguard:budget:{c1}", "level", "lots"}, `level = \"lots\"`},
		{"c2", []string{"SET", "stormguard:budget:{c2}", "x"}, "the key holds a string"},
		{"c3", []string{"SET", "stormguard:budget:{c3}:members", "x"}, "members holds a string"},
		{"c4", []string{"HSET", "stormguard:budget:{c4}", "a:w", "?"}, `a:w = \"?\"`},
	} {
		t.Run(c.key, func(t *testing.T) {
			key := c.key
			if c.setup[0] == "HSET" {
				credit(t, srv.Addr(), key, 100) // a state to corrupt
			}
			srv.MustDo(c.setup...)
			b, logs := newBudget(t, srv.Addr(), Config{Key: key, ID: "w", MaxWait: redisTimeout()})
			if b.Mode() != ModeFleet || !strings.Contains(logs.String(), "corrupt") || !strings.Contains(logs.String(), c.want) {
				t.Errorf("mode %v, log:\n%s\nwant a corrupt state reported with %q", b.Mode(), logs, c.want)
			}
			if lv := peek(t, srv.Addr(), key); lv.Pool != 0 {
				t.Errorf("the state rebuilt holds %g tokens, want 0", lv.Pool)
			}
		})
	}
}

// TestMissingPasswordSaysAuthentication: a Redis that wants a password
// refuses the round trip; the process falls back and its log says why.
func TestMissingPasswordSaysAuthentication(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t, "--requirepass", "s3cret")
	b, logs := newBudget(t, srv.Addr(), Config{Key: "auth"})
	if b.Mode() != ModeFallback || !strings.Contains(logs.String(), "Redis requires authentication") {
		t.Errorf("mode %v, log:\n%s", b.Mode(), logs)
	}
	// With the password, it joins.
	rdb := redis.NewClient(ClientOptions(srv.Addr(), "s3cret", redisTimeout()))
	defer rdb.Close()
	logger, _ := testLogger()
	ok, err := New(context.Background(), rdb, Config{Key: "auth", Spec: aws2026(t), Logger: logger, Timeout: redisTimeout()})
	if err != nil {
		t.Fatalf("with the password: %v", err)
	}
	if ok.Mode() != ModeFleet {
		t.Fatalf("with the password: mode %v", ok.Mode())
	}
	ok.Close()
	if !errors.Is(roundTripError("k", redis.ErrClosed), redis.ErrClosed) {
		t.Error("roundTripError lost the error")
	}
}
