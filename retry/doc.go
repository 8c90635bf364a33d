// Package retry decides whether, when and how often a failed call is tried
// again, so that retries help a client through a blip without feeding a
// retry storm: jittered backoff, an attempt cap, a retry budget, error
// classification, clamped server pushback, deadline awareness, a circuit
// breaker, hedging and a kill switch, all in one [Policy].
//
// # Using it
//
// Most programs need four names: a [Policy] (or a named [Preset]), [New] to
// build a [Retrier] from it with [Option]s ([WithBudget], [WithBreaker],
// [WithDials], [WithClassifiers], [WithRetryUnknown], [WithHooks]), and [Do]
// or [DoValue] to call a function under it:
//
//	p, _ := retry.Preset("stormguard") // 3 attempts, full jitter, a 10 % budget
//	r := retry.MustNew(p)
//	err := retry.Do(ctx, r, func(ctx context.Context) error { return callDB(ctx) })
//	var g *retry.GiveUpError
//	if errors.As(err, &g) {
//		log.Printf("gave up after %d attempts: %v", g.Attempts, g.Reason)
//	}
//
// For HTTP and gRPC, the shells in packages httpx and grpcx take the same
// Retrier. What is retried by default is stated on [Do]: transient network
// errors, timeouts, 408/429/5xx-style statuses and their gRPC counterparts;
// an error no classifier knows (a plain errors.New) is not retried unless
// [WithRetryUnknown] says so.
//
// # The deterministic core
//
// The Retrier is a deterministic core: time and the random sample are
// arguments, it never sleeps, never starts a goroutine and never reads the
// clock. The methods that take a time — [Retrier.StartAt],
// [Retrier.StartContext], [Retrier.AllowAt], [Retrier.EndAt],
// [Retrier.NextAt], [Retrier.FinishAt], [Retrier.AbandonAt], the Hedge…At
// family, and [Retrier.Sample], [Retrier.NeedsClock] and [Retrier.GiveUp]
// — are that core. Do, httpx, grpcx and the simulator (package sim) drive
// it with the wall clock or with virtual time; a program needs them only
// to write a shell of its own, and then should read Do's source first.
package retry
