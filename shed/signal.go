package shed

import (
	"time"

	"github.com/stormguard/stormguard/wire"
)

// Signal is what a server says about overload when it refuses a request: the
// value of the overload header and, for an overloaded instance, a
// Retry-After hint. The HTTP and gRPC layers map it to a status and headers.
// The zero Signal says nothing.
type Signal struct {
	// Overload is wire.OverloadInstance (retry elsewhere, after
	// RetryAfter), wire.OverloadService (do not retry, at any layer) or
	// wire.OverloadNone.
	Overload wire.Overload
	// RetryAfter is the suggested delay before a retry; never negative,
	// and zero unless Overload is wire.OverloadInstance.
	RetryAfter time.Duration
}

// Decide returns the signal for a refusal. serviceSaturated says the whole
// service is out of capacity (every instance is shedding, a fleet-wide
// budget is spent, an operator dialled shedding up), instanceOverloaded that
// this instance is (its queue refused or shed the request, see
// [Reason.IsOverload]); retryAfter is the delay to suggest to a client that
// may retry. The rules, in order:
//
//	serviceSaturated     → wire.OverloadService, no Retry-After: a hint would invite the retry
//	instanceOverloaded   → wire.OverloadInstance, Retry-After max(retryAfter, 0)
//	otherwise            → the zero Signal
//
// Decide is a pure function, safe for concurrent use.
func Decide(instanceOverloaded, serviceSaturated bool, retryAfter time.Duration) Signal {
	switch {
	case serviceSaturated:
		return Signal{Overload: wire.OverloadService}
	case instanceOverloaded:
		return Signal{Overload: wire.OverloadInstance, RetryAfter: max(retryAfter, 0)}
	}
	return Signal{}
}
