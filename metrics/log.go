package metrics

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// LogHooks returns hooks that log a retrier's retries and give-ups to
// log (nil: slog.Default()):
//
//	retry granted                                    Debug  "stormguard: retrying"  attempt, delay
//	gave up: not retryable, or the caller cancelled  Debug  "stormguard: gave up"   reason, attempts, error
//	gave up for any other reason (attempts, budget,  Info   "stormguard: gave up"   reason, attempts, error
//	deadline, server said stop, retries disabled)
//
// so that at Info a log shows only the give-ups that say something about
// the dependency or the defenses, not every 404. Attempts themselves are
// not logged: count them with [RetryHooks]. A record below the logger's
// level costs one Enabled check and no allocation.
func LogHooks(log *slog.Logger) retry.Hooks {
	if log == nil {
		log = slog.Default()
	}
	return retry.Hooks{
		OnRetry: func(attempt int, delay time.Duration) {
			ctx := context.Background()
			if log.Enabled(ctx, slog.LevelDebug) {
				log.LogAttrs(ctx, slog.LevelDebug, "stormguard: retrying",
					slog.Int("attempt", attempt), slog.Duration("delay", delay))
			}
		},
		OnGiveUp: func(reason error, attempts int, last error) {
			ctx := context.Background()
			level := slog.LevelInfo
			if errors.Is(reason, retry.ErrNotRetryable) || errors.Is(reason, retry.ErrCanceled) {
				level = slog.LevelDebug
			}
			if log.Enabled(ctx, level) {
				log.LogAttrs(ctx, level, "stormguard: gave up",
					slog.String("reason", reason.Error()), slog.Int("attempts", attempts), slog.Any("error", last))
			}
		},
	}
}
