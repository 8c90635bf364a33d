package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
)

// stormFleet is a set of OS processes retrying on one budget against a
// dependency that mostly fails.
type stormFleet struct {
	t        *testing.T
	key      string
	children []*child
	started  int
}

// start starts one process on addr and waits until it joined (or fell
// back); goAll lets it loose.
func (f *stormFleet) start(addr, id string) {
	f.t.Helper()
	c := startHelper(f.t, "storm",
		"STORMGUARD_REDIS_ADDR="+addr, "STORMGUARD_KEY="+f.key, "STORMGUARD_ID="+id,
		"STORMGUARD_FLEET_SIZE=0", // the fleet's size unknown
		"STORMGUARD_FIRST_OK=0.2",
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

// stop stops every process and checks the bound: what they spent on
// retries, net of refunds, is at most what they earned (the pool starts
// empty and only earnings fill it).
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
		f.t.Logf("process %d: %d retries granted, %d refused, %.0f earned, mode %s, %d fallbacks; log:\n\t%s",
			i, tl.Granted, tl.Refused, tl.Rewards, tl.Mode, tl.Stats.Fallbacks, strings.Join(tl.Log, "\n\t"))
		total.add(tl)
		all = append(all, tl)
	}
	f.t.Logf("the fleet: %d retries granted, %.0f tokens net, %.0f earned", total.Granted, total.net(), total.Rewards)
	if total.net() > total.Rewards {
		f.t.Errorf("the fleet spent %.0f tokens net on retries, more than the %.0f it earned", total.net(), total.Rewards)
	}
	if total.Granted < 20 {
		f.t.Errorf("only %d retries granted: the earnings were not spent", total.Granted)
	}
	return all
}

// TestMultiProcessOutages: four OS processes share a budget through a
// proxy while Redis is killed and started again empty (a fresh process
// reaches it first), then half of them are cut off by the proxy and come
// back. Together the five never spend more than they earned.
func TestMultiProcessOutages(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	direct := srv.Addr()
	proxy := redistest.StartProxy(t, direct)
	f := &stormFleet{t: t, key: "mp"}
	for i := range 4 {
		addr := direct
		if i%2 == 1 {
			addr = proxy.Addr()
		}
		f.start(addr, fmt.Sprint("worker", i))
	}
	f.goAll()
	time.Sleep(hostspeed.Scale(400 * time.Millisecond))
	srv.Kill()
	time.Sleep(hostspeed.Scale(200 * time.Millisecond)) // all fall back
	srv.Restart()
	f.start(direct, "fresh")
	f.goAll()
	time.Sleep(hostspeed.Scale(400 * time.Millisecond))
	proxy.Block() // a partition: workers 1 and 3
	time.Sleep(hostspeed.Scale(400 * time.Millisecond))
	proxy.Unblock()
	time.Sleep(hostspeed.Scale(400 * time.Millisecond))
	tallies := f.stop()
	var logs string
	for _, tl := range tallies {
		logs += strings.Join(tl.Log, "\n") + "\n"
	}
	if !strings.Contains(logs, "Redis lost the shared state") && !strings.Contains(logs, "created the shared state") {
		t.Errorf("no process found the state lost after the restart:\n%s", logs)
	}
	for _, i := range []int{1, 3} {
		if tallies[i].Stats.Fallbacks < 2 {
			t.Errorf("worker %d, behind the proxy, fell back %d times; want the restart and the partition", i, tallies[i].Stats.Fallbacks)
		}
	}
}
