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
// [retry.ClassifyHTTPStatus]); Response is nil then. When the Transport gives
// up on a failure response it returns a [retry.GiveUpError] whose last error
// is this one, with Response set (see [Transport.RoundTrip]).
//
// It carries no server signals on purpose: the Transport passes them to the
// retrier beside the class, and reads them from Header.
type StatusError struct {
	StatusCode int         // 503
	Status     string      // "503 Service Unavailable"
	Header     http.Header // the response's header; do not modify
	// Response is the failure response, when the Transport returns this
	// error: its Body was read into memory (up to 64 KiB; a longer body
	// reads as its first 64 KiB, then fails with [ErrBodyTruncated]) and
	// the connection's body closed, so there is nothing to close.
	Response *http.Response
}

// ErrBodyTruncated is the error reading a [StatusError]'s Response.Body
// returns after its first 64 KiB, when the server sent more.
var ErrBodyTruncated = errors.New("httpx: failure response body truncated at 64 KiB")

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
