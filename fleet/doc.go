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
// share of the fleet, 1/N with N = [Budget.FleetSize]: the larger of
// Config.FleetSize and the most live processes Redis saw over the last ten
// lease TTLs (as of the last round trip; a process keeps the count it knew
// when Redis lost the state, and tells it to the state built again). The
// local budget is a token bucket of capacity/N that starts with the lease
// at hand plus its share of the pool as last seen (at most one more lease),
// or a window with the same ratio and floor/N. A process that never reached
// Redis starts with a full share when Config.FleetSize is set, and with one
// lease when it is not (it cannot know how many start with it). It says so
// in [Budget.Mode] and [Budget.Stats] and in a Warn record on its logger
// that tells what failed: Redis unreachable, Redis requiring
// authentication ([ErrAuth]), another spec, or an error reply. It tries
// Redis again every RejoinInterval and rejoins within RejoinInterval and a
// round trip of Redis answering again (an Info record; with a client from
// [ClientOptions], which dials at every attempt). On rejoining it settles:
// what it spent beyond its own lease is charged to the fleet (its lease may
// go negative, a debt paid back from the pool) and what it earned is
// credited.
//
// # A state built again
//
// Redis may lose the state (a restart without persistence, FLUSHALL, the
// key deleted or expired), serve an old copy of it (a replica promoted
// while it lagged, a restart that loaded an old RDB or AOF file) or hold a
// corrupt one. None of these refills the pool:
//
//   - A state Redis creates starts with an empty pool. It fills to the
//     capacity after a probation of one LeaseTTL, unless a process that
//     knew an earlier state reports meanwhile: then the state was lost, not
//     new, and it is built from what the processes hold (their leases and
//     debts) and the rewards that arrive, never from the capacity. Every
//     live process reports within the probation: one in the fleet renews
//     its lease every LeaseTTL/3, one that fell back tries Redis every
//     RejoinInterval ≤ LeaseTTL/3. So a process that never saw the old
//     state and reaches Redis first gets nothing, and a new budget starts
//     empty for its first LeaseTTL (a window starts empty anyway, as a
//     local one does, and has no probation).
//   - A state last written by another Redis server (Redis's run_id: a
//     failover, or a restart that loaded a copy) grants nothing for one
//     LeaseTTL, counted from when a process first finds it there, while
//     the processes report: a probation the copy carries is extended to
//     that, never kept (it may have ended on the old server already, and
//     the copy would grant its old pool at once). Each message carries the
//     version of the state its process last saw (the messages applied in
//     its generation); a process that saw a later version, or a later
//     generation, than Redis holds has the state rebuilt from the leases of
//     the processes, as above.
//   - A corrupt state (a field that is not a number, a key of another type)
//     is reported as corrupt in a Warn record and rebuilt the same way; the
//     process stays in the fleet.
//
// A process of another spec is refused ([ErrSpecMismatch]) while a live
// process holds a lease of the old one, and replaces the state once none
// does: at once after the last one closed, one LeaseTTL after it crashed.
// The state itself (the pool's level) outlives the last process by
// StateTTL, so a fleet restarted whole does not start afresh.
//
// # What the budget guarantees
//
// Let C be the capacity, R the rewards the fleet earned (first-try
// successes × SuccessReward, in fleet mode or in fallback), N =
// [Budget.FleetSize] and L the LeaseSize. From the moment a budget is
// created new, the tokens the whole fleet spends on retries, net of
// refunds, are at most
//
//	C + R + N × 2 × L
//
// (N × 2 × L is [Budget.LeaseSlack]; with every retry failing, the retries
// granted are at most that over the retry cost) through Redis restarts with
// or without persistence, flushes, failovers to a replica that lost or
// lags behind the state, corrupt states, fresh processes joining at any
// moment and processes falling back and rejoining. The slack is two leases
// per process:
//
//   - one lease, when a process dies or is cut off after spending part of
//     its lease since its last round trip: Redis hands the whole lease back
//     after LeaseTTL (a cut-off process settles this when it rejoins; a
//     dead one never does). A window's lease also counts its retries in the
//     window when granted, so they may leave the window up to one round
//     trip early;
//   - one lease more, borrowed from its share of the pool when it falls
//     back (or, without FleetSize, the lease it starts with when it never
//     reached Redis), since the pool it saw last may have been spent by
//     others meanwhile.
//
// With the aws-2026 preset (capacity 500, lease 28 tokens, a retry 14) and
// five processes the slack is 280 tokens: at most 55 retries when every
// request fails. TestMultiProcessRestartEmpty and TestMultiProcessFailover
// check it with five OS processes across a Redis restarted empty and a
// replica promoted with REPLICAOF NO ONE holding no state or an old one,
// a fresh process reaching Redis first each time (about 35 retries in all;
// 71 before the probation existed).
//
// What can exceed it:
//
//   - A process that starts while Redis cannot be reached, with FleetSize
//     set, spends its full share (capacity/FleetSize) before it ever joins;
//     it is charged to the fleet when it joins, so over time the budget
//     holds.
//   - If every process that knew a state is dead, or cut off from Redis for
//     longer than the probation, while a process that never knew it reaches
//     Redis, the budget is new to Redis: it fills to the capacity after the
//     probation, and the count starts again from C (the cut-off processes
//     stay within their two leases and their own rewards meanwhile).
//   - Grants that a primary acknowledged and the replica promoted in its
//     place never received, to processes that stop before they report
//     again: like a dead process's lease, but as many as the replication lag
//     held (a process that lives to report them has the state rebuilt).
//   - Refunds of retries still in flight when the level is at the capacity,
//     by their cost, until the next round trip.
//   - A window built again counts requests and retries from then on: in the
//     window that follows, it may allow up to one floor more.
//
// Processes sharing a key should share LeaseTTL: the probation is the
// LeaseTTL of the process that starts it. Delays otherwise always err on the
// safe side: rewards and requests reach Redis late, a state built again
// forgets the pool and the rewards it held, so the fleet is stricter than
// one local budget, not looser.
//
// # Kill switch
//
// [SetDials] sets the fleet's dials (retries off, shed a fraction, a
// concurrency limit override) in the hash stormguard:dials:{NAME} and
// announces them on the pub/sub channel of the same name. In every process
// a [Watcher] (see [Watch]) applies them to a local *killswitch.Dials, at
// once on the announcement and at the latest at its next read (every
// PollInterval, 500 ms by default), so a change reaches every process within
// a second even when pub/sub is down. Each change has a version within an
// epoch (the Redis time the dials were first set; a new one when Redis lost
// them and they are set again): a Watcher applies a change only if it moves
// forward, so a late or replayed announcement changes nothing. The command
// line does the same:
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
// switch. Redis 5 or later is needed (scripts that read TIME and INFO); a
// Redis Cluster works, since each budget's keys share one hash slot (moving
// the slot to another node counts as a state from another server: one
// LeaseTTL without grants). Redis may restart with or without persistence,
// fail over to a replica, or be flushed: the budget is rebuilt from the
// processes as described above, and the dials keep their last value in
// every process until set again.
package fleet
