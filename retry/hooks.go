package retry

import (
	"context"
	"time"
)

// JoinHooks returns hooks that run each of hs's hooks in turn, in order;
// a nil hook is skipped. Use it to install several sets of hooks on one
// retrier (metrics.RetryHooks and metrics.LogHooks, say, or hooks of your
// own), since [WithHooks] takes one set. When only one set has a given
// hook, it is returned as it is, at no extra cost; when none has any, the
// result is the zero Hooks, so that a retrier built with it keeps the fast
// path of one without hooks.
func JoinHooks(hs ...Hooks) Hooks {
	var (
		onAttempt []func(int, Class, time.Duration)
		onRetry   []func(int, time.Duration)
		onGiveUp  []func(error, int, error)
		onEvent   []func(context.Context, Event)
	)
	for _, h := range hs {
		if h.OnAttempt != nil {
			onAttempt = append(onAttempt, h.OnAttempt)
		}
		if h.OnRetry != nil {
			onRetry = append(onRetry, h.OnRetry)
		}
		if h.OnGiveUp != nil {
			onGiveUp = append(onGiveUp, h.OnGiveUp)
		}
		if h.OnEvent != nil {
			onEvent = append(onEvent, h.OnEvent)
		}
	}
	var j Hooks
	switch len(onAttempt) {
	case 0:
	case 1:
		j.OnAttempt = onAttempt[0]
	default:
		j.OnAttempt = func(n int, c Class, d time.Duration) {
			for _, f := range onAttempt {
				f(n, c, d)
			}
		}
	}
	switch len(onRetry) {
	case 0:
	case 1:
		j.OnRetry = onRetry[0]
	default:
		j.OnRetry = func(n int, d time.Duration) {
			for _, f := range onRetry {
				f(n, d)
			}
		}
	}
	switch len(onGiveUp) {
	case 0:
	case 1:
		j.OnGiveUp = onGiveUp[0]
	default:
		j.OnGiveUp = func(reason error, n int, last error) {
			for _, f := range onGiveUp {
				f(reason, n, last)
			}
		}
	}
	switch len(onEvent) {
	case 0:
	case 1:
		j.OnEvent = onEvent[0]
	default:
		j.OnEvent = func(ctx context.Context, e Event) {
			for _, f := range onEvent {
				f(ctx, e)
			}
		}
	}
	return j
}
