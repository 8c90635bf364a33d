package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/redistest"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
)

// TestWithRetrier drives two retriers, each with its own fleet budget on
// the same key, against a dependency that always fails: together they stop
// retrying once the shared pool (500 tokens, earned by a filler) is spent;
// then the fleet kill switch turns retries off in both.
func TestWithRetrier(t *testing.T) {
	leakcheck.Check(t)
	srv := redistest.Start(t)
	ctx := t.Context()
	policy, err := retry.Preset("aws-2026")
	if err != nil {
		t.Fatal(err)
	}
	policy.Backoff = backoff.Policy{Kind: backoff.None}
	failing := errors.New("unavailable")
	transient := retry.ClassifierFunc(func(err error) (retry.Class, bool) {
		if errors.Is(err, failing) {
			return retry.Transient, true
		}
		return 0, false
	})
	credit(t, srv.Addr(), "retrier", 500)
	dials := new(killswitch.Dials)
	var retriers [2]*retry.Retrier
	for i := range retriers {
		b, _ := newBudget(t, srv.Addr(), Config{Key: "retrier", Spec: policy.Budget, MaxWait: hostspeed.Scale(20 * time.Millisecond)})
		retriers[i] = retry.MustNew(policy, retry.WithBudget(b), retry.WithClassifiers(transient), retry.WithDials(dials))
	}
	logger, _ := testLogger()
	w, err := Watch(newClient(t, srv.Addr()), "retrier", dials, WatchConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })

	attempts, exhausted := 0, 0
	for i := range 200 {
		err := retry.Do(ctx, retriers[i%2], func(context.Context) error {
			attempts++
			return failing
		})
		if errors.Is(err, retry.ErrBudgetExhausted) {
			exhausted++
		}
	}
	retries := attempts - 200
	// 500 tokens at 14 a retry: 35, and not one more (nothing was earned).
	t.Logf("%d retries for 200 requests, %d stopped by the shared budget", retries, exhausted)
	if retries > 500/14 || retries < 30 || exhausted == 0 {
		t.Errorf("%d retries, %d requests stopped by the budget; want at most 35", retries, exhausted)
	}

	if _, err := SetDials(ctx, newClient(t, srv.Addr()), "retrier", DialsChange{RetriesOff: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(time.Second), "the kill switch", dials.RetriesDisabled)
	err = retry.Do(ctx, retriers[0], func(context.Context) error { return failing })
	if !errors.Is(err, retry.ErrRetriesDisabled) {
		t.Errorf("with retries off: %v", err)
	}
}
