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
	"testing"

	"github.com/stormguard/stormguard/wire"
)

// Error types for the classification table: each has one of the methods
// the default classifier looks for, or a custom Is or As method.

// ptrStatus is a pointer-receiver status error that wraps a cause, like
// httpx.StatusError.
type ptrStatus struct {
	code int
	err  error
}

func (e *ptrStatus) Error() string   { return fmt.Sprintf("status %d", e.code) }
func (e *ptrStatus) HTTPStatus() int { return e.code }
func (e *ptrStatus) Unwrap() error   { return e.err }

type classedErr Class

func (c classedErr) Error() string     { return "classed " + Class(c).String() }
func (c classedErr) RetryClass() Class { return Class(c) }

// netErr is a net.Error with a chosen Timeout().
type netErr struct{ timeout bool }

func (e netErr) Error() string   { return fmt.Sprintf("net error timeout=%v", e.timeout) }
func (e netErr) Timeout() bool   { return e.timeout }
func (e netErr) Temporary() bool { return false }

// isReset says it is syscall.ECONNRESET through an Is method.
type isReset struct{}

func (isReset) Error() string        { return "is reset" }
func (isReset) Is(target error) bool { return target == syscall.ECONNRESET }

// isCanceled says it is context.Canceled through an Is method.
type isCanceled struct{}

func (isCanceled) Error() string        { return "is canceled" }
func (isCanceled) Is(target error) bool { return target == context.Canceled }

// asThrottled fills a Classed target through an As method (and nothing else).
type asThrottled struct{}

func (asThrottled) Error() string { return "as throttled" }
func (asThrottled) As(target any) bool {
	if p, ok := target.(*Classed); ok {
		*p = classedErr(Throttling)
		return true
	}
	return false
}

// asExhausted fills a Signaler target with a retries-exhausted signal
// through an As method (and nothing else).
type asExhausted struct{}

func (asExhausted) Error() string { return "as exhausted" }
func (asExhausted) As(target any) bool {
	if p, ok := target.(*Signaler); ok {
		*p = &SignalError{Err: io.EOF, Sig: Signal{Exhausted: true}}
		return true
	}
	return false
}

// asNothing has an As method that never matches.
type asNothing struct{ err error }

func (e asNothing) Error() string { return "as nothing" }
func (e asNothing) As(any) bool   { return false }
func (e asNothing) Unwrap() error { return e.err }

// nilUnwrap unwraps to nil.
type nilUnwrap struct{}

func (nilUnwrap) Error() string { return "nil unwrap" }
func (nilUnwrap) Unwrap() error { return nil }

// multi unwraps to a list that may hold nils.
type multi []error

func (m multi) Error() string   { return "multi" }
func (m multi) Unwrap() []error { return m }

func wrap(err error) error { return fmt.Errorf("wrapped: %w", err) }

