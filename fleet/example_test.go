package fleet_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
)

// A retrier whose budget the whole fleet shares, and whose kill switch the
// whole fleet obeys; the connection (one server, a cluster or Sentinel, an
// ACL user, TLS, the password from a file) from the STORMGUARD_REDIS_*
// environment. (Not run: it needs a Redis.)
func Example() {
	ctx := context.Background()
	conn, err := fleet.ConnectionFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	rdb, err := conn.Client()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	// The policy's budget, shared by the fleet instead of one per process.
	policy, _ := retry.Preset("aws-2026")
	b, err := fleet.New(ctx, rdb, fleet.Config{Key: "payments-api", Spec: policy.Budget, FleetSize: 40})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	dials := new(killswitch.Dials)
	w, err := fleet.Watch(rdb, "default", dials, fleet.WatchConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	r := retry.MustNew(policy, retry.WithBudget(b), retry.WithDials(dials))
	_ = r // r.Do(ctx, …) in the request path
}

// Metrics: the mode of the budget as a gauge, and its counters.
func ExampleBudget_Stats() {
	var b *fleet.Budget // from fleet.New
	if b == nil {
		return
	}
	s := b.Stats()
	fallback := 0
	if s.Mode.Fallback() {
		fallback = 1
	}
	fmt.Printf("stormguard_fleet_fallback %d\n", fallback)
	fmt.Printf("stormguard_fleet_round_trips_total %d\n", s.RoundTrips)
	fmt.Printf("stormguard_fleet_held_tokens %g\n", s.Hold)
	fmt.Printf("stormguard_fleet_refused_total{why=\"pool empty\"} %d\n", s.RefusedBackoff+s.RefusedShort)
}

// Turn retries off across the fleet during an incident, as
// `stormguard fleet set --retries-off` does. (Not run: it needs a Redis.)
func ExampleSetDials() {
	ctx := context.Background()
	conn, err := fleet.ConnectionFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	rdb, err := conn.Client()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	off := true
	s, err := fleet.SetDials(ctx, rdb, "default", fleet.DialsChange{RetriesOff: &off})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retries off in every process; version", s.Version)
}

// The level of a shared budget, as `stormguard fleet show` prints it.
// (Not run: it needs a Redis.)
func ExamplePeek() {
	ctx := context.Background()
	conn, err := fleet.ConnectionFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	rdb, err := conn.Client()
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	lv, err := fleet.Peek(ctx, rdb, "payments-api")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%g of %g tokens in the pool, %d processes, %d waiting\n", lv.Pool, lv.Capacity, lv.Processes, lv.Waiting)
}
