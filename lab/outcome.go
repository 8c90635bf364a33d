package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"syscall"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Outcomes counts how the load generator's requests ended. Every request
// it sends ends in exactly one outcome, so once it has drained
//
//	Sent = Succeeded + TimedOut + Shed + Σ Errors + InFlight
//
// with InFlight 0 (the generator waits for every request it sent before it
// reports). Check verifies it.
type Outcomes struct {
	// Sent counts the requests the generator started.
	Sent int64 `json:"sent"`
	// Succeeded: a success response reached the generator in time.
	Succeeded int64 `json:"succeeded"`
	// TimedOut: the last attempt ran out of time (the attempt timeout or
	// the request's deadline).
	TimedOut int64 `json:"timed_out"`
	// Shed: the last attempt was refused for overload (429, or 503 with
	// Stormguard-Overload).
	Shed int64 `json:"shed"`
	// Errors counts the other failures by the kind of the last attempt's
	// error: "http 502", "connection refused", "connection reset",
	// "connection closed", "canceled", "other".
	Errors map[string]int64 `json:"errors"`
	// InFlight counts requests without an outcome when the generator
	// reported; 0 unless it was stopped before it drained.
	InFlight int64 `json:"in_flight"`
}

// Ended returns the requests that ended, whatever the outcome.
func (o Outcomes) Ended() int64 {
	n := o.Succeeded + o.TimedOut + o.Shed
	for _, v := range o.Errors {
		n += v
	}
	return n
}

// Failed returns the requests that ended in failure.
func (o Outcomes) Failed() int64 { return o.Ended() - o.Succeeded }

// Check reports an error unless every request sent ended in exactly one
// outcome: Sent = Ended + InFlight, with no negative count.
func (o Outcomes) Check() error {
	if o.Sent < 0 || o.Succeeded < 0 || o.TimedOut < 0 || o.Shed < 0 || o.InFlight < 0 {
		return fmt.Errorf("lab: negative count in %s", o)
	}
	for k, v := range o.Errors {
		if v < 0 {
			return fmt.Errorf("lab: negative count of %q errors", k)
		}
	}
	if e := o.Ended(); e+o.InFlight != o.Sent {
		return fmt.Errorf("lab: %d requests sent but %d ended and %d in flight (%s)", o.Sent, e, o.InFlight, o)
	}
	return nil
}

// String is the outcomes on one line: "sent 7000: 6500 ok, 300 timed
// out, 100 shed, 100 http 502".
func (o Outcomes) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d: %d ok, %d timed out, %d shed", o.Sent, o.Succeeded, o.TimedOut, o.Shed)
	keys := make([]string, 0, len(o.Errors))
	for k := range o.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, ", %d %s", o.Errors[k], k)
	}
	if o.InFlight > 0 {
		fmt.Fprintf(&b, ", %d in flight", o.InFlight)
	}
	return b.String()
}

// outcome is the one way a request ended.
type outcome struct {
	kind     outcomeKind
	err      string // the error kind, for outcomeError
	degraded bool   // a success served with a fallback
}

type outcomeKind uint8

const (
	outcomeSuccess outcomeKind = iota
	outcomeTimeout
	outcomeShed
	outcomeError
)

// statusError is a failure response seen by the load generator: its
// status and whether it carried an overload signal.
type statusError struct {
	code     int
	overload bool
}

func (e *statusError) Error() string   { return fmt.Sprintf("status %d", e.code) }
func (e *statusError) HTTPStatus() int { return e.code }

// classify gives the outcome of a request from the error retry.Do returned
// (nil for a success) and whether the request's own context had expired.
func classify(err error, deadlinePassed bool) outcome {
	if err == nil {
		return outcome{kind: outcomeSuccess}
	}
	last := err
	var gu *retry.GiveUpError
	if errors.As(err, &gu) && gu.Last != nil {
		last = gu.Last
	}
	var se *statusError
	if errors.As(last, &se) {
		if se.code == http.StatusTooManyRequests || se.code == http.StatusServiceUnavailable && se.overload {
			return outcome{kind: outcomeShed}
		}
		return outcome{kind: outcomeError, err: fmt.Sprintf("http %d", se.code)}
	}
	var ne net.Error
	switch {
	case deadlinePassed, errors.Is(last, context.DeadlineExceeded), errors.As(last, &ne) && ne.Timeout():
		return outcome{kind: outcomeTimeout}
	case errors.Is(last, syscall.ECONNREFUSED):
		return outcome{kind: outcomeError, err: "connection refused"}
	case errors.Is(last, syscall.ECONNRESET), errors.Is(last, syscall.EPIPE):
		return outcome{kind: outcomeError, err: "connection reset"}
	case errors.Is(last, io.EOF), errors.Is(last, io.ErrUnexpectedEOF):
		return outcome{kind: outcomeError, err: "connection closed"}
	case errors.Is(last, context.Canceled):
		return outcome{kind: outcomeError, err: "canceled"}
	}
	return outcome{kind: outcomeError, err: "other"}
}

// statusErrorOf builds the error of a failure response.
func statusErrorOf(resp *http.Response) *statusError {
	return &statusError{code: resp.StatusCode, overload: resp.Header.Get(wire.HeaderOverload) != ""}
}
