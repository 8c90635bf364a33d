package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// recorder returns hooks that append what they see, prefixed with name, to
// *log.
func recorder(name string, log *[]string) Hooks {
	return Hooks{
		OnAttempt: func(n int, c Class, _ time.Duration) {
			*log = append(*log, fmt.Sprintf("%s attempt %d %v", name, n, c))
		},
		OnRetry:  func(n int, _ time.Duration) { *log = append(*log, fmt.Sprintf("%s retry %d", name, n)) },
		OnGiveUp: func(_ error, n int, _ error) { *log = append(*log, fmt.Sprintf("%s giveup %d", name, n)) },
	}
}

func TestJoinHooks(t *testing.T) {
	tests := []struct {
		name string
		sets []string // recorders to join, in order; "" is the zero Hooks
		want []string
	}{
		{"none", nil, nil},
		{"only empty sets", []string{"", ""}, nil},
		{"one", []string{"a"}, []string{"a attempt 1 transient", "a retry 1", "a giveup 2"}},
		{"two in order, empty skipped", []string{"a", "", "b"}, []string{
			"a attempt 1 transient", "b attempt 1 transient",
			"a retry 1", "b retry 1",
			"a giveup 2", "b giveup 2",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var hs []Hooks
			for _, name := range tt.sets {
				if name == "" {
					hs = append(hs, Hooks{})
					continue
				}
				hs = append(hs, recorder(name, &got))
			}
			j := JoinHooks(hs...)
			if tt.want == nil {
				if j.OnAttempt != nil || j.OnRetry != nil || j.OnGiveUp != nil {
					t.Fatal("joined hooks are set; want the zero Hooks, so that a retrier keeps its fast path")
				}
				return
			}
			j.OnAttempt(1, Transient, 0)
			j.OnRetry(1, 0)
			j.OnGiveUp(ErrAttemptsExhausted, 2, errors.New("last"))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// Hooks from several sets, each with some hooks missing, all run on a
// retrier, and a retrier built with no hooks joined allocates nothing.
func TestJoinHooksOnARetrier(t *testing.T) {
	var attempts, retries, giveUps int
	r := MustNew(fast, WithHooks(JoinHooks(
		Hooks{OnAttempt: func(int, Class, time.Duration) { attempts++ }},
		Hooks{OnRetry: func(int, time.Duration) { retries++ }},
		Hooks{OnGiveUp: func(error, int, error) { giveUps++ }, OnAttempt: func(int, Class, time.Duration) { attempts++ }},
	)))
	_ = Do(context.Background(), r, func(context.Context) error { return statusErr(503) })
	if attempts != 6 || retries != 2 || giveUps != 1 {
		t.Errorf("hooks saw %d attempts, %d retries, %d give-ups; want 6 (3 twice), 2, 1", attempts, retries, giveUps)
	}
	bare := MustNew(fast, WithHooks(JoinHooks()))
	ok := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(100, func() { _ = Do(context.Background(), bare, ok) }); n != 0 {
		t.Errorf("Do with JoinHooks() allocates %v times per call; want 0", n)
	}
}
