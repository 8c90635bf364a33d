package grpcx

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// The trailers and errors of refusals that do not depend on the
// configuration, built once. grpc-go copies a trailer it is given and only
// reads a status error, so sharing them between calls is safe.
var (
	// mdService says: the whole service is overloaded, do not retry. The
	// negative pushback says the same to any gRFC A6 client.
	mdService   = metadata.MD{keyOverload: {wire.OverloadService.String()}, wire.KeyGRPCRetryPushback: {"-1"}}
	mdExhausted = metadata.MD{keyRetriesExhausted: {wire.ExhaustedValue}}

	errInstance  = status.Error(codes.Unavailable, "grpcx: overloaded: this instance is busy; retry after the delay, elsewhere if you can")
	errService   = status.Error(codes.Unavailable, "grpcx: overloaded: the service is out of capacity; do not retry")
	errThrottled = status.Error(codes.ResourceExhausted, "grpcx: too many calls from this client; retry after the delay")
	errExpired   = status.Error(codes.DeadlineExceeded, "grpcx: deadline exceeded before the call started")
	errCanceled  = status.Error(codes.Canceled, "grpcx: call abandoned by its client while queued")
)

// refuse returns the error of a call the gate did not admit, as its answer
// says, having set its trailer: RESOURCE_EXHAUSTED with a pushback for a
// throttled client; UNAVAILABLE with the service signal when the whole
// service is overloaded (the kill switch, or ServiceSaturated); UNAVAILABLE
// with the instance signal and a pushback for an overloaded instance;
// DEADLINE_EXCEEDED, which no signal accompanies, for a call whose deadline
// passed before it started; ALREADY_EXISTS with stormguard-superseded:
// replaced and a negative pushback for a call a newer twin superseded;
// CANCELLED, which nobody receives, for a call whose client left while it
// waited.
func (s *Server) refuse(setTrailer func(metadata.MD), d admit.Decision) error {
	switch d.Answer {
	case admit.Throttled:
		setTrailer(s.mdThrottled)
		if d.Reason == admit.ShedKeyBusy {
			return errKeyBusy
		}
		return errThrottled
	case admit.ServiceOverloaded:
		setTrailer(mdService)
		return errService
	case admit.InstanceOverloaded:
		setTrailer(s.mdInstance)
		return errInstance
	case admit.Expired:
		return errExpired
	case admit.Superseded:
		setTrailer(mdReplaced)
		return errSuperseded
	default: // admit.Canceled
		return errCanceled
	}
}

// exhausted reports whether err says that retrying already stopped below:
// an error in its chain states its class (retry.Classed, as a
// retry.GiveUpError does) and that class is RetriesExhausted or
// ServiceOverloaded.
func exhausted(err error) bool {
	var c retry.Classed
	if !errors.As(err, &c) {
		return false
	}
	cls := c.RetryClass()
	return cls == retry.RetriesExhausted || cls == retry.ServiceOverloaded
}

// RelayExhausted passes a downstream "do not retry" up to the caller of
// the handler whose context is ctx, so that retries happen at one layer
// only: if err, the error of a call the handler made (through this
// package's client interceptors, or [retry.Do]), says that retrying already
// stopped below — a [retry.GiveUpError] after more than one attempt, or
// after the retry budget, the kill switch, the circuit breaker or the
// server's signals refused the retry ([retry.StopsAbove]) — RelayExhausted
// adds stormguard-retries-exhausted: 1 to the handler's trailer and
// returns true. Otherwise it changes nothing and returns false.
//
// A [Server] does this by itself when the handler returns such an error;
// call RelayExhausted when the handler returns an error of its own instead,
// or runs without a Server. ctx must be the handler's context (for a stream,
// its Context()).
func RelayExhausted(ctx context.Context, err error) bool {
	if err == nil || !exhausted(err) {
		return false
	}
	return grpc.SetTrailer(ctx, mdExhausted) == nil
}
