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
	// the attempt, which was not sent. It is breaker.ErrOpen.
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

// RetryClass makes a give-up visible to an enclosing retry layer: a request
// that this layer already retried is not retried again above it ("retry at
// one layer"), nor one its circuit breaker refused. A failure given up after
// a single attempt for a reason that says nothing about retrying elsewhere
// keeps the last error's class.
func (e *GiveUpError) RetryClass() Class {
	switch {
	case e.Attempts > 1, errors.Is(e.Reason, ErrBudgetExhausted), errors.Is(e.Reason, ErrRetriesDisabled),
		errors.Is(e.Reason, ErrBreakerOpen):
		return RetriesExhausted
	case errors.Is(e.Reason, ErrServerSaidStop):
		return ServiceOverloaded
	}
	return classify(nil, e.Last, NeverRetry)
}
