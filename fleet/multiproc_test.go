package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/redistest"
)

// stormFleet is a set of helper processes retrying on one budget against a
// dependency that always fails.
type stormFleet struct {
	t        *testing.T
	key      string
	ttl      time.Duration
	children []*child
	started  int
}

func newStormFleet(t *testing.T, key string) *stormFleet {
	// Lease TTL: the probation of a state built again. Long enough for
	// processes that fall back to try Redis several times within it.
	return &stormFleet{t: t, key: key, ttl: hostspeed.Scale(600 * time.Millisecond)}
}

// start starts one process on addr and waits until it joined (or fell
// back); go lets it loose.
func (f *stormFleet) start(addr, id string) {
	f.t.Helper()
	c := startHelper(f.t, "storm",
		"STORMGUARD_REDIS_ADDR="+addr, "STORMGUARD_KEY="+f.key, "STORMGUARD_ID="+id,
		"STORMGUARD_FLEET_SIZE=0", // the hardest case: the fleet learns its size from Redis
		"STORMGUARD_LEASE_TTL="+f.ttl.String(),
		"STORMGUARD_TIMEOUT="+hostspeed.Scale(100*time.Millisecond).String())
	if l := c.next(f.t, 20*time.Second); l != "ready" {
		f.t.Fatalf("helper %s said %q", id, l)
	}
	f.children = append(f.children, c)
}

// goAll lets loose the processes started since the last call.
func (f *stormFleet) goAll() {
	for _, c := range f.children[f.started:] {
		fmt.Fprintln(c.stdin, "go")
	}
	f.started = len(f.children)
}

// fill ends the probation of the new budget on srv, if it still runs (the
// processes may have been slower to start than the probation), and waits
// until the processes hold their leases (held = n leases).
func (f *stormFleet) fill(srv *redistest.Server, n int) {
	f.t.Helper()
	st := "stormguard:budget:{" + f.key + "}"
	deadline := time.Now().Add(hostspeed.Scale(5 * time.Second))
	for srv.MustDo("EXISTS", st) != "1" { // a field set on a missing key would make a corrupt state
		if time.Now().After(deadline) {
			f.t.Fatal("the processes did not create the state")
		}
		time.Sleep(time.Millisecond)
	}
	srv.MustDo("EVAL", endProbationScript, "1", st)
	want := fmt.Sprint(n * 28000)
	for srv.MustDo("HGET", st, "held") != want {
		if time.Now().After(deadline) {
			f.t.Fatalf("the processes did not take their leases: %s", srv.MustDo("HGETALL", st))
		}
		time.Sleep(time.Millisecond)
	}
}

// stop stops every process and checks the documented bound on what they
// spent together: capacity + rewards + LeaseSlack, the slack of N processes
// being N × 2 × LeaseSize = N × 56 tokens for aws-2026.
func (f *stormFleet) stop() []tally {
	f.t.Helper()
	for _, c := range f.children {
		c.stdin.Close()
	}
	var total tally
	var all []tally
	for i, c := range f.children {
		var tl tally
		line := c.next(f.t, 30*time.Second)
		if err := json.Unmarshal([]byte(line), &tl); err != nil {
			f.t.Fatalf("helper %d: %v: %q", i, err, line)
		}
		f.t.Logf("process %d: %d retries granted, %d refused, mode %s, %d fallbacks, fleet size %d; log:\n\t%s",
			i, tl.Granted, tl.Refused, tl.Mode, tl.Stats.Fallbacks, tl.Stats.FleetSize, strings.Join(tl.Log, "\n\t"))
		total.add(tl)
		all = append(all, tl)
	}
	n := len(f.children)
	slack := float64(n * 2 * 28)
	bound := 500 + total.Rewards + slack
	f.t.Logf("the fleet: %d retries granted, %.0f tokens net, %.0f rewards; bound 500 + rewards + slack %.0f = %.0f tokens (%d retries)",
		total.Granted, total.net(), total.Rewards, slack, bound, int(bound/14))
	if total.net() > bound {
		f.t.Errorf("the fleet spent %.0f tokens (%d retries), more than capacity + rewards + slack = %.0f (%d retries)",
			total.net(), total.Granted, bound, int(bound/14))
	}
	if total.Granted < 30 {
		f.t.Errorf("only %d retries granted: the budget was not spent", total.Granted)
	}
	return all
}

