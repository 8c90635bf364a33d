package rehearse

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/rehearse/demo"
)

// shopStorm: 200 requests/s to a naive demo shop of 5 workers × 20 ms
// (250/s), the network held for 2 s; naive clients, 250 ms timeout. The
// runbook: shed everything for 4 s, then nothing.
const shopStorm = `
name: shop-storm
duration: 16s
seed: 1
rehearse: {redis: "%[3]s"}
clients:
  - name: users
    target: shop
    arrivals: {kind: poisson, rate: 200}
    timeout: 250ms
    policy: {preset: naive, max_attempts: 3}
    fleet_dials: %[4]s
services:
  - name: shop
    target: %[1]s
    %[2]s
triggers:
  - {kind: outage, target: shop, at: 3s, duration: 2s, mode: hold}
runs:
  - name: runbook
    set:
      actions:
        - {at: 7s, kind: shed, target: shop, value: 1}
        - {at: 7s, kind: retries-off, target: users}
        - {at: 11s, kind: shed, target: shop, value: 0}
`

// The off switch works, through the fleet's dials on Redis: a naive storm
// on the demo shop (it stays down without the runbook: the example's test
// shows it) ends when the runbook sheds everything at the shop and turns
// the clients' retries off — both through fleet dials that the shop's and
// the clients' processes follow — and the shop serves again once shedding
// stops; the dials are set back after the run.
func TestKillSwitchFleetDials(t *testing.T) {
	if testing.Short() {
		t.Skip("a rehearsal of real time against real servers: not in -short")
	}
	srv := redistest.Start(t)
	shop := startShopProc(t, demo.Config{Workers: 5, Token: strings.Repeat("t", 16), Redis: srv.Addr(), FleetDials: "rehearse-shop"})
	text := fmt.Sprintf(shopStorm, shop.URL, `fleet_dials: rehearse-shop
    metrics: {scrape: "`+shop.Metrics+`"}`, srv.Addr(), "rehearse-users")
	p := rehearseFile(t, text, t.TempDir(), Limits{})[0]
	r := rehearseConclusive(t, p, nil)
	t.Log(summary(r))
	for _, s := range r.Steps {
		t.Logf("step %s at %.1f s: done at %.2f s (%.0f ms) %s %s", s.Label, s.At, s.DoneS, 1000*s.TookS, s.Via, s.Err)
		if s.Err != "" || s.TookS > 1 {
			t.Errorf("step %s: took %.2f s, error %q", s.Label, s.TookS, s.Err)
		}
	}
	if v := r.Result.Verdict; v != "recovered" {
		t.Errorf("verdict %s, want recovered once the runbook acted: %s", v, r.Result.Why)
	}
	if a := after(r.Result, 12); a < 0.9 {
		t.Errorf("goodput from 12 s on %.0f%% of demand, want ≥ 90%%", 100*a)
	}
	if g := r.Result.Clients[0].Total.GaveUp; g.Disabled == 0 {
		t.Errorf("no request gave up for retries turned off (%+v): the clients did not follow the fleet's dials", g)
	}
	if !r.Services[0].Measured || r.Result.Services[0].Total.Shed == 0 {
		t.Errorf("the shop's metrics show no shedding: %+v, %+v", r.Services[0], r.Result.Services[0].Total)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	for _, name := range []string{"rehearse-shop", "rehearse-users"} {
		st, err := fleet.GetDials(context.Background(), rdb, name)
		if err != nil {
			t.Fatal(err)
		}
		if st.RetriesOff || st.ShedFraction != 0 {
			t.Errorf("the fleet's dials %s were not set back: %+v", name, st)
		}
	}
	_ = time.Second
}
