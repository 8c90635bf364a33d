// Package admit is the admission gate of stormguard's servers, free of any
// transport: it bounds a request's deadline, drops work whose deadline has
// passed before starting it, runs at most a concurrency limit of requests at
// once, queues the excess (first tries before retries), and decides what a
// request it refuses must be told. httpx.Server and grpcx.Server are thin
// shells over one [Gate]: they read a request's signals from headers or
// metadata into a [Request], and map a [Decision] to a status code and
// headers, or a gRPC code and trailers.
//
// Every decision of the gate, and their order, is a deterministic [Core]
// (time and the kill switch's random draw as arguments), built on the
// deterministic cores ([limit.Limiter], [shed.Queue], [supersede.Table],
// [killswitch.Dials]): its steps take an event (an arrival, a release, a
// caller that leaves, the queue's timer) and return the actions that carry
// it out, as raft's Step and Ready do. The Gate is a shell that only
// executes them, with what production needs around it: a mutex, a channel
// per waiting request, one timer for the whole queue, contexts and the
// wall clock. The simulator executes the same actions in virtual time, for
// every simulated service (one that references a policy file's server
// block gets that block; the others the scenario's own admission, as an
// admit.Config). The package imports neither net/http nor gRPC.
//
// # A request's way through
//
// [Gate.Admit] takes a request through these steps, in order; the first that
// refuses it decides its [Answer]:
//
//  1. The kill switch: with probability Dials.ShedFraction it is refused
//     with [ServiceOverloaded] ([ShedKillSwitch]).
//  2. Its deadline becomes the earliest of arrival + MaxTimeout,
//     arrival + the caller's timeout from the wire, if any, and the deadline
//     of its context. If that leaves MinRemaining or less: [Expired].
//  3. [Request].Throttle, if set and true: [Throttled] ([ShedThrottled]).
//  4. With Config.Supersede set and an idempotency key ([Request].Key), the
//     request goes through supersession first (see below), which may answer
//     it without running it.
//  5. If nobody is queued and fewer than the limit are running, it is
//     admitted at once. Otherwise, with Config.RejectAtLimit, it is refused
//     at once ([InstanceOverloaded], [ShedQueueFull]); else it waits in
//     the queue, ranked by its
//     attempt number and criticality (the caller's claim, lowered to
//     Config.MaxCriticality, critical by default, unless the shell vouches
//     for the caller). The queue may refuse it or later give it up (full,
//     evicted by a request it would serve first, timed out by adaptive
//     LIFO): [InstanceOverloaded], or [ServiceOverloaded] if
//     Config.ServiceSaturated says the whole service is out of capacity. Its
//     deadline may pass while it waits: [Expired]. Its context may end:
//     [Expired] if by its deadline, else [Canceled] (the caller left, and
//     nobody is there to answer).
//  6. Admitted: Config.OnQueueWait is told how long it waited, and the
//     caller gets a [Ticket] that carries the deadline, the attempt number
//     and the criticality ([Ticket.Bind] puts them in a context), and that
//     it must release when the work ends.
//
// # Request supersession
//
// A person who taps "transfer" again, or a client that resends after
// giving up, sends a request that repeats one the server already holds.
// With Config.Supersede set, requests that carry the same idempotency key
// in the same scope ([Request].Key and KeyScope: the shells read the
// Idempotency-Key header or the idempotency-key metadata, and scope it by
// method and path, or gRPC method, and by caller when they can tell) are
// collapsed by the [supersede] package's table, the core the simulator
// drives too, which the gate keeps under its mutex:
//
//	a twin with its key is…    the newcomer                               the twin
//	nowhere                    goes on as usual (step 5)                  —
//	queued                     takes the twin's place in the queue        Superseded, counted Superseded
//	                           (and the twin's deadline there)
//	in service                 waits for the twin's result: Joined, with  runs on; its shell passes its
//	                           Decision.Result; counted Joined            response to Ticket.ReleaseWith
//	in service, MaxWaiters     Throttled (ShedKeyBusy)                    runs on
//	waiting for it already
//
// So a person's five taps cost one unit of work: the queue holds one
// request per key, however often it is sent, and a request already running
// is not run again. The newest request keeps the oldest's place, so a
// person who keeps tapping is not sent to the back each time. A twin's
// response is replayed to its waiters only when the twin completed for a
// caller that was still waiting: it did not panic, its deadline had not
// passed and its caller had not left (see [Ticket.ReleaseWith]). Otherwise,
// or when its shell kept nothing to replay, the waiters go through the
// gate again, in the order they came: the first runs, the others join it.
// A waiter whose caller leaves takes itself off the list ([Canceled], or
// [Expired] by its deadline).
//
// Memory is bounded: at most MaxKeys keys (a request with a new key when
// the table is full is served as if it had none), MaxWaiters waiters a key,
// and so at most the concurrency limit × MaxWaiters waiters in all, as only
// requests in service are joined; each key is forgotten TTL after it was
// last seen, unless requests wait on it. A key is stored as a SHA-256 of its
// scope and itself, 32 bytes whatever its length.
//
// The key is the caller's say-so, like the criticality: a caller that
// learns or guesses another's key, in the same scope, can have the other's
// queued request superseded, or receive the other's response. Turn
// supersession on only where every caller is inside your network and
// trusted, or give the shells a scope hook that tells callers apart (an
// authenticated identity). A key names one intent: a client must not reuse
// it for a different request to the same method and path, whose body the
// gate does not compare.
//
// # What the concurrency limit learns, and how requests are counted
//
// [Ticket.Release] ends the request's [limit.Permit] and counts the request
// in [Stats], from the [Outcome] the shell reports and the time the work
// ended, checked in this order:
//
//	the work panicked (Panicked)                  IgnoreAt    Failed, and the panic goes on
//	it returned after its deadline passed         DroppedAt   Wasted: the work took too long
//	it returned after its caller went away        IgnoreAt    Wasted: the caller's choice
//	Succeeded                                     SuccessAt   Goodput: an RTT sample
//	SucceededUntimed (a hijacked connection)      IgnoreAt    Goodput: its time says nothing
//	FailedOverload (a downstream call was         DroppedAt   Failed: overload
//	refused or timed out)
//	Failed (a bug, an internal error)             IgnoreAt    Failed: says nothing about load
//
// so that only requests served normally feed the RTT baseline, and timed out
// or shed work never does. Requests refused or dropped before starting hold
// no permit; each is counted in exactly one of Shed (by reason), Expired,
// Canceled, Superseded or Joined. Every request that reaches the gate ends
// in exactly one of these ways.
//
// # Concurrency
//
// A Gate is safe for concurrent use. The core's first step for an arrival
// ([Core.EnterAt]) and the release of a request nobody may join
// ([Core.ReleaseAt]) run without a lock (the limiter and the counters are
// atomic, and the core keeps an atomic copy of the queue's length); every
// other step runs under a mutex. Each waiting request blocks on a channel
// of its own, to which exactly one grant is sent under the mutex when an
// action starts or answers it (unless it takes itself out first); queue
// timeouts and deadlines are enforced by one time.Timer for the whole
// queue, which the actions set, and whose function takes the mutex itself.
// No goroutine is started per request, and no callback (ServiceSaturated,
// OnQueueWait, OnRefuse, Throttle) runs under the mutex. The refusal paths
// allocate nothing; a request whose key supersession tracks allocates its
// waiter.
package admit
