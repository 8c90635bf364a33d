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
//	conn, _ := fleet.ConnectionFromEnv(os.Getenv) // STORMGUARD_REDIS_*: address(es), deployment, user, password (file), TLS
//	rdb, _ := conn.Client()
//	policy, _ := retry.Preset("aws-2026")
//	b, err := fleet.New(ctx, rdb, fleet.Config{Key: "payments-api", Spec: policy.Budget, FleetSize: 40})
//	…
//	defer b.Close()
//	r := retry.MustNew(policy, retry.WithBudget(b))
//
// # The protocol
//
// The allocation follows Doorman (YouTube's distributed rate limiter):
// processes say what they want, the server grants by a rule and tells each
// when to come back, and a grant is a lease the process gives back when it
// has not used it in time. What is shared is not a rate but the tokens of
// one bucket, which the fleet's first-try successes refill. The rule is one
// deterministic core, package [alloc]: [alloc.Step] is the server's side
// (state and message in, answer and state out, the time an argument), which
// the Lua script runs in Redis and the simulator runs for fleets of any
// size; TestScriptMatchesCore feeds both the same random message sequences
// and compares every answer and state. [alloc.Client] is a process's side.
//
// A process that is not retrying holds nothing and asks for nothing. When a
// retry finds too little at hand, RetryAt sends the process's message and
// waits for the answer (at most MaxWait, 20 ms by default): one round trip
// per retry for a process that retries now and then. A process that asked
// for two retries' worth or more within the last 200 ms is busy: it also
// asks for what it expects to spend next (at most Config.LeaseSize), asks
// again when half of that is left, and keeps the refunds of its retries
// that succeed; once it has asked for no retry for LeaseTTL (2 s), what it
// holds goes back.
// Its earnings (the rewards of first-try successes; for a window, its
// requests) and what it gives back travel with its messages: with those it
// sends anyway; on their own when the pool was below half at its last
// answer and they are worth a retry, or, while processes wait for the pool,
// every Live/RoundTrips seconds (live processes over Config.RoundTrips:
// about RoundTrips round trips a second for the whole fleet); and at least
// every Heartbeat (10 s).
//
// Redis (the step script, atomic, on Redis's clock) counts the message's
// earnings and what it gives back into the pool, up to the capacity, and
// grants min(want, pool) if the pool holds the price of the retry that
// waits, else nothing: first come, first served, as one shared bucket
// serves its callers. A grant leaves the pool at once: Redis tracks nothing
// a process holds, so a process that dies or is cut off takes its grant
// with it and the fleet never spends it twice. A process whose need went
// unmet, or was met with the pool's last tokens, counts as waiting (for at
// least a second) and is told to ask again no sooner than
// ⌈waiting × 1 s / RoundTrips⌉ (10 ms to 5 s): together the processes that
// wait make about RoundTrips round trips a second, however many they are;
// until then a retry it cannot pay for is refused at once.
//
// One shared bucket loses the rewards that arrive while it is full, and a
// fleet must not pour into a pool that a storm drained the earnings its
// processes gathered, unsent, while it was full. So while no process waits,
// a message's earnings count up to the room the process saw at its last
// answer (what the pool lacked, less what the process took then), and what
// it gives back counts whole; while processes wait, what was gathered since
// they began counts whole (taken to have accrued evenly since the process's
// last message, up to when it last grew), and of what came before, the
// earnings count up to that room and what was given back is lost. Losing
// earnings only makes the fleet stricter.
//
// Every message has a sequence number: Redis applies each once and keeps
// its answer, and a process sends a message again, unchanged, until it gets
// the answer. Redis forgets a process not heard from for three heartbeats
// (at most 100 per message), and keeps at most 100,000 of them (the longest
// silent forgotten first); a process drops a message it could not deliver
// for 1.5 heartbeats, and its earnings with it, so that Redis cannot apply a
// message twice after forgetting its sender.
//
// # The fleet's size
//
// Redis counts the live processes (heard from within three heartbeats) and
// tells each in every answer. The count sets how often earnings are sent
// while processes wait for the pool (every Live/RoundTrips seconds each),
// and a process's share when it falls back (capacity/FleetSize, at least
// the dearest retry; FleetSize the larger of Config.FleetSize and the last
// count); the processes that wait, not all the live ones, set when each may
// ask again (⌈waiting × 1 s / RoundTrips⌉). The lease is sized from the
// process's own recent demand alone (what it asked over the last 200 ms, at
// most LeaseSize, nothing below two dearest retries), not divided by the
// fleet's size, for three reasons:
//
//   - the bound does not need it: every token a process holds left the
//     pool when granted and was put there by an earning, so leases add
//     nothing to the bound (R, at any size), and an idle process holds
//     nothing (its lease goes back after LeaseTTL). The slack of N × lease
//     came from leases created for every process whatever its demand,
//     which this protocol does not do;
//   - capacity/N is below the least lease (two dearest retries) for all but
//     the smallest fleets, and below one retry soon after: with stormguard
//     (capacity 100, a retry 10) below two retries from N = 6 and below one
//     from N = 11, 0.1 token at N = 1,000; with aws-2026 (capacity 500,
//     dearest retry 14) from N = 18 and N = 36, 0.5 token at N = 1,000. A
//     lease of
//     max(dearest retry, min(LeaseSize, capacity/N)) would be one retry at
//     those sizes: no process would lease, and every retry a busy process
//     makes would cost a round trip and wait for it (up to MaxWait). In the
//     storm at N = 1,000 the stormguard fleet was granted 1,960 retries a
//     second in 1,242 round trips a second in all (BENCHMARKS.md): one round
//     trip per retry would take 1,960 a second for the grants alone, plus
//     about RoundTrips (1,000) a second from the processes told to wait,
//     against the 3,000 the design allows. Flooring it at two retries would
//     change nothing for stormguard (its default is 20 tokens, two retries)
//     and, for aws-2026, shrink the lease from 50 tokens to 28 from N = 18
//     without tightening the bound, which is R at any size;
//   - what shares the pool among the busy processes is the pool: grants
//     are min(want, pool), and once it runs short the processes that need
//     it wait and ask in turn, about RoundTrips round trips a second
//     together, as the callers of one shared bucket take its tokens in
//     turn.
//
// # What it costs Redis
//
// A process that makes only first-try successes costs one round trip per
// heartbeat (0.1 a second); one that retries now and then, one more per
// retry; one that retries often, one per LeaseSize of retries. Measured
// with 1,000 processes at 20 requests a second on one redis-server
// (bench/fleetload; BENCHMARKS.md, 2026-12-07): 1 % of attempts failing,
// 0.24 round trips per process per second, 0.06-0.07 of a core; half of
// them failing, 1,063-1,242 round trips a second in all (the stormguard and
// aws-2026 presets), 0.22 of a core. A round trip runs one script of 28 to
// 33 commands inside Redis.
//
// # The bound
//
// Let R be the rewards the fleet earns (first-try successes ×
// SuccessReward, all processes, in fleet mode or not). From the moment a
// budget's state is created, the tokens the whole fleet spends on retries,
// net of refunds, are at most
//
//	R (≤ C + R, C the capacity)
//
// whatever the fleet's size: every token a pool grants was put in it by an
// earning or a refund, counted once, and a process that cannot reach Redis
// spends only what it holds and what it earns itself. It holds through Redis
// killed and restarted empty (a state Redis creates, or that a process of
// an earlier one finds, starts with an empty pool), a failover to a replica
// that lagged and a restart that loaded an old copy (a state last written by
// another server, by Redis's run_id, has its pool emptied), a state older
// than what a process saw (its pool emptied when that process reports), a
// corrupt state (reported and started again empty), part of the fleet cut
// off, processes that never reached Redis, and FleetSize unset. The fleet
// spends more only if a copy of the state older than what the processes
// saw is loaded into the same server (same run_id: DEBUG RELOAD of an old
// file) and grants before a process reports: at most its pool, C, each
// time. TestSpendNeverExceedsRewards, TestRedisRestartedEmpty,
// TestFailoverToLaggingReplica, TestPartitionHalfTheFleet,
// TestNeverReachedRedis, TestCluster, TestSentinel and
// TestMultiProcessOutages check it against real redis-servers.
//
// For a window the rule is the window's (retries ≤ ratio × requests + floor
// × window, the requests counted when they reach Redis), with two slacks:
// a retry granted in a window may start up to LeaseTTL later, in the next;
// and a process that falls back allows itself the window's floor divided by
// Config.FleetSize (no floor without FleetSize).
//
// The cost of the bound: a budget new to Redis, or whose state Redis lost,
// starts empty and grants only what the fleet earns from then on (with
// aws-2026 and a reward of 1, 500 first-try successes fill it).
//
// # When Redis cannot be reached
//
// Round trips run on one background goroutine per Budget, each bounded by
// Config.Timeout; a request never waits on Redis but for MaxWait when it
// needs a grant. After two failed round trips in a row (one, if a retry
// waits) the process falls back: it keeps what it holds and spends it, and
// its own earnings (its refunds too), up to capacity/FleetSize (at least the
// dearest retry); FleetSize is the larger of Config.FleetSize and the
// processes Redis last counted. A window falls back to a local window of
// the same ratio. It says so in [Budget.Mode], [Budget.Stats] and a Warn
// record that tells what failed: Redis unreachable, authentication
// ([ErrAuth]), the user's permissions ([ErrNoPermission]), another spec,
// an error reply. It tries Redis again every RejoinInterval (250 ms),
// sends the message that was pending, unchanged, and goes on; what it holds
// stays its own. With a client from [Connection.Client] or [ClientOptions]
// every attempt dials, so a process rejoins within RejoinInterval and a
// round trip of Redis answering again; a cluster client reloads its map of
// slots after a failed round trip, since the master that held the slot may
// have died and a replica taken its place.
//
// A process of another spec is refused ([ErrSpecMismatch]) while a process
// of the old one is live (heard from within three heartbeats), and replaces
// the state once none is. The state outlives the last process by StateTTL.
//
// # Redis as users run it
//
// [Connection] reaches one server, a Redis Cluster (Deployment Cluster,
// some of its nodes as Addrs: a budget's keys share one hash slot,
// {KEY}), or a master watched by Sentinel (Deployment Sentinel, the
// sentinels as Addrs, MasterName), as an ACL user, over TLS (Redis's
// tls-port; [TLSConfig] reads a CA and a client certificate from PEM
// files), the password from the environment or a file
// ([ConnectionFromEnv], [ReadPasswordFile]), never from a command line.
// TestCluster and TestSentinel kill the master holding a budget while the
// fleet retries: the cluster's replica took over 2.1 s later and every
// process rejoined 0.2 s after that; Sentinel promoted the replica 1.8 s
// later and the processes rejoined within 20 ms of it. An ACL user needs
// the keys and channels stormguard:*, the commands the scripts call and
// those the clients send:
//
//	ACL SETUSER fleet on >PASSWORD resetkeys ~stormguard:* resetchannels &stormguard:* -@all
//	  +evalsha +eval +ping +hello +hmget +subscribe +unsubscribe
//	  +time +info +type +hget +hset +hdel +hkeys +hincrby +hexists
//	  +zadd +zrem +zcard +zrangebyscore +zremrangebyscore +zpopmin +del +pexpire +publish
//
// Redis 5 or later is needed (ZPOPMIN; scripts that read TIME and INFO and
// then write), 6 for ACL users. Keys: stormguard:budget:{KEY} (a hash), …:members and
// …:waiting (sorted sets), stormguard:dials:{NAME} (a hash and a pub/sub
// channel).
//
// # Kill switch
//
// [SetDials] sets the fleet's dials (retries off, shed a fraction, a
// concurrency limit override) in the hash stormguard:dials:{NAME} and
// announces them on the pub/sub channel of the same name. In every process
// a [Watcher] (see [Watch]) applies whatever Redis holds whenever it differs
// from the last fleet state it applied, older versions included: after a
// failover to a replica that lagged, or a restored backup, the operator's
// last write wins. It reads the dials every PollInterval (500 ms by
// default, jittered) and as soon as a change is announced; an announcement
// is only a cue to read (at most every 20 ms), never applied, so a forged
// or stale PUBLISH changes nothing Redis does not hold. Dials Redis lost (a
// restart without persistence) leave the local dials as they are. Measured
// with 1,000 watchers over four OS processes (bench/fleetload -dials): a
// change reached all of them within 62-133 ms through pub/sub (five
// changes), within 500 ms by
// polling alone; watching costs Redis two HMGET a second per watcher (0.1 of
// a core for 1,000) and one more per watcher for each change. The command
// line does the same:
//
//	stormguard fleet set --retries-off       # every process stops retrying
//	stormguard fleet set --shed 0.25         # and sheds a quarter of its traffic
//	stormguard fleet show                    # the dials and the budget's level
//
// docs/fleet.md states all of this at more length, with the measurements.
package fleet