// classTable is the default classifier's behaviour on every kind of error
// it distinguishes. The wants were recorded from the errors.As-based
// implementation before it was replaced by the walk in class.go, so the
// table proves the walk classifies exactly as it did.
var classTable = []struct {
	name string
	err  error
	want Class
	ok   bool
}{
	// 1. the caller's cancellation and deadline, wherever they are in the tree
	{"canceled", context.Canceled, Canceled, true},
	{"deadline", context.DeadlineExceeded, Canceled, true},
	{"wrapped canceled", wrap(context.Canceled), Canceled, true},
	{"wrapped twice deadline", wrap(wrap(context.DeadlineExceeded)), Canceled, true},
	{"joined deadline", errors.Join(errors.New("x"), context.DeadlineExceeded), Canceled, true},
	{"canceled under 503", &ptrStatus{503, context.Canceled}, Canceled, true},
	{"canceled under classed list", multi{classedErr(Transient), context.Canceled}, Canceled, true},
	{"canceled under service signal", &SignalError{Err: context.Canceled, Sig: Signal{Overload: wire.OverloadService}}, Canceled, true},
	{"Is canceled", isCanceled{}, Canceled, true},
	{"url deadline", &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, Canceled, true},
	{"giveup last canceled", &GiveUpError{Reason: ErrAttemptsExhausted, Last: context.Canceled, Attempts: 3}, Canceled, true},
	{"giveup reason ErrCanceled", &GiveUpError{Reason: ErrCanceled, Last: statusErr(503), Attempts: 1}, Transient, true},

	// 2. an error that states its class; the first in the tree wins
	{"classed throttling", classedErr(Throttling), Throttling, true},
	{"classed success", classedErr(Success), Success, true},
	{"classed never", wrap(classedErr(NeverRetry)), NeverRetry, true},
	{"classed beats status", &ptrStatus{503, classedErr(NeverRetry)}, NeverRetry, true},
	{"first classed wins", multi{classedErr(Timeout), classedErr(Throttling)}, Timeout, true},
	{"classed beats signal", &SignalError{Err: classedErr(Transient), Sig: Signal{Overload: wire.OverloadService}}, Transient, true},
	{"As classed", asThrottled{}, Throttling, true},
	{"wrapped As classed", wrap(asThrottled{}), Throttling, true},
	{"As classed after status", multi{statusErr(404), asThrottled{}}, Throttling, true},
	{"giveup 3 attempts", &GiveUpError{Reason: ErrAttemptsExhausted, Last: statusErr(503), Attempts: 3}, RetriesExhausted, true},
	{"giveup budget", &GiveUpError{Reason: ErrBudgetExhausted, Last: statusErr(503), Attempts: 1}, RetriesExhausted, true},
	{"giveup disabled", &GiveUpError{Reason: ErrRetriesDisabled, Last: statusErr(503), Attempts: 1}, RetriesExhausted, true},
	{"giveup breaker", &GiveUpError{Reason: ErrBreakerOpen, Attempts: 0}, RetriesExhausted, true},
	{"giveup server stop", &GiveUpError{Reason: ErrServerSaidStop, Last: statusErr(503), Attempts: 1}, ServiceOverloaded, true},
	{"giveup 1 attempt 404", &GiveUpError{Reason: ErrNotRetryable, Last: statusErr(404), Attempts: 1}, NeverRetry, true},
	{"giveup 1 attempt unknown", &GiveUpError{Reason: ErrNotRetryable, Last: errors.New("x"), Attempts: 1}, NeverRetry, true},
	{"giveup deadline 503", &GiveUpError{Reason: ErrDeadline, Last: wrap(statusErr(503)), Attempts: 1}, Transient, true},

	// 3. status codes, the first status in the tree wins, even unknown
	{"http 100", statusErr(100), 0, false},
	{"http 200", statusErr(200), Success, true},
	{"http 302", statusErr(302), Success, true},
	{"http 400", statusErr(400), NeverRetry, true},
	{"http 408", statusErr(408), Timeout, true},
	{"http 429", statusErr(429), Throttling, true},
	{"http 500", statusErr(500), Transient, true},
	{"http 501", statusErr(501), NeverRetry, true},
	{"http 503 wrapped", wrap(statusErr(503)), Transient, true},
	{"http 599", statusErr(599), NeverRetry, true},
	{"http 600", statusErr(600), 0, false},
	{"http 600 hides reset", &ptrStatus{600, syscall.ECONNRESET}, 0, false},
	{"http 404 beats reset", &ptrStatus{404, syscall.ECONNRESET}, NeverRetry, true},
	{"http beats grpc", multi{grpcErr(14), statusErr(404)}, NeverRetry, true},
	{"first http wins", multi{statusErr(404), statusErr(503)}, NeverRetry, true},
	{"http nil under list", multi{nil, statusErr(429)}, Throttling, true},
	{"grpc 0", grpcErr(0), Success, true},
	{"grpc 1", grpcErr(1), Canceled, true},
	{"grpc 3", grpcErr(3), NeverRetry, true},
	{"grpc 4", grpcErr(4), Timeout, true},
	{"grpc 8", grpcErr(8), Throttling, true},
	{"grpc 10", grpcErr(10), Transient, true},
	{"grpc 13", grpcErr(13), NeverRetry, true},
	{"grpc 14 wrapped", wrap(grpcErr(14)), Transient, true},
	{"grpc 16", grpcErr(16), NeverRetry, true},
	{"grpc 17", grpcErr(17), 0, false},
	{"grpc 17 hides timeout", multi{grpcErr(17), netErr{true}}, 0, false},
	{"grpc beats timeout", multi{netErr{true}, grpcErr(3)}, NeverRetry, true},

	// net errors: a timeout, then connection failures and *net.OpError
	{"os deadline", os.ErrDeadlineExceeded, Timeout, true},
	{"op timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, Timeout, true},
	{"url op timeout", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, Timeout, true},
	{"net timeout", netErr{true}, Timeout, true},
	{"first net error decides", multi{netErr{false}, netErr{true}}, 0, false},
	{"net no timeout", netErr{false}, 0, false},
	{"net no timeout then reset", multi{netErr{false}, syscall.ECONNRESET}, Transient, true},
	{"etimedout", syscall.ETIMEDOUT, Timeout, true},
	{"econnrefused", syscall.ECONNREFUSED, Transient, true},
	{"econnreset wrapped", wrap(syscall.ECONNRESET), Transient, true},
	{"econnaborted", syscall.ECONNABORTED, Transient, true},
	{"epipe", syscall.EPIPE, Transient, true},
	{"enoent", syscall.ENOENT, 0, false},
	{"op refused", &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, Transient, true},
	{"url op reset", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}}, Transient, true},
	{"op other errno", &net.OpError{Op: "dial", Err: syscall.ENOENT}, Transient, true},
	{"op opaque", &net.OpError{Op: "dial", Err: errors.New("opaque")}, Transient, true},
	{"wrapped op", wrap(&net.OpError{Op: "write", Err: errors.New("opaque")}), Transient, true},
	{"eof", io.EOF, Transient, true},
	{"unexpected eof", wrap(io.ErrUnexpectedEOF), Transient, true},
	{"net closed", net.ErrClosed, Transient, true},
	{"Is reset", isReset{}, Transient, true},
	{"dns not found", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, 0, false},
	{"dns timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, Timeout, true},

	// unknown errors
	{"plain", errors.New("validation failed"), 0, false},
	{"wrapped plain", wrap(errors.New("x")), 0, false},
	{"nil unwrap", nilUnwrap{}, 0, false},
	{"empty list", multi{}, 0, false},
	{"nils list", multi{nil, nil}, 0, false},
	{"As nothing", asNothing{}, 0, false},
	{"As nothing over 503", asNothing{statusErr(503)}, Transient, true},

	// 4. signals stop retryable or unknown errors, never others
	{"service overload 503", &SignalError{Err: statusErr(503), Sig: Signal{Overload: wire.OverloadService}}, ServiceOverloaded, true},
	{"instance overload 503", &SignalError{Err: statusErr(503), Sig: Signal{Overload: wire.OverloadInstance}}, Transient, true},
	{"bad pushback 429", &SignalError{Err: statusErr(429), Sig: Signal{BadPushback: true}}, ServiceOverloaded, true},
	{"exhausted 503", &SignalError{Err: statusErr(503), Sig: Signal{Exhausted: true}}, RetriesExhausted, true},
	{"exhausted and overload", &SignalError{Err: statusErr(503), Sig: Signal{Exhausted: true, Overload: wire.OverloadService}}, ServiceOverloaded, true},
	{"service overload 404", &SignalError{Err: statusErr(404), Sig: Signal{Overload: wire.OverloadService}}, NeverRetry, true},
	{"service overload unknown", &SignalError{Err: errors.New("opaque"), Sig: Signal{Overload: wire.OverloadService}}, ServiceOverloaded, true},
	{"empty signal unknown", &SignalError{Err: errors.New("opaque")}, 0, false},
	{"signal on reset", wrap(&SignalError{Err: syscall.ECONNRESET, Sig: Signal{Exhausted: true}}), RetriesExhausted, true},
	{"signal on 200", &SignalError{Err: statusErr(200), Sig: Signal{Exhausted: true}}, Success, true},
	{"first signal wins", &SignalError{Err: &SignalError{Err: statusErr(503), Sig: Signal{Exhausted: true}}}, Transient, true},
	{"inner signal when outer is first", &SignalError{Err: &SignalError{Err: statusErr(503)}, Sig: Signal{Exhausted: true}}, RetriesExhausted, true},
	{"signal in list", multi{statusErr(502), &SignalError{Err: io.EOF, Sig: Signal{BadPushback: true}}}, ServiceOverloaded, true},
	{"As signal", multi{asExhausted{}, statusErr(503)}, RetriesExhausted, true},
	{"As signal after a signal", multi{&SignalError{Err: statusErr(503)}, asExhausted{}}, Transient, true},
	{"giveup over signal", &GiveUpError{Reason: ErrAttemptsExhausted, Last: &SignalError{Err: statusErr(503), Sig: Signal{Overload: wire.OverloadService}}, Attempts: 2}, RetriesExhausted, true},
}

