package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestStopsAbove: the rule "retry at one layer", as one table, and
// GiveUpError.RetryClass asking it.
func TestStopsAbove(t *testing.T) {
	reasons := []error{ErrAttemptsExhausted, ErrBudgetExhausted, ErrDeadline, ErrNotRetryable, ErrServerSaidStop,
		ErrRetriesDisabled, ErrCanceled, ErrRetryDeclined, ErrBreakerOpen}
	// want[reason] for one attempt (or none); after more than one attempt
	// every reason stops the layers above as RetriesExhausted.
	want := map[error]struct {
		stop bool
		cls  Class
	}{
		ErrBudgetExhausted: {true, RetriesExhausted},
		ErrRetriesDisabled: {true, RetriesExhausted},
		ErrBreakerOpen:     {true, RetriesExhausted},
		ErrServerSaidStop:  {true, ServiceOverloaded},
	}
	last := &SignalError{Err: io.ErrUnexpectedEOF} // Transient on its own
	for _, reason := range reasons {
		for _, attempts := range []int{0, 1, 2, 3} {
			w := want[reason]
			if attempts > 1 {
				w.stop, w.cls = true, RetriesExhausted
			}
			cls, stop := StopsAbove(reason, attempts)
			if stop != w.stop || (stop && cls != w.cls) {
				t.Errorf("StopsAbove(%v, %d) = %v, %v; want %v, %v", reason, attempts, cls, stop, w.cls, w.stop)
			}
			if got := stopsAboveWrapped(reason, attempts); got != stop {
				t.Errorf("StopsAbove(wrapped %v, %d) = %v, want %v", reason, attempts, got, stop)
			}
			wantClass := w.cls
			if !w.stop {
				wantClass = Transient // the last error's own class
			}
			g := &GiveUpError{Reason: reason, Last: last, Attempts: attempts}
			if got := g.RetryClass(); got != wantClass {
				t.Errorf("GiveUpError{%v, %d attempts}.RetryClass() = %v, want %v", reason, attempts, got, wantClass)
			}
		}
	}
}

// stopsAboveWrapped asks StopsAbove about reason wrapped in another error.
func stopsAboveWrapped(reason error, attempts int) bool {
	_, stop := StopsAbove(fmt.Errorf("wrapped: %w", reason), attempts)
	return stop
}

// TestClassifyAttempt: the cancellation rule.
func TestClassifyAttempt(t *testing.T) {
	r := MustNew(Policy{MaxAttempts: 3})
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want Class
	}{
		{"caller live, transient", context.Background(), io.ErrUnexpectedEOF, Transient},
		{"caller live, not retryable", context.Background(), errors.New("bad"), NeverRetry},
		{"caller live, a deadline it did not cause", context.Background(), context.DeadlineExceeded, Timeout},
		{"caller live, a cancellation it did not cause", context.Background(), fmt.Errorf("server: %w", context.Canceled), Timeout},
		{"caller live, a classed Canceled", context.Background(), classedErr(Canceled), Timeout},
		{"caller done, its own cancellation", canceled, context.Canceled, Canceled},
		{"caller done, whatever the error", canceled, io.ErrUnexpectedEOF, Canceled},
		{"caller done, a server's overload", canceled, classedErr(ServiceOverloaded), Canceled},
	}
	for _, tt := range tests {
		if got := r.ClassifyAttempt(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: ClassifyAttempt = %v, want %v", tt.name, got, tt.want)
		}
	}
}