// TestMultiProcessRestartEmpty: four OS processes spend the budget of one
// Redis; Redis is killed and started again, empty; a fresh process starts
// in the gap and reaches Redis before the four (they are cut off a moment
// longer); then they rejoin. Together the five stay within the documented
// bound: the state is rebuilt from what the processes hold, never refilled
// to the capacity.
func TestMultiProcessRestartEmpty(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	f := newStormFleet(t, "mp-restart")
	for i := range 4 {
		f.start(proxy.Addr(), fmt.Sprint("worker", i))
	}
	f.fill(srv, 4)
	f.goAll()
	time.Sleep(hostspeed.Scale(500 * time.Millisecond)) // the budget is spent
	srv.Kill()
	proxy.Block()
	time.Sleep(hostspeed.Scale(200 * time.Millisecond)) // all fall back
	srv.Restart()
	f.start(srv.Addr(), "fresh")
	f.goAll()
	proxy.Unblock()
	time.Sleep(f.ttl + hostspeed.Scale(400*time.Millisecond)) // past the probation
	tallies := f.stop()
	if l := strings.Join(tallies[4].Log, "\n"); !strings.Contains(l, "created the shared state") {
		t.Errorf("the fresh process did not reach Redis first:\n%s", l)
	}
}

// TestMultiProcessFailover: the same against a replica promoted with
// REPLICAOF NO ONE, behind the address the four processes use. "lost": the
// replica stopped following the primary before the budget was used, so it
// holds nothing; "stale": it stopped after the processes joined, so it
// holds the state as it was then, with most of the pool that the fleet
// spent since on the primary.
func TestMultiProcessFailover(t *testing.T) {
	for _, c := range []string{"lost", "stale"} {
		t.Run(c, func(t *testing.T) {
			primary := redistest.Start(t)
			replica := redistest.StartReplica(t, primary)
			proxy := redistest.StartProxy(t, primary.Addr())
			key := "mp-failover-" + c
			if c == "lost" {
				replica.Promote()
			}
			f := newStormFleet(t, key)
			for i := range 4 {
				f.start(proxy.Addr(), fmt.Sprint("worker", i))
			}
			f.fill(primary, 4)
			if c == "stale" {
				for replica.MustDo("HGET", "stormguard:budget:{"+key+"}", "held") != "112000" {
					time.Sleep(time.Millisecond)
				}
				replica.Promote()
			}
			f.goAll()
			time.Sleep(hostspeed.Scale(500 * time.Millisecond)) // the budget is spent on the primary
			primary.Kill()
			proxy.Block()
			time.Sleep(hostspeed.Scale(200 * time.Millisecond))
			f.start(replica.Addr(), "fresh")
			f.goAll()
			proxy.SetTarget(replica.Addr())
			proxy.Unblock()
			time.Sleep(f.ttl + hostspeed.Scale(400*time.Millisecond)) // past the probation
			tallies := f.stop()
			// The fresh process reached the replica first, the others then
			// told it what they knew.
			want := map[string]string{"lost": "created the shared state", "stale": "written by another Redis server"}[c]
			if l := strings.Join(tallies[4].Log, "\n"); !strings.Contains(l, want) {
				t.Errorf("the fresh process's log does not say %q:\n%s", want, l)
			}
			if c == "stale" {
				var logs string
				for _, tl := range tallies[:4] {
					logs += strings.Join(tl.Log, "\n") + "\n"
				}
				if !strings.Contains(logs, "older than what this process saw") {
					t.Errorf("no process found the replica's state old:\n%s", logs)
				}
			}
		})
	}
}