func TestDefaultClassifyTable(t *testing.T) {
	for _, tt := range classTable {
		got, ok := Default.Classify(tt.err)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Default.Classify(%v) = %v, %v; want %v, %v", tt.name, tt.err, got, ok, tt.want, tt.ok)
		}
	}
}

// TestWalkMatchesErrorsAs checks the walk against classifyAs, the same rules
// written with errors.Is and errors.As, and signalOf against errors.As, on
// every error of the table (for trees with an As method both take the
// errors.As path, so those rows check nothing new).
func TestWalkMatchesErrorsAs(t *testing.T) {
	for _, tt := range classTable {
		gotC, gotOK := defaultClassify(tt.err)
		wantC, wantOK := classifyAs(tt.err)
		if gotC != wantC || gotOK != wantOK {
			t.Errorf("%s: walk gives %v, %v; errors.As gives %v, %v", tt.name, gotC, gotOK, wantC, wantOK)
		}
		var want Signal
		var sg Signaler
		if errors.As(tt.err, &sg) {
			want = sg.Signal()
		}
		if got := signalOf(tt.err); got != want {
			t.Errorf("%s: signalOf = %+v, errors.As gives %+v", tt.name, got, want)
		}
	}
}

// TestClassifyCommonErrorsDoNotAllocate: the errors a retrier sees on the
// failing path, wrapped or not, are classified and their signals read
// without allocating.
func TestClassifyCommonErrorsDoNotAllocate(t *testing.T) {
	common := []struct {
		name string
		err  error
	}{
		{"canceled", context.Canceled},
		{"wrapped deadline", wrap(context.DeadlineExceeded)},
		{"url deadline", &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}},
		{"op refused", &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}},
		{"url op reset", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}}},
		{"op timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}},
		{"eof", wrap(io.EOF)},
		{"status 503", &ptrStatus{code: 503}},
		{"signal 503", &SignalError{Err: &ptrStatus{code: 503}, Sig: Signal{Overload: wire.OverloadService}}},
		{"wrapped signal 429", wrap(&SignalError{Err: &ptrStatus{code: 429}, Sig: Signal{HasPushback: true}})},
		{"grpc unavailable", wrap(grpcErr(14))},
		{"classed", classedErr(Throttling)},
		{"giveup", &GiveUpError{Reason: ErrAttemptsExhausted, Last: &ptrStatus{code: 503}, Attempts: 3}},
		{"giveup 1 attempt", &GiveUpError{Reason: ErrDeadline, Last: wrap(io.EOF), Attempts: 1}},
		{"joined", errors.Join(io.ErrUnexpectedEOF, &ptrStatus{code: 502})},
		{"plain", errors.New("unknown")},
	}
	r := MustNew(Policy{})
	for _, tt := range common {
		var sink Class
		var sig Signal
		allocs := testing.AllocsPerRun(100, func() {
			sink = r.Classify(tt.err)
			sig = signalOf(tt.err)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per classification, want 0 (class %v, signal %+v)", tt.name, allocs, sink, sig)
		}
	}
}

// BenchmarkDefaultClassify: the walk against the same rules written with
// errors.Is and errors.As, on errors a retrier commonly sees.
func BenchmarkDefaultClassify(b *testing.B) {
	errs := []struct {
		name string
		err  error
	}{
		{"timeout", netErr{true}},
		{"op-refused", &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}},
		{"signal-503", &SignalError{Err: &ptrStatus{code: 503}, Sig: Signal{HasPushback: true}}},
	}
	for _, e := range errs {
		for _, impl := range []struct {
			name string
			f    func(error) (Class, bool)
		}{{"walk", defaultClassify}, {"errors.As", classifyAs}} {
			b.Run(e.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					impl.f(e.err)
				}
			})
		}
	}
}
