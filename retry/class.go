package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/wire"
)

// Class is what an attempt's result means for retrying.
type Class uint8

// The classes, in the order a [Chain] reports them.
const (
	// Success: the attempt succeeded; nothing to retry.
	Success Class = iota
	// Transient: a failure that may pass (connection reset, 500, 502, 503, 504, UNAVAILABLE).
	Transient
	// Throttling: the server asked this client to slow down (429, RESOURCE_EXHAUSTED).
	Throttling
	// Timeout: the attempt took too long (its own timeout, not the caller's deadline).
	Timeout
	// NeverRetry: the same request will fail the same way (400, 403, 404, 501, INVALID_ARGUMENT …).
	NeverRetry
	// Canceled: the caller cancelled or its deadline passed; never retried.
	Canceled
	// ServiceOverloaded: the whole service is overloaded; do not retry at any layer.
	ServiceOverloaded
	// RetriesExhausted: a layer below already retried and gave up; pass the failure up.
	RetriesExhausted
)

var classNames = [...]string{"success", "transient", "throttling", "timeout", "never-retry", "canceled", "service-overloaded", "retries-exhausted"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("retry.Class(%d)", uint8(c))
}

// Retryable reports whether the class is one a retry may fix.
func (c Class) Retryable() bool { return c == Transient || c == Throttling || c == Timeout }

// cause maps a retryable class to the budget's price list.
func (c Class) cause() budget.Cause {
	switch c {
	case Throttling:
		return budget.Throttling
	case Timeout:
		return budget.Timeout
	}
	return budget.Transient
}

// A Classifier gives an error's class, or ok = false when it does not know
// (the next classifier in the chain is asked). It is called only with a
// non-nil error.
type Classifier interface {
	Classify(err error) (c Class, ok bool)
}

// ClassifierFunc adapts a function to a [Classifier].
type ClassifierFunc func(err error) (Class, bool)

// Classify calls f(err).
func (f ClassifierFunc) Classify(err error) (Class, bool) { return f(err) }

// Chain is an ordered list of classifiers: the first definite answer wins.
// A [Retrier] asks its chain, then [Default]; an error neither knows is
// [NeverRetry] (or [Transient] with [WithRetryUnknown]).
type Chain []Classifier

// Classify asks each classifier in turn; nil is [Success].
func (ch Chain) Classify(err error) (Class, bool) {
	if err == nil {
		return Success, true
	}
	for _, c := range ch {
		if got, ok := c.Classify(err); ok {
			return got, true
		}
	}
	return 0, false
}

// classify is the classification a [Retrier] uses: the chain, then the
// defaults, then unknown (NeverRetry, or Transient with [WithRetryUnknown]).
func classify(ch Chain, err error, unknown Class) Class {
	if err == nil {
		return Success
	}
	if c, ok := ch.Classify(err); ok {
		return c
	}
	if c, ok := Default.Classify(err); ok {
		return c
	}
	return unknown
}

// The interfaces the default classifier looks for, as errors.As would. Any
// error type can take part by having the method; stormguard's shells
// produce errors that have them.
type (
	// HTTPStatuser is an error that carries an HTTP status code.
	HTTPStatuser interface{ HTTPStatus() int }
	// GRPCCoder is an error that carries a gRPC status code as a number
	// (codes.Code's underlying value).
	GRPCCoder interface{ GRPCCode() uint32 }
	// Signaler is an error that carries the server's overload signals.
	Signaler interface{ Signal() Signal }
	// Classed is an error that states its own class.
	Classed interface{ RetryClass() Class }
)

// Default classifies what the standard library and stormguard's shells
// produce, in this order:
//
//  1. context.Canceled, context.DeadlineExceeded → Canceled (the shells turn
//     a per-attempt timeout into Timeout before asking);
//  2. an error with RetryClass() → that class;
//  3. an HTTPStatuser → [ClassifyHTTPStatus]; a GRPCCoder →
//     [ClassifyGRPCCode]; a net.Error with Timeout() → Timeout; connection
//     refused, reset, aborted, broken pipe, unexpected EOF, EOF, net.ErrClosed
//     and other *net.OpError → Transient;
//  4. then, if that class is retryable (or unknown), a Signaler's signal
//     can stop it: service overloaded or malformed pushback →
//     ServiceOverloaded, retries exhausted downstream → RetriesExhausted.
//     A signal never makes a non-retryable error retryable.
//
// Everything else is unknown (ok = false).
//
// "Is" and "an X" mean what errors.Is and errors.As mean: anywhere in the
// error's tree, the first X in errors.As's depth-first order. Default finds
// them in one walk of the tree with type assertions, without reflection and
// without allocating; only a tree in which some error has an As method is
// classified with errors.As itself, so that the method is honoured.
var Default Classifier = ClassifierFunc(defaultClassify)

