package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/killswitch"
)

func ptr[T any](v T) *T { return &v }

// TestKillSwitchThreeProcesses flips the fleet's dials and times how long
// each of three OS processes takes to apply them: through pub/sub, then
// through polling alone (a change written without an announcement, as when
// the announcement is lost).
func TestKillSwitchThreeProcesses(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	const name = "fleet-ks"
	var children [3]*child
	for i := range children {
		children[i] = startHelper(t, "dials", "STORMGUARD_REDIS_ADDR="+srv.Addr(), "STORMGUARD_DIALS="+name,
			"STORMGUARD_TIMEOUT="+redisTimeout().String())
	}
	for _, c := range children {
		if l := c.next(t, 20*time.Second); l != "ready" {
			t.Fatalf("helper said %q", l)
		}
	}

	// Through pub/sub.
	t0 := time.Now()
	st, err := SetDials(t.Context(), rdb, name, DialsChange{RetriesOff: ptr(true), ShedFraction: ptr(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if !st.RetriesOff || st.ShedFraction != 0.5 || st.Version != 1 || st.Updated.IsZero() {
		t.Fatalf("SetDials returned %+v", st)
	}
	var slowest time.Duration
	for i, c := range children {
		v, at, off, shed := parseChange(t, c.next(t, 5*time.Second))
		lat := at.Sub(t0)
		t.Logf("process %d applied version %d after %v (pub/sub)", i, v, lat.Round(10*time.Microsecond))
		if v != 1 || !off || shed != 0.5 {
			t.Errorf("process %d applied version %d: retries off %t, shed %g", i, v, off, shed)
		}
		slowest = max(slowest, lat)
	}
	if bound := hostspeed.Scale(time.Second); slowest > bound {
		t.Errorf("the kill switch took %v to reach every process, more than %v", slowest, bound)
	}

	// Through polling: the hash changes, nothing is published.
	k := dialsKey(name)
	t0 = time.Now()
	if err := rdb.HSet(t.Context(), k, "retries_off", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HIncrBy(t.Context(), k, "version", 1).Err(); err != nil {
		t.Fatal(err)
	}
	slowest = 0
	for i, c := range children {
		v, at, off, _ := parseChange(t, c.next(t, 5*time.Second))
		lat := at.Sub(t0)
		t.Logf("process %d applied version %d after %v (polling)", i, v, lat.Round(10*time.Microsecond))
		if v != 2 || off {
			t.Errorf("process %d applied version %d with retries off %t", i, v, off)
		}
		slowest = max(slowest, lat)
	}
	// PollInterval (500ms) and a read.
	if bound := 500*time.Millisecond + hostspeed.Scale(500*time.Millisecond); slowest > bound {
		t.Errorf("polling took %v to reach every process, more than %v", slowest, bound)
	}
}

// TestWatcherRedisRestart: the dials keep their value while Redis is down
// and after it comes back empty; a change made after the restart arrives.
func TestWatcherRedisRestart(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	logger, _ := testLogger()
	d := new(killswitch.Dials)
	changes := make(chan DialsState, 10)
	w, err := Watch(rdb, "restart", d, WatchConfig{PollInterval: 100 * time.Millisecond, Timeout: redisTimeout(), Logger: logger, OnChange: func(s DialsState) { changes <- s }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	waitFor(t, hostspeed.Scale(2*time.Second), "the watcher to connect", func() bool { return w.Stats().Connected })
	if _, err := SetDials(t.Context(), rdb, "restart", DialsChange{LimitOverride: ptr(7)}); err != nil {
		t.Fatal(err)
	}
	<-changes
	if l, ok := d.LimitOverride(); !ok || l != 7 {
		t.Fatalf("limit override %d %t", l, ok)
	}
	srv.Kill()
	waitFor(t, hostspeed.Scale(2*time.Second), "the watcher to notice", func() bool { return !w.Stats().Connected })
	if l, _ := d.LimitOverride(); l != 7 {
		t.Fatal("the dials changed while Redis was down")
	}
	srv.Restart()
	waitFor(t, hostspeed.Scale(3*time.Second), "the watcher to reconnect", func() bool { return w.Stats().Connected })
	if l, _ := d.LimitOverride(); l != 7 {
		t.Fatal("an empty Redis reset the dials")
	}
	t0 := time.Now()
	if _, err := SetDials(t.Context(), rdb, "restart", DialsChange{RetriesOff: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-changes:
		t.Logf("after the restart, version %d applied in %v", s.Version, time.Since(t0))
		if !d.RetriesDisabled() || s.Version != 1 {
			t.Errorf("after the restart: %+v, retries off %t", s, d.RetriesDisabled())
		}
	case <-time.After(hostspeed.Scale(time.Second)):
		t.Fatalf("a change after the restart did not arrive within %v", hostspeed.Scale(time.Second))
	}
}

// TestWatcherLocalChangeStands: a local change (an admin endpoint) is not
// undone by polling; the next fleet change wins.
func TestWatcherLocalChangeStands(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	logger, _ := testLogger()
	if _, err := SetDials(t.Context(), rdb, "local", DialsChange{ShedFraction: ptr(0.1)}); err != nil {
		t.Fatal(err)
	}
	d := new(killswitch.Dials)
	w, err := Watch(rdb, "local", d, WatchConfig{PollInterval: 20 * time.Millisecond, Timeout: redisTimeout(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	waitFor(t, hostspeed.Scale(2*time.Second), "the fleet state at start", func() bool { return d.ShedFraction() == 0.1 })
	if err := d.SetShedFraction(0.3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hostspeed.Scale(100 * time.Millisecond)) // several polls
	if f := d.ShedFraction(); f != 0.3 {
		t.Fatalf("polling undid a local change: shed %g", f)
	}
	if _, err := SetDials(t.Context(), rdb, "local", DialsChange{ShedFraction: ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(time.Second), "the fleet change", func() bool { return d.ShedFraction() == 0 })
	if s := w.Stats(); s.Version != 2 || s.Applied != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestDialsErrors(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	ctx := t.Context()
	for _, c := range []DialsChange{
		{},
		{ShedFraction: ptr(1.5)},
		{ShedFraction: ptr(-0.1)},
		{LimitOverride: ptr(-1)},
		{LimitOverride: ptr(killswitch.MaxLimitOverride + 1)},
	} {
		if _, err := SetDials(ctx, rdb, "x", c); err == nil {
			t.Errorf("SetDials(%+v) succeeded", c)
		}
	}
	if _, err := SetDials(ctx, rdb, "", DialsChange{RetriesOff: ptr(true)}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("empty name: %v", err)
	}
	if s, err := GetDials(ctx, rdb, "never"); err != nil || s.Version != 0 || s.RetriesOff || !s.Updated.IsZero() {
		t.Errorf("dials never set: %+v, %v", s, err)
	}
	if _, err := Watch(rdb, "x", nil, WatchConfig{}); err == nil {
		t.Error("Watch with nil dials")
	}
	for _, p := range []string{"v1 1 2000000 0 1 0", "v2 1 0 0 1 0 -5", "v2 2 0 0 1 0 0", "v2 1 0 0 -1 0 0", "v3 1 0 0 1 0 0", "v2 1 0 0 1 0"} {
		if _, err := parseDials(p); err == nil {
			t.Errorf("%q parsed", p)
		}
	}
}
