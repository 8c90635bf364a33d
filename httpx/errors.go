package httpx

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stormguard/stormguard/retry"
)

// ErrAttemptTimeout is wrapped by the error of an attempt that ran past the
// policy's AttemptTimeout (while the caller's context was still live). Such
// an attempt is of class [retry.Timeout]. The error also wraps what the base
// transport returned, usually context.DeadlineExceeded.
var ErrAttemptTimeout = errors.New("httpx: attempt timed out")

// StatusError describes a failure response (status ≥ 400) as an error.
//
// The retrier's classifiers see it when a response is classified (so a
// classifier installed with [retry.WithClassifiers] can overrule the default,
// [retry.ClassifyHTTPStatus]), and a [retry.GiveUpError] keeps it as the last
// error when the caller cancels while waiting to retry a failure response.
// A final failure response is returned as a response, not as this error.
//
// It carries no server signals on purpose: the Transport passes them to the
// retrier beside the class, and reads them from Header.
type StatusError struct {
	StatusCode int         // 503
	Status     string      // "503 Service Unavailable"
	Header     http.Header // the response's header; do not modify
}

func (e *StatusError) Error() string { return "httpx: server answered " + e.Status }

// HTTPStatus returns the status code, for [retry.HTTPStatuser].
func (e *StatusError) HTTPStatus() int { return e.StatusCode }

var _ retry.HTTPStatuser = (*StatusError)(nil)

// ctxErr is ctx.Err(), also wrapping the cause when one was given.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}
