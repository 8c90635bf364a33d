package retry

import (
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
)

// TestRetryProbability: a policy with RetryProbability p retries a failure
// that every other rule allows when the sample u < p, declines it
// otherwise without charging the budget, and jitters with u/p.
func TestRetryProbability(t *testing.T) {
	p30 := 0.3
	pol := Policy{MaxAttempts: 3, RetryProbability: &p30, Backoff: backoff.Policy{Kind: backoff.FullJitter},
		Budget: budget.Spec{Kind: budget.KindTokenBucket, Capacity: 1e6, RetryCost: 1}}
	r := MustNew(pol)
	level := func() float64 { return r.Budget().(*budget.TokenBucket).Level() }
	now := time.Unix(0, 0)
	for _, c := range []struct {
		u     float64
		retry bool
	}{{0, true}, {0.29, true}, {0.3, false}, {0.9, false}} {
		call := r.StartAt(now, time.Time{})
		before := level()
		d := r.EndAt(now, &call, Transient, Signal{}, c.u)
		if spent := before - level(); (spent > 0) != c.retry {
			t.Errorf("u %v: the budget paid %v for a retry %v", c.u, spent, d.Retry)
		}
		if d.Retry != c.retry {
			t.Errorf("u %v: retry %v, want %v", c.u, d.Retry, c.retry)
		}
		if !c.retry && !errors.Is(d.Reason, ErrRetryDeclined) {
			t.Errorf("u %v: reason %v, want ErrRetryDeclined", c.u, d.Reason)
		}
	}
	// The share of retries over many uniform samples is p.
	n, retried := 10000, 0
	for i := range n {
		call := r.StartAt(now, time.Time{})
		if r.EndAt(now, &call, Transient, Signal{}, (float64(i)+0.5)/float64(n)).Retry {
			retried++
		}
	}
	if got := float64(retried) / float64(n); got < 0.29 || got > 0.31 {
		t.Errorf("share retried %.3f, want 0.3", got)
	}
	// Out of range is refused.
	bad := 1.5
	if err := (Policy{RetryProbability: &bad}).Validate(); err == nil {
		t.Error("retry_probability 1.5 validated")
	}
}
