package grpcx

import (
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// The metadata keys stormguard uses on gRPC: wire's header names in lower
// case, as gRPC metadata keys are.
var (
	keyAttempt          = strings.ToLower(wire.HeaderAttempt)
	keyTimeout          = strings.ToLower(wire.HeaderTimeout)
	keyOverload         = strings.ToLower(wire.HeaderOverload)
	keyRetriesExhausted = strings.ToLower(wire.HeaderRetriesExhausted)
	keyCriticality      = strings.ToLower(wire.HeaderCriticality)
)

// ParseSignal reads a server's retry signals from the header and trailer
// metadata of a failed call. A key may be in either; the trailer is read
// first, since that is where gRPC puts them (a server that fails a call
// before sending anything answers with trailers only).
//
//   - grpc-retry-pushback-ms ([wire.ParseMillis]) sets the pushback. A value
//     that is negative or malformed, or more than one value, sets
//     BadPushback: under gRFC A6 that means "do not retry";
//   - stormguard-overload sets Overload; a value this version does not know
//     counts as [wire.OverloadInstance] (the server is overloaded, but did not
//     say the whole service is);
//   - stormguard-retries-exhausted ([wire.ParseExhausted]) sets Exhausted.
//
// Either metadata may be nil. ParseSignal does not modify them.
func ParseSignal(header, trailer metadata.MD) retry.Signal {
	var s retry.Signal
	if vs := values(trailer, header, wire.KeyGRPCRetryPushback); len(vs) > 0 {
		if d, ok := wire.ParseMillis(vs[0]); ok && len(vs) == 1 {
			s.Pushback, s.HasPushback = d, true
		} else {
			s.BadPushback = true
		}
	}
	if vs := values(trailer, header, keyOverload); len(vs) > 0 {
		o, ok := wire.ParseOverload(vs[0])
		if !ok {
			o = wire.OverloadInstance
		}
		s.Overload = o
	}
	if vs := values(trailer, header, keyRetriesExhausted); len(vs) > 0 {
		s.Exhausted = wire.ParseExhausted(vs[0])
	}
	return s
}

// values returns the values of key in first, or else in second. Keys are
// looked up as gRPC stores them, in lower case.
func values(first, second metadata.MD, key string) []string {
	if vs := first[key]; len(vs) > 0 {
		return vs
	}
	return second[key]
}

// StatusError is a failed attempt's gRPC status, with the metadata that came
// with it. The client interceptors wrap every status they get in one, so
// that the retrier's classifiers see the code (it is a [retry.GRPCCoder]) and
// the caller can read the server's metadata after the call. A
// [retry.GiveUpError] keeps it as its last error.
//
// status.Code, status.FromError and status.Convert see through it, and
// through a GiveUpError that wraps it, to the status.
type StatusError struct {
	Status  *status.Status // never nil
	Header  metadata.MD    // the attempt's header metadata; may be nil; do not modify
	Trailer metadata.MD    // the attempt's trailer metadata; may be nil; do not modify
}

// Error returns the status as grpc-go words it: "rpc error: code = … desc = …".
func (e *StatusError) Error() string { return e.Status.Err().Error() }

// GRPCStatus returns the status, for status.FromError.
func (e *StatusError) GRPCStatus() *status.Status { return e.Status }

// GRPCCode returns the status code as a number, for [retry.GRPCCoder].
func (e *StatusError) GRPCCode() uint32 { return uint32(e.Status.Code()) }

var _ retry.GRPCCoder = (*StatusError)(nil)
