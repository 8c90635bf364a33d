package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

func noWait(t testing.TB, hooks ...retry.Hooks) *retry.Retrier {
	t.Helper()
	var opts []retry.Option
	if len(hooks) > 0 {
		opts = append(opts, retry.WithHooks(retry.JoinHooks(hooks...)))
	}
	return retry.MustNew(retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.None}}, opts...)
}

func TestJoinHooksRunsEachInOrder(t *testing.T) {
	var got []string
	rec := func(name string) retry.Hooks {
		return retry.Hooks{
			OnAttempt: func(n int, c retry.Class, _ time.Duration) {
				got = append(got, fmt.Sprintf("%s attempt %d %v", name, n, c))
			},
			OnRetry:  func(n int, _ time.Duration) { got = append(got, fmt.Sprintf("%s retry %d", name, n)) },
			OnGiveUp: func(reason error, n int, _ error) { got = append(got, fmt.Sprintf("%s giveup %d %v", name, n, reason)) },
		}
	}
	r := noWait(t, rec("a"), retry.Hooks{}, rec("b"))
	err := retry.Do(context.Background(), r, script(retry.Transient, retry.NeverRetry))
	if !errors.Is(err, retry.ErrNotRetryable) {
		t.Fatal(err)
	}
	want := []string{
		"a attempt 1 transient", "b attempt 1 transient", "a retry 1", "b retry 1",
		"a attempt 2 never-retry", "b attempt 2 never-retry",
		"a giveup 2 error is not retryable", "b giveup 2 error is not retryable",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h := metrics.JoinHooks(); h.OnAttempt != nil || h.OnRetry != nil || h.OnGiveUp != nil {
		t.Error("JoinHooks() has hooks; want none, so that a retrier built with it keeps its fast path")
	}
}

func TestLogHooks(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	}))
	r := noWait(t, metrics.LogHooks(log))
	ctx := context.Background()
	_ = retry.Do(ctx, r, script(retry.Transient, retry.Transient, retry.Transient)) // attempts exhausted: Info
	_ = retry.Do(ctx, r, script(retry.NeverRetry))                                  // not retryable: Debug
	want := `level=DEBUG msg="stormguard: retrying" attempt=1 delay=0s
level=DEBUG msg="stormguard: retrying" attempt=2 delay=0s
level=INFO msg="stormguard: gave up" reason="attempts exhausted" attempts=3 error=transient
level=DEBUG msg="stormguard: gave up" reason="error is not retryable" attempts=1 error=never-retry
`
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Two retriers of one target share its series.
func TestRetryHooksShareATarget(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := metrics.Labels{Target: "db"}
	r1 := noWait(t, metrics.RetryHooks(reg, l))
	r2 := noWait(t, metrics.RetryHooks(reg, l))
	ctx := context.Background()
	_ = retry.Do(ctx, r1, script())
	_ = retry.Do(ctx, r2, script())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "stormguard_client_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && lp.GetValue() == "success" {
					if got := m.GetHistogram().GetSampleCount(); got != 2 {
						t.Errorf("successful requests = %v, want 2", got)
					}
					return
				}
			}
		}
	}
	t.Error("no stormguard_client_request_duration_seconds{outcome=\"success\"}")
}

// RetryHooks panics when the registry refuses its collectors for another
// reason than a duplicate.
func TestRetryHooksPanicsOnConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "stormguard_client_attempts_total", Help: "something else"}))
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	metrics.RetryHooks(reg, metrics.Labels{Target: "x"})
}

// On the success path retry.Do allocates nothing, with no hooks (the hooks
// are not even tested for) and with RetryHooks installed.
func TestHooksDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	for name, r := range map[string]*retry.Retrier{
		"none":    noWait(t),
		"metrics": noWait(t, metrics.RetryHooks(prometheus.NewRegistry(), metrics.Labels{Target: "t"})),
		"log":     noWait(t, metrics.LogHooks(slog.New(slog.DiscardHandler))),
	} {
		if n := testing.AllocsPerRun(1000, func() { _ = retry.Do(ctx, r, ok) }); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