func defaultClassify(err error) (Class, bool) {
	var s scan
	s.walk(err)
	if s.canceled {
		return Canceled, true
	}
	if s.hasAs {
		return classifyAs(err)
	}
	if s.classed != nil {
		return s.classed.RetryClass(), true
	}
	c, ok := s.base()
	// A server's signal can only stop a retry the error would otherwise
	// allow: a 404 stays not retryable whatever headers came with it.
	if (!ok || c.Retryable()) && s.signaler != nil {
		if c, stop := stopClass(s.signaler.Signal()); stop {
			return c, true
		}
	}
	return c, ok
}

// stopClass is the class a server's signal imposes on a retryable or
// unknown failure, if any.
func stopClass(s Signal) (Class, bool) {
	switch {
	case s.Overload == wire.OverloadService || s.BadPushback:
		return ServiceOverloaded, true
	case s.Exhausted:
		return RetriesExhausted, true
	}
	return 0, false
}

// The errors that errors.Is finds for step 3's Transient.
var transientErrs = [...]error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
	syscall.EPIPE, io.ErrUnexpectedEOF, io.EOF, net.ErrClosed}

// scan is what the default classifier needs to know about an error tree:
// the first error of each interface in errors.As's order, and whether
// errors.Is would find each sentinel.
type scan struct {
	classed   Classed
	http      HTTPStatuser
	grpc      GRPCCoder
	net       net.Error
	signaler  Signaler
	canceled  bool // context.Canceled or context.DeadlineExceeded
	transient bool // one of transientErrs
	opErr     bool // a *net.OpError
	hasAs     bool // an error with an As method: errors.As must decide
}

// walk visits err's tree in the order errors.Is and errors.As do: the error,
// then what Unwrap() error returns, or each error of Unwrap() []error in turn
// (depth first). Nil errors end a branch.
func (s *scan) walk(err error) {
	for err != nil {
		// stormguard's own wrappers: no interface checks, and a GiveUpError's
		// two errors without allocating its Unwrap slice.
		switch e := err.(type) {
		case *SignalError:
			if s.signaler == nil {
				s.signaler = e
			}
			err = e.Err
			continue
		case *GiveUpError:
			if s.classed == nil {
				s.classed = e
			}
			s.walk(e.Reason)
			err = e.Last
			continue
		// The standard library's network errors, by what their methods
		// are: *net.OpError and *url.Error are net.Errors that unwrap,
		// *os.SyscallError only unwraps, and a syscall.Errno is a
		// net.Error whose Is method matches none of this file's targets.
		case *net.OpError:
			s.opErr = true
			if s.net == nil {
				s.net = e
			}
			err = e.Err
			continue
		case *url.Error:
			if s.net == nil {
				s.net = e
			}
			err = e.Err
			continue
		case *os.SyscallError:
			err = e.Err
			continue
		case syscall.Errno:
			switch e {
			case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE:
				s.transient = true
			}
			if s.net == nil {
				s.net = e
			}
			return
		}
		s.node(err)
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				s.walk(e)
			}
			return
		default:
			return
		}
	}
}

// node records what one error of the tree is.
func (s *scan) node(err error) {
	if err == context.Canceled || err == context.DeadlineExceeded {
		s.canceled = true
	}
	for _, t := range transientErrs {
		if err == t {
			s.transient = true
		}
	}
	if x, ok := err.(interface{ Is(error) bool }); ok {
		if x.Is(context.Canceled) || x.Is(context.DeadlineExceeded) {
			s.canceled = true
		}
		for _, t := range transientErrs {
			if x.Is(t) {
				s.transient = true
			}
		}
	}
	if _, ok := err.(interface{ As(any) bool }); ok {
		s.hasAs = true
	}
	if _, ok := err.(*net.OpError); ok {
		s.opErr = true
	}
	if s.classed == nil {
		s.classed, _ = err.(Classed)
	}
	if s.http == nil {
		s.http, _ = err.(HTTPStatuser)
	}
	if s.grpc == nil {
		s.grpc, _ = err.(GRPCCoder)
	}
	if s.net == nil {
		s.net, _ = err.(net.Error)
	}
	if s.signaler == nil {
		s.signaler, _ = err.(Signaler)
	}
}

// base is step 3: the class by status code and network error, ignoring
// signals.
func (s *scan) base() (Class, bool) {
	switch {
	case s.http != nil:
		return ClassifyHTTPStatus(s.http.HTTPStatus())
	case s.grpc != nil:
		return ClassifyGRPCCode(s.grpc.GRPCCode())
	case s.net != nil && s.net.Timeout():
		return Timeout, true
	case s.transient, s.opErr:
		return Transient, true
	}
	return 0, false
}

// classifyAs is [Default] written with errors.Is and errors.As, for error
// trees in which an As method may claim a target. It is the definition the
// walk above follows.
func classifyAs(err error) (Class, bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled, true
	}
	var cl Classed
	if errors.As(err, &cl) {
		return cl.RetryClass(), true
	}
	c, ok := baseClassAs(err)
	if !ok || c.Retryable() {
		var sg Signaler
		if errors.As(err, &sg) {
			if c, stop := stopClass(sg.Signal()); stop {
				return c, true
			}
		}
	}
	return c, ok
}

