package fleet

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/killswitch"
)

func ptr[T any](v T) *T { return &v }

// dialsFleet is a set of OS processes running watchers of one dials name.
type dialsFleet struct {
	t        *testing.T
	children []*child
	n        int // watchers in all
}

func startDialsFleet(t *testing.T, addr, name string, procs, perProc int, poll time.Duration) *dialsFleet {
	t.Helper()
	f := &dialsFleet{t: t, n: procs * perProc}
	for range procs {
		f.children = append(f.children, startHelper(t, "dials", "STORMGUARD_REDIS_ADDR="+addr, "STORMGUARD_DIALS="+name,
			"STORMGUARD_TIMEOUT="+redisTimeout().String(), fmt.Sprint("STORMGUARD_WATCHERS=", perProc), "STORMGUARD_POLL="+poll.String()))
	}
	for _, c := range f.children {
		if l := c.next(t, 30*time.Second); l != "ready" {
			t.Fatalf("helper said %q", l)
		}
	}
	return f
}

// await reads one change from every watcher and returns the slowest's delay
// after t0, checking each applied what want says.
func (f *dialsFleet) await(t0 time.Time, want func(dialsChange) bool) time.Duration {
	f.t.Helper()
	var slowest time.Duration
	per := f.n / len(f.children)
	for _, c := range f.children {
		for range per {
			ch := parseChange(f.t, c.next(f.t, 10*time.Second))
			if !want(ch) {
				f.t.Errorf("watcher %d applied %+v", ch.watcher, ch)
			}
			slowest = max(slowest, ch.at.Sub(t0))
		}
	}
	return slowest
}

