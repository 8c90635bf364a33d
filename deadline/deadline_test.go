package deadline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/wire"
)

func TestAttempt(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name string
		ctx  context.Context
		want int
	}{
		{"none", bg, 1},
		{"first try", deadline.WithAttempt(bg, 1), 1},
		{"retry", deadline.WithAttempt(bg, 3), 3},
		{"zero clamps to 1", deadline.WithAttempt(bg, 0), 1},
		{"negative clamps to 1", deadline.WithAttempt(bg, -7), 1},
		{"huge clamps", deadline.WithAttempt(bg, wire.MaxAttempt+5), wire.MaxAttempt},
		{"innermost wins", deadline.WithAttempt(deadline.WithAttempt(bg, 2), 5), 5},
		{"survives other values", context.WithValue(deadline.WithAttempt(bg, 4), struct{}{}, 9), 4},
	}
	for _, tt := range tests {
		if got := deadline.Attempt(tt.ctx); got != tt.want {
			t.Errorf("%s: Attempt = %d; want %d", tt.name, got, tt.want)
		}
	}
}

func TestCriticality(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name string
		ctx  context.Context
		want wire.Criticality
	}{
		{"none", bg, wire.Critical},
		{"sheddable", deadline.WithCriticality(bg, wire.Sheddable), wire.Sheddable},
		{"critical-plus", deadline.WithCriticality(bg, wire.CriticalPlus), wire.CriticalPlus},
		{"innermost wins", deadline.WithCriticality(deadline.WithCriticality(bg, wire.Sheddable), wire.SheddablePlus), wire.SheddablePlus},
		{"independent of attempt", deadline.WithAttempt(deadline.WithCriticality(bg, wire.Sheddable), 2), wire.Sheddable},
		// A plain int8 under another key must not be mistaken for it.
		{"foreign value", context.WithValue(bg, struct{}{}, int8(-2)), wire.Critical},
	}
	for _, tt := range tests {
		if got := deadline.Criticality(tt.ctx); got != tt.want {
			t.Errorf("%s: Criticality = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestRemaining(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	withDeadline := func(d time.Duration) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(d))
		t.Cleanup(cancel)
		return ctx
	}
	tests := []struct {
		name   string
		ctx    context.Context
		want   time.Duration
		wantOK bool
	}{
		{"no deadline", context.Background(), 0, false},
		{"300ms left", withDeadline(300 * time.Millisecond), 300 * time.Millisecond, true},
		{"exactly now", withDeadline(0), 0, true},
		{"passed", withDeadline(-time.Second), -time.Second, true},
		{"through values", deadline.WithAttempt(withDeadline(time.Second), 2), time.Second, true},
	}
	for _, tt := range tests {
		got, ok := deadline.Remaining(tt.ctx, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: Remaining = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func ExampleRemaining() {
	now := time.Unix(0, 0)
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(230*time.Millisecond))
	defer cancel()
	ctx = deadline.WithAttempt(ctx, 2)
	left, ok := deadline.Remaining(ctx, now.Add(40*time.Millisecond))
	fmt.Println(left, ok, deadline.Attempt(ctx), deadline.Criticality(ctx))
	// Output: 190ms true 2 critical
}
