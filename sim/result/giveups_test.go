package result

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stormguard/stormguard/retry"
)

// TestReasonOf: each reason of package retry, bare or wrapped, lands in
// its counter; a canceled caller counts as a deadline, and an unknown
// reason as attempts exhausted.
func TestReasonOf(t *testing.T) {
	for _, c := range []struct {
		reason error
		want   GiveUps
	}{
		{retry.ErrAttemptsExhausted, GiveUps{Attempts: 1}},
		{retry.ErrBudgetExhausted, GiveUps{Budget: 1}},
		{retry.ErrDeadline, GiveUps{Deadline: 1}},
		{retry.ErrCanceled, GiveUps{Deadline: 1}},
		{retry.ErrNotRetryable, GiveUps{NotRetryable: 1}},
		{retry.ErrServerSaidStop, GiveUps{ServerStop: 1}},
		{retry.ErrRetriesDisabled, GiveUps{Disabled: 1}},
		{retry.ErrRetryDeclined, GiveUps{Declined: 1}},
		{retry.ErrBreakerOpen, GiveUps{BreakerOpen: 1}},
		{errors.New("something else"), GiveUps{Attempts: 1}},
		{nil, GiveUps{Attempts: 1}},
	} {
		for _, reason := range []error{c.reason, fmt.Errorf("wrapped: %w", c.reason)} {
			var got GiveUps
			got.Inc(ReasonOf(reason))
			if got != c.want {
				t.Errorf("Inc(ReasonOf(%v)) = %+v, want %+v", reason, got, c.want)
			}
			if n := got.Of(reason); n != 1 {
				t.Errorf("Of(%v) = %v after one Inc, want 1", reason, n)
			}
		}
	}
}