// TestKillSwitchAcrossProcesses flips the fleet's dials and times how long
// 40 watchers in 4 OS processes take to apply them: through pub/sub, then
// through polling alone (a change written without an announcement, as a
// restored backup is).
func TestKillSwitchAcrossProcesses(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	const name = "fleet-ks"
	f := startDialsFleet(t, srv.Addr(), name, 4, 10, 500*time.Millisecond)

	t0 := time.Now()
	st, err := SetDials(t.Context(), rdb, name, DialsChange{RetriesOff: ptr(true), ShedFraction: ptr(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if !st.RetriesOff || st.ShedFraction != 0.5 || st.Version != 1 || st.Updated.IsZero() {
		t.Fatalf("SetDials returned %+v", st)
	}
	slowest := f.await(t0, func(c dialsChange) bool { return c.version == 1 && c.off && c.shed == 0.5 })
	t.Logf("40 watchers applied version 1 within %v (pub/sub)", slowest)
	if bound := hostspeed.Scale(time.Second); slowest > bound {
		t.Errorf("the kill switch took %v to reach every watcher, more than %v", slowest, bound)
	}

	// Through polling: the hash changes, nothing is published.
	k := dialsKey(name)
	t0 = time.Now()
	if err := rdb.HSet(t.Context(), k, "retries_off", "0", "version", "2").Err(); err != nil {
		t.Fatal(err)
	}
	slowest = f.await(t0, func(c dialsChange) bool { return c.version == 2 && !c.off })
	t.Logf("40 watchers applied version 2 within %v (polling every 500ms)", slowest)
	if bound := 500*time.Millisecond + hostspeed.Scale(500*time.Millisecond); slowest > bound {
		t.Errorf("polling took %v to reach every watcher, more than %v", slowest, bound)
	}
}

// TestWatcherAppliesOlderState: after a failover to a replica that lagged (or
// a restored backup), Redis holds an older version than the watchers
// applied; they apply it, and then every change the operator makes, however
// low its version: the operator's last write always wins.
func TestWatcherAppliesOlderState(t *testing.T) {
	leakcheck.Check(t)
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	proxy := redistest.StartProxy(t, primary.Addr())
	rdb := newClient(t, proxy.Addr())
	logger, _ := testLogger()
	const name = "older"
	if _, err := SetDials(t.Context(), rdb, name, DialsChange{ShedFraction: ptr(0.1)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(2*time.Second), "the replica to hold version 1", func() bool {
		return replica.MustDo("HGET", dialsKey(name), "version") == "1"
	})
	replica.Promote() // it lags from now on
	d := new(killswitch.Dials)
	w, err := Watch(rdb, name, d, WatchConfig{PollInterval: 50 * time.Millisecond, Timeout: redisTimeout(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for v, shed := range []float64{0.2, 0.3, 0.4} {
		if _, err := SetDials(t.Context(), rdb, name, DialsChange{ShedFraction: ptr(shed)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, hostspeed.Scale(2*time.Second), fmt.Sprint("version ", v+2), func() bool { return d.ShedFraction() == shed })
	}
	// Failover: the clients now reach the replica, which holds version 1.
	proxy.SetTarget(replica.Addr())
	primary.Kill()
	waitFor(t, hostspeed.Scale(2*time.Second), "the replica's version 1", func() bool { return d.ShedFraction() == 0.1 })
	// Three flips in a row, each at a version the watcher saw before.
	for _, c := range []DialsChange{{RetriesOff: ptr(true)}, {RetriesOff: ptr(false)}, {ShedFraction: ptr(0.0)}} {
		st, err := SetDials(t.Context(), rdb, name, c)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version > 4 {
			t.Fatalf("the replica's version is %d; the test wants one at or below what the watcher saw (4)", st.Version)
		}
		waitFor(t, hostspeed.Scale(2*time.Second), fmt.Sprintf("version %d (%+v)", st.Version, st.State), func() bool {
			return d.RetriesDisabled() == st.RetriesOff && d.ShedFraction() == st.ShedFraction
		})
	}
}

// TestForgedAnnouncementIgnored: an announcement that does not match what
// Redis holds (forged, or a stale one replayed) changes nothing: it is only
// a cue to read the dials from Redis.
func TestForgedAnnouncementIgnored(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	rdb := newClient(t, srv.Addr())
	logger, _ := testLogger()
	const name = "forged"
	if _, err := SetDials(t.Context(), rdb, name, DialsChange{ShedFraction: ptr(0.1)}); err != nil {
		t.Fatal(err)
	}
	d := new(killswitch.Dials)
	w, err := Watch(rdb, name, d, WatchConfig{PollInterval: time.Hour, Timeout: redisTimeout(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	waitFor(t, hostspeed.Scale(2*time.Second), "the fleet state", func() bool { return d.ShedFraction() == 0.1 })
	time.Sleep(hostspeed.Scale(50 * time.Millisecond)) // subscribed
	// Shed everything, retries off, at a high version: what an attacker,
	// or a stale replay, would announce.
	for range 20 {
		if err := rdb.Publish(t.Context(), dialsKey(name), "v2 1 1000000 0 999 1 1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(hostspeed.Scale(200 * time.Millisecond))
	if d.ShedFraction() != 0.1 || d.RetriesDisabled() {
		t.Fatalf("a forged announcement was applied: shed %g, retries off %t", d.ShedFraction(), d.RetriesDisabled())
	}
	// A real change still arrives at once (the poll is an hour away).
	if _, err := SetDials(t.Context(), rdb, name, DialsChange{RetriesOff: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(time.Second), "the real change", func() bool { return d.RetriesDisabled() })
	// The watcher records what it applied as the fleet's change (what the
	// dials' metrics export as origin="fleet"), at Redis's time; a change
	// made in the process afterwards is local again.
	st, err := GetDials(t.Context(), rdb, name)
	if err != nil {
		t.Fatal(err)
	}
	got := d.LastChange()
	want := killswitch.Change{At: st.Updated, Origin: killswitch.OriginFleet, By: "fleet " + name}
	if !got.At.Equal(want.At) || got.Origin != want.Origin || got.By != want.By {
		t.Fatalf("last change after the watcher applied version %d: got %+v, want %+v", st.Version, got, want)
	}
	d.SetRetriesDisabled(false)
	if got := d.LastChange(); got.Origin != killswitch.OriginLocal {
		t.Fatalf("last change after a local setter: origin %v, want local", got.Origin)
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
	for _, name := range []string{"", "a{b}", "a b", string(make([]byte, 300))} {
		if _, err := SetDials(ctx, rdb, name, DialsChange{RetriesOff: ptr(true)}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("name %.20q: %v", name, err)
		}
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