func baseClassAs(err error) (Class, bool) {
	var hs HTTPStatuser
	if errors.As(err, &hs) {
		return ClassifyHTTPStatus(hs.HTTPStatus())
	}
	var gc GRPCCoder
	if errors.As(err, &gc) {
		return ClassifyGRPCCode(gc.GRPCCode())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Timeout, true
	}
	for _, t := range transientErrs {
		if errors.Is(err, t) {
			return Transient, true
		}
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return Transient, true
	}
	return 0, false
}

// ClassifyHTTPStatus gives the class of an HTTP status code: 2xx and 3xx
// Success; 408 Timeout; 429 Throttling; 500, 502, 503, 504 Transient; 501,
// other 4xx and other 5xx NeverRetry.
func ClassifyHTTPStatus(code int) (Class, bool) {
	switch {
	case code >= 200 && code < 400:
		return Success, true
	case code == 408:
		return Timeout, true
	case code == 429:
		return Throttling, true
	case code == 500, code == 502, code == 503, code == 504:
		return Transient, true
	case code >= 400 && code < 600:
		return NeverRetry, true
	}
	return 0, false
}

// The gRPC status codes, by number (google.golang.org/grpc/codes), so this
// package needs no gRPC import.
const (
	grpcOK                       = 0
	grpcCanceled                 = 1
	grpcDeadlineExceeded         = 4
	grpcResourceExhausted        = 8
	grpcAborted                  = 10
	grpcInternal                 = 13
	grpcUnavailable              = 14
	grpcMaxCode           uint32 = 16
)

// ClassifyGRPCCode gives the class of a gRPC status code: OK Success;
// UNAVAILABLE Transient; RESOURCE_EXHAUSTED Throttling; DEADLINE_EXCEEDED
// Timeout; CANCELLED Canceled; ABORTED Transient (optimistic concurrency);
// every other code NeverRetry. INTERNAL is NeverRetry: gRFC A6 leaves it to
// the service's configuration, and a retried INTERNAL rarely heals.
func ClassifyGRPCCode(code uint32) (Class, bool) {
	switch code {
	case grpcOK:
		return Success, true
	case grpcUnavailable, grpcAborted:
		return Transient, true
	case grpcResourceExhausted:
		return Throttling, true
	case grpcDeadlineExceeded:
		return Timeout, true
	case grpcCanceled:
		return Canceled, true
	}
	if code <= grpcMaxCode {
		return NeverRetry, true
	}
	return 0, false
}

// Signal is what a server said about retrying, parsed from the wire by a
// shell (HTTP headers, gRPC metadata). The zero Signal says nothing.
type Signal struct {
	// Pushback is the server's requested delay (Retry-After,
	// x-amz-retry-after, grpc-retry-pushback-ms) when HasPushback is set.
	Pushback    time.Duration
	HasPushback bool
	// BadPushback: a hint was present but malformed or negative, which
	// means "do not retry" (gRFC A6).
	BadPushback bool
	Overload    wire.Overload
	// Exhausted: a layer below already retried this request and gave up.
	Exhausted bool
}

// SignalError wraps an attempt's error with the signals its response carried.
type SignalError struct {
	Err error
	Sig Signal
}

func (e *SignalError) Error() string  { return e.Err.Error() }
func (e *SignalError) Unwrap() error  { return e.Err }
func (e *SignalError) Signal() Signal { return e.Sig }

// signalOf extracts the signal from an error chain: the first Signaler's, as
// errors.As finds it, without reflection unless an error met before it has
// an As method.
func signalOf(err error) Signal {
	sg, found, ok := firstSignaler(err)
	if !ok {
		return signalAs(err)
	}
	if found {
		return sg.Signal()
	}
	return Signal{}
}

// signalAs is signalOf by errors.As, whose target escapes: a function of
// its own, so that the walk's result does not.
func signalAs(err error) Signal {
	var sg Signaler
	if errors.As(err, &sg) {
		return sg.Signal()
	}
	return Signal{}
}

// firstSignaler finds the first Signaler in err's tree in errors.As's order
// (found). ok is false when an error with an As method came first: then only
// errors.As can tell.
func firstSignaler(err error) (sg Signaler, found, ok bool) {
	for err != nil {
		switch e := err.(type) {
		case *SignalError:
			return e, true, true
		case *GiveUpError:
			if sg, found, ok := firstSignaler(e.Reason); found || !ok {
				return sg, found, ok
			}
			err = e.Last
			continue
		case *net.OpError:
			err = e.Err
			continue
		case *url.Error:
			err = e.Err
			continue
		case *os.SyscallError:
			err = e.Err
			continue
		case syscall.Errno:
			return nil, false, true
		case Signaler:
			return e, true, true
		}
		if _, isAs := err.(interface{ As(any) bool }); isAs {
			return nil, false, false
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				if sg, found, ok := firstSignaler(e); found || !ok {
					return sg, found, ok
				}
			}
			return nil, false, true
		default:
			return nil, false, true
		}
	}
	return nil, false, true
}
