package admit

import (
	"strconv"
	"time"

	"github.com/stormguard/stormguard/wire"
)

// Request is what [Gate.Admit] needs to know of an arriving request, read
// by the shell from its headers or metadata. The zero Request is a first
// try of criticality critical that states no timeout.
type Request struct {
	// Attempt is the attempt number from the wire: 1 for a first try, 2
	// for the first retry, and so on. A value below 1 counts as 1.
	Attempt int
	// Criticality is the request's criticality from the wire: the
	// caller's claim, which the gate lowers to Config.MaxCriticality
	// unless TrustedCriticality is set. A value outside the four levels
	// counts as the nearest level.
	Criticality wire.Criticality
	// TrustedCriticality says the shell vouches for the caller (an
	// authenticated peer inside your network, say): its Criticality is
	// taken as it is, above Config.MaxCriticality too. Leave it unset for
	// callers you do not know.
	TrustedCriticality bool
	// Timeout is the time the caller says it has left, from the wire
	// (Stormguard-Timeout, say), when HasTimeout is set. It can shorten the
	// deadline, never extend it past MaxTimeout; 0 means the deadline has
	// already passed.
	Timeout    time.Duration
	HasTimeout bool
	// Throttle, when set, is asked, once the kill switch and the deadline
	// have let the request through, whether to throttle its client (a
	// per-client quota, say): true refuses it as [Throttled]. It must be
	// fast and safe for concurrent use.
	Throttle func() bool
	// Key is the request's idempotency key, read and checked by the shell
	// (the Idempotency-Key header, the idempotency-key metadata; see
	// supersede.ParseKey), or "" for none. With Config.Supersede set, the
	// gate collapses requests with the same Key and KeyScope (see the
	// package documentation); otherwise it ignores both.
	Key string
	// KeyScope is what the key is scoped to: the shell puts in it what the
	// request addresses (the method and path; the gRPC method) and who
	// sends it, when it can tell, so that equal keys sent for two
	// operations, or by two callers, never meet.
	KeyScope string
}

// Answer is what a request is told: go ahead, or the refusal the shell maps
// to its transport's signals. The zero Answer is [Admitted].
//
//	answer               HTTP                                     gRPC
//	InstanceOverloaded   503, Stormguard-Overload: instance,      UNAVAILABLE, stormguard-overload: instance,
//	                     Retry-After                              grpc-retry-pushback-ms
//	ServiceOverloaded    503, Stormguard-Overload: service        UNAVAILABLE, stormguard-overload: service,
//	                                                              grpc-retry-pushback-ms: -1
//	Throttled            429, Retry-After                         RESOURCE_EXHAUSTED, grpc-retry-pushback-ms
//	Expired              504                                      DEADLINE_EXCEEDED
//	Canceled             nothing (the client has gone)            CANCELLED
//	Superseded           409, Stormguard-Superseded: replaced     ALREADY_EXISTS, stormguard-superseded: replaced
//	Joined               the twin's response, replayed,           the twin's reply, replayed,
//	                     Stormguard-Superseded: joined            stormguard-superseded: joined
//
// (the reasons for 409 and ALREADY_EXISTS are in the servers' documentation).
type Answer uint8

// The answers.
const (
	// Admitted: run the work, then release its [Ticket].
	Admitted Answer = iota
	// InstanceOverloaded: this instance is too busy; the caller may retry
	// after RetryAfter, elsewhere if it can.
	InstanceOverloaded
	// ServiceOverloaded: the whole service is out of capacity (or an
	// operator sheds with the kill switch); no layer should retry.
	ServiceOverloaded
	// Throttled: the caller's client is over its quota; it may retry after
	// RetryAfter.
	Throttled
	// Expired: the request's deadline passed, or left MinRemaining or less,
	// before it could start. No signal accompanies it.
	Expired
	// Canceled: the caller went away while the request waited in the
	// queue, or for its twin; nobody is there to answer.
	Canceled
	// Superseded: a newer request with the same idempotency key took this
	// one's place in the queue; its caller has moved on to the newer one,
	// and should not retry this one (a retry would supersede the newer).
	Superseded
	// Joined: a twin with the same idempotency key was in service when
	// this request arrived; it waited for the twin's result instead of
	// running again, and Decision.Result is that result, to send as this
	// request's answer.
	Joined
)

var answerNames = [...]string{"admitted", "instance-overloaded", "service-overloaded", "throttled", "expired", "canceled", "superseded", "joined"}

// String returns the answer's name, such as "instance-overloaded".
func (a Answer) String() string {
	if int(a) < len(answerNames) {
		return answerNames[a]
	}
	return "admit.Answer(" + strconv.Itoa(int(a)) + ")"
}

// Decision is how [Gate.Admit] decided: the answer and, for a request shed
// (InstanceOverloaded, ServiceOverloaded or Throttled), why. The zero
// Decision admits.
type Decision struct {
	Answer Answer
	// Reason is why the request was shed; meaningful only when Answer is
	// InstanceOverloaded, ServiceOverloaded or Throttled.
	Reason ShedReason
	// Result is, when Answer is Joined, the result the twin's shell passed
	// to [Ticket.ReleaseWith], never nil; otherwise nil.
	Result any
}

// Admitted reports whether the request was admitted.
func (d Decision) Admitted() bool { return d.Answer == Admitted }
