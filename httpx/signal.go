package httpx

import (
	"net/http"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// ParseSignal reads the server's retry signals from a response header
// received at time now:
//
//   - Retry-After (seconds or an HTTP-date, [wire.ParseRetryAfter]) sets the
//     pushback; a malformed or negative value sets BadPushback, which tells
//     the retrier not to retry;
//   - X-Amz-Retry-After (milliseconds, [wire.ParseMillis]) sets the pushback
//     too; a malformed value is ignored, as the AWS SDKs do. When both
//     headers hold a delay, the longer one wins;
//   - Stormguard-Overload sets Overload; a value this version does not know
//     counts as [wire.OverloadInstance] (the server is overloaded, but did not
//     say the whole service is);
//   - Stormguard-Retries-Exhausted ([wire.ParseExhausted]) sets Exhausted.
func ParseSignal(h http.Header, now time.Time) retry.Signal {
	var s retry.Signal
	if v := first(h, wire.HeaderRetryAfter); v != "" {
		if d, ok := wire.ParseRetryAfter(v, now); ok {
			s.Pushback, s.HasPushback = d, true
		} else {
			s.BadPushback = true
		}
	}
	if v := first(h, wire.HeaderAmzRetryAfter); v != "" {
		if d, ok := wire.ParseMillis(v); ok && (!s.HasPushback || d > s.Pushback) {
			s.Pushback, s.HasPushback = d, true
		}
	}
	if v := first(h, wire.HeaderOverload); v != "" {
		o, ok := wire.ParseOverload(v)
		if !ok {
			o = wire.OverloadInstance
		}
		s.Overload = o
	}
	s.Exhausted = wire.ParseExhausted(first(h, wire.HeaderRetriesExhausted))
	return s
}

// first is h.Get(key) for a key already in canonical form (the wire
// package's header names are; TestHeaderNamesCanonical): the value is
// looked up directly, without canonicalising key again on every call.
func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
