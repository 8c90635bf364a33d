package retry

import (
	"errors"
	"fmt"

	"github.com/stormguard/stormguard/breaker"
)

// The reasons retrying stops. A [GiveUpError] matches exactly one of them
// with errors.Is.
var (
	ErrAttemptsExhausted = errors.New("attempts exhausted")
	ErrBudgetExhausted   = errors.New("retry budget empty")
	ErrDeadline          = errors.New("no time left for another attempt before the deadline")
	ErrNotRetryable      = errors.New("error is not retryable")
	ErrServerSaidStop    = errors.New("server said not to retry")
	ErrRetriesDisabled   = errors.New("retries disabled")
	ErrCanceled          = errors.New("caller cancelled")
	// ErrRetryDeclined: the policy retries a failure only with
	// RetryProbability, and this draw declined.
	ErrRetryDeclined = errors.New("retry declined by chance (retry_probability)")
	// ErrBreakerOpen: the retrier's circuit breaker ([WithBreaker]) refused
	// the attempt, which was not sent: any attempt for a breaker that stops
	// calls, a retry or a hedge for one that stops retries. It is
	// breaker.ErrOpen.
	ErrBreakerOpen = breaker.ErrOpen
)

// GiveUpError is returned when a call ends in failure. It keeps the last
// attempt's error (errors.Is and errors.As see through to it) and says why
// retrying stopped (errors.Is(err, ErrBudgetExhausted) and so on).
type GiveUpError struct {
	Reason error // one of the Err… reasons of this package
	// Last is the last attempt's error; nil when no attempt was made (a
	// circuit breaker refused the first).
	Last     error
	Attempts int // attempts made, first try included; 0 when none was sent
}

func (e *GiveUpError) Error() string {
	if e.Last == nil {
		return fmt.Sprintf("gave up after %d attempt(s): %v", e.Attempts, e.Reason)
	}
	return fmt.Sprintf("gave up after %d attempt(s): %v: %v", e.Attempts, e.Reason, e.Last)
}

// Unwrap returns the reason and the last error, so that errors.Is matches
// either.
func (e *GiveUpError) Unwrap() []error {
	if e.Last == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Last}
}

// RetryClass makes a give-up visible to an enclosing retry layer, by
// [StopsAbove]: a request that this layer already retried, or whose retry
// its budget, kill switch or circuit breaker refused, is not retried again
// above it ("retry at one layer"); one the server said not to retry is
// ServiceOverloaded. A failure given up after a single attempt for a reason
// that says nothing about retrying elsewhere keeps the last error's class.
func (e *GiveUpError) RetryClass() Class {
	if c, stop := StopsAbove(e.Reason, e.Attempts); stop {
		return c
	}
	return classify(nil, e.Last, NeverRetry)
}

// StopsAbove is the rule "retry at one layer only": it reports whether the
// layers above a call that gave up for reason (one of this package's Err…
// reasons) after attempts attempts must not retry it, and the class they
// see it as:
//
//	the call gave up                                  stop  class
//	after more than one attempt                       yes   RetriesExhausted
//	its budget, kill switch or breaker refused        yes   RetriesExhausted
//	  (ErrBudgetExhausted, ErrRetriesDisabled,
//	  ErrBreakerOpen: after one attempt or none)
//	the server said not to retry (ErrServerSaidStop)  yes   ServiceOverloaded
//	otherwise (one attempt: attempts exhausted,       no    —: the last
//	  deadline, not retryable, declined, canceled)          error's own class
//
// It is the one statement of the rule: [GiveUpError.RetryClass] (which the
// servers of httpx and grpcx read to relay a give-up), httpx.Transport's
// Stormguard-Retries-Exhausted on a given-up response and the simulator's
// relay of a downstream give-up all ask it.
func StopsAbove(reason error, attempts int) (Class, bool) {
	switch {
	case attempts > 1, errors.Is(reason, ErrBudgetExhausted), errors.Is(reason, ErrRetriesDisabled),
		errors.Is(reason, ErrBreakerOpen):
		return RetriesExhausted, true
	case errors.Is(reason, ErrServerSaidStop):
		return ServiceOverloaded, true
	}
	return 0, false
}
