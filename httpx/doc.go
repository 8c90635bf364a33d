// Package httpx integrates stormguard with net/http.
//
// # Client
//
// [Transport] is an http.RoundTripper that applies a [retry.Retrier] to
// every request: it is the net/http equivalent of [retry.Do], the same core
// driven by the wall clock. [Client] wraps one in an *http.Client.
//
// The Transport puts stormguard's signals on the wire, on a copy of the
// caller's request (which is never modified):
//
//	Stormguard-Attempt            on retries, the attempt number: "2", "3" …;
//	                              a first try carries none (absent means 1
//	                              at every stormguard server);
//	Stormguard-Timeout            the time left before the attempt's deadline
//	                              (the caller's, or the policy's
//	                              AttemptTimeout if that is sooner), relative
//	                              and rounded up, when
//	                              [Transport.PropagateDeadline] is set;
//	Stormguard-Criticality        the criticality of the request's context,
//	                              unless it is the default or the request
//	                              sets the header.
//
// A first try with none of these to carry is the caller's request itself,
// uncopied.
//
// It reads the server's signals from failure responses (status ≥ 400):
//
//	Retry-After                   seconds or an HTTP-date; clamped by the
//	                              policy's Pushback; malformed or negative
//	                              means "do not retry";
//	X-Amz-Retry-After             milliseconds; a malformed value is ignored,
//	                              as the AWS SDKs do;
//	Stormguard-Overload           "service": do not retry; "instance" or a
//	                              value this version does not know: retry,
//	                              after a delay;
//	Stormguard-Retries-Exhausted  a layer below already retried: do not retry.
//
// When it stops retrying on a failure response after more than one attempt,
// because the retry budget, the kill switch or the circuit breaker refused
// the retry, or because the server said not to retry ([retry.StopsAbove],
// the rule a [retry.GiveUpError]'s RetryClass follows too), it sets
// Stormguard-Retries-Exhausted: 1 on that response (the one the
// *retry.GiveUpError it returns carries), so that a service which relays the
// failure tells its own callers not to retry: retries happen at one layer
// only ([RelayExhaustedError] does it from the error).
//
// See the documentation of [Transport.RoundTrip] for the full contract. An
// optional [AdaptiveThrottle] (the SRE book's client-side throttling)
// rejects attempts locally while the server keeps refusing.
//
// # Server
//
// [Server] wraps an http.Handler with overload control. It is the HTTP
// shell of an [admit.Gate] (grpcx.Server is the gRPC one), built on the
// same cores the simulator drives ([shed.Queue], [limit.Limiter]):
//
//   - the request's deadline becomes min(the server's MaxTimeout,
//     Stormguard-Timeout): a caller can never extend the server's maximum;
//     the attempt number and criticality go into the context (package
//     deadline);
//   - work whose deadline has passed (or leaves less than MinRemaining) is
//     answered 504 before it starts, also after waiting in the queue;
//   - at most the limiter's limit of handlers run at once; the excess waits
//     in a queue that serves first tries before retries, with adaptive LIFO
//     and CoDel queue timeouts;
//   - refusals are cheap and carry the signals: 503 + Retry-After +
//     Stormguard-Overload: instance when this instance is overloaded; 503 +
//     Stormguard-Overload: service (no Retry-After) when the whole service is
//     saturated or the kill switch sheds; 429 + Retry-After when throttling a
//     client.
//
// [Server.Stats] counts arrivals, goodput, wasted work, shed by reason and
// expired-dropped work in the vocabulary of the rest of stormguard
// ([admit.Stats]).
package httpx
