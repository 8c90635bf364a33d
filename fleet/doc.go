// Package fleet shares a retry budget and a kill switch across every
// process of a fleet through one Redis: the gap that per-process budgets
// leave when a few hundred instances hammer the same dependency.
//
// # Budget
//
// [New] returns a [*Budget], a [budget.Budget] that every process naming the
// same Config.Key shares, with the rules of the local budgets applied to the
// whole fleet: a cost-based token bucket with refunds ([budget.TokenBucket])
// or a ratio of retries to requests over a sliding window
// ([budget.Window]). Use it like any budget:
//
//	rdb := redis.NewClient(fleet.ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), os.Getenv("STORMGUARD_REDIS_PASSWORD"), 0))
//	policy, _ := retry.Preset("aws-2026")
//	b, err := fleet.New(ctx, rdb, fleet.Config{Key: "payments-api", Spec: policy.Budget, FleetSize: 40})
//	…
//	defer b.Close()
//	r := retry.MustNew(policy, retry.WithBudget(b))
//
// # The lease protocol
//
// Redis holds the shared state in a hash, stormguard:budget:{KEY}, with two
// sorted sets beside it (…:members, the live processes scored by the expiry
// of their lease, and …:reclaimed). Every change is one Lua script that runs
// atomically and reads the time from Redis (TIME), so the clocks of the
// processes play no part.
//
// Token bucket. The bucket's tokens are split between a pool and the leases
// of the processes; pool + leases never exceed the capacity. A process
// keeps a lease of about LeaseSize tokens and pays a retry from it with one
// compare-and-swap: no round trip. A refund (a retry that succeeded, or one
// abandoned) goes straight back into the lease; the rewards of first-try
// successes are counted locally and sent to the pool in batches (every
// FlushEvery successes or FlushInterval), where the capacity caps them.
// When the lease falls below half of LeaseSize, the background goroutine
// asks for more, ahead of exhaustion; if it runs dry all the same while the
// pool still has tokens, RetryAt waits for the refill, at most MaxWait.
// Each round trip carries the lease as it stands, so Redis always knows
// what each process holds, and a live process renews its lease every
// LeaseTTL/3.
//
// Window. Redis keeps the requests and retries of the window in ten slots
// keyed by the Redis clock. A lease is a number of retries, counted in the
// window when it is granted (so the window already includes them); each
// round trip moves the unused ones to the current slot. Requests are
// counted locally and sent in batches. A grant never makes
//
//	retries in the window > ratio × requests in the window + floor × window
//
// and when the allowance shrinks (requests leave the window) unused retries
// are taken back.
//
// Nothing is lost or counted twice: every message carries a sequence
// number, Redis applies each once and keeps its answer, and a process sends
// a message again, unchanged, until it gets the answer. A lease whose
// process stops renewing it (a crash) goes back to the pool after LeaseTTL.
//
// At steady state a process makes one round trip per FlushEvery successes
// or requests, per refill and per LeaseTTL/3: with the defaults, well under
// one per 100 budget operations once a process makes a few hundred a second
// (BenchmarkFleetSteady measures it). The success path of a retry,
// RetryAt then EndAt with the lease held, costs about 1.3 times what the
// local token bucket does (BenchmarkFleetBudget).
//
// # When Redis cannot be reached
//
// Round trips run on one background goroutine per Budget, each bounded by
// Config.Timeout; a request never waits on Redis except for MaxWait when
// its lease ran dry. After two failed round trips in a row (one, if the
// lease is low) the process falls back to a local budget sized to its
// share of the fleet, 1/N with N the larger of Config.FleetSize and the
// live processes seen in Redis: a token bucket of capacity/N that starts
// with the lease at hand plus its share of the pool as last seen (at most
// one more lease), or a window with the same ratio and floor/N. It says so
// in [Budget.Mode] and [Budget.Stats] and in a Warn record on its logger,
// tries Redis again every RejoinInterval and rejoins when it answers (an
// Info record). On rejoining it settles: what it spent beyond its own lease
// is charged to the fleet (its lease may go negative, a debt paid back from
// the pool), what it earned is credited, and if Redis lost the state
// meanwhile (a restart without persistence) the state is built again from
// what the rejoining processes hold, not refilled to the capacity.
//
// # Lease slack
//
// The fleet honours the budget up to [Budget.LeaseSlack] =
// N × 2 × LeaseSize tokens (or retries), N the fleet size. Per process:
//
//   - one lease, when a process dies or is cut off after spending part of
//     its lease since its last round trip: Redis hands the whole lease back
//     after LeaseTTL (a cut-off process settles this when it rejoins; a
//     dead one never does). A window's lease also counts its retries in the
//     window when granted, so they may leave the window up to one round
//     trip early;
//   - one lease more, borrowed from its share of the pool when it falls
//     back, since the pool it saw last may have been spent by others
//     meanwhile.
//
// Refunds of retries still in flight when the level is at the capacity
// can also overshoot, by their cost, until the next round trip.
//
// That bound holds while Redis answers every process, or none (then the
// shares add up to the budget). A process cut off alone decides on its
// share while the others go on sharing the whole budget: until it rejoins
// it may spend up to its share (capacity/N, or floor/N plus its ratio for a
// window) beyond the slack. What it spent is charged to the fleet when it
// rejoins, so over time the budget holds. With the
// aws-2026 preset (lease 28 tokens) and three processes the slack is 168
// tokens; in the tests (three processes in a storm; Redis killed and
// restarted in the middle of one) the fleet stayed within the budget.
// Delays otherwise always err on the safe side: rewards and requests reach
// Redis late, so the fleet is stricter than one local budget, not looser.
//
// # Kill switch
//
// [SetDials] sets the fleet's dials (retries off, shed a fraction, a
// concurrency limit override) in the hash stormguard:dials:{NAME} and
// announces them on the pub/sub channel of the same name. In every process
// a [Watcher] (see [Watch]) applies them to a local *killswitch.Dials, at
// once on the announcement and at the latest at its next read (every
// PollInterval, 500 ms by default), so a change reaches every process within
// a second even when pub/sub is down. The command line does the same:
//
//	stormguard fleet set --retries-off       # every process stops retrying
//	stormguard fleet set --shed 0.25         # and sheds a quarter of its traffic
//	stormguard fleet show                    # the dials and the budget's level
//
// # Running a fleet against one Redis
//
// Every process gets the Redis address and password from its environment
// (STORMGUARD_REDIS_ADDR, STORMGUARD_REDIS_PASSWORD; never from a file in
// the repository), builds one client with [ClientOptions], and one Budget
// per dependency whose retries the fleet shares (same Key, same Spec, and
// FleetSize the number of instances expected) and one Watcher for the kill
// switch. Redis 5 or later is needed (scripts that read TIME); a Redis
// Cluster works, since each budget's keys share one hash slot. Redis may
// restart without persistence: the budget is rebuilt from the processes,
// and the dials keep their last value in every process until set again.
package fleet
