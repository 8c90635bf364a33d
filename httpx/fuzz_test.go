package httpx_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/wire"
)

// FuzzParseSignal checks ParseSignal's invariants on any header values
// received at any time: it never panics and leaves the header alone; a
// pushback lies within [0, wire.MaxPushback] and is the longer of the
// well-formed Retry-After and X-Amz-Retry-After; a Retry-After that wire
// refuses, and only that, is bad; a malformed X-Amz-Retry-After is
// ignored; the overload and retries-exhausted signals agree with wire's
// parsers (an unknown overload value counts as instance).
func FuzzParseSignal(f *testing.F) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC).Unix()
	f.Add("2", "", "", "", now)
	f.Add("Wed, 21 Oct 2015 07:29:30 GMT", "1500", "instance", "1", now)
	f.Add("Wednesday, 21-Oct-15 07:29:30 GMT", "", "Service", "TRUE", now)
	f.Add("Wed Oct 21 07:29:30 2015", "x", "meltdown", "yes", now)
	f.Add("-5", "-1", "none", "0", now)
	f.Add("1743440400", "99999999999999999999", "", "", int64(0))
	f.Add("soon", "1500", "", "", int64(-1<<62))
	f.Add(" 2", "2 ", "", "", int64(1<<62))
	f.Fuzz(func(t *testing.T, retryAfter, amz, overload, exhausted string, unix int64) {
		at := time.Unix(unix, 0)
		h := http.Header{}
		for k, v := range map[string]string{wire.HeaderRetryAfter: retryAfter, wire.HeaderAmzRetryAfter: amz,
			wire.HeaderOverload: overload, wire.HeaderRetriesExhausted: exhausted} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		orig := h.Clone()
		s := httpx.ParseSignal(h, at)
		if !reflect.DeepEqual(h, orig) {
			t.Fatalf("ParseSignal changed the header: %v → %v", orig, h)
		}
		if s.HasPushback && (s.Pushback < 0 || s.Pushback > wire.MaxPushback) {
			t.Fatalf("pushback %v outside [0, %v]", s.Pushback, wire.MaxPushback)
		}
		if !s.HasPushback && s.Pushback != 0 {
			t.Fatalf("pushback %v without HasPushback", s.Pushback)
		}
		ra, raOK := wire.ParseRetryAfter(retryAfter, at)
		ms, msOK := wire.ParseMillis(amz)
		if s.BadPushback != (retryAfter != "" && !raOK) {
			t.Fatalf("Retry-After %q: bad %v; wire.ParseRetryAfter ok %v", retryAfter, s.BadPushback, raOK)
		}
		var want time.Duration
		has := false
		if retryAfter != "" && raOK {
			want, has = ra, true
		}
		if amz != "" && msOK && (!has || ms > want) {
			want, has = ms, true
		}
		if s.HasPushback != has || s.Pushback != want {
			t.Fatalf("Retry-After %q, X-Amz-Retry-After %q: pushback %v (has %v); want %v (has %v)",
				retryAfter, amz, s.Pushback, s.HasPushback, want, has)
		}
		wantO := wire.OverloadNone
		if overload != "" {
			o, ok := wire.ParseOverload(overload)
			if !ok {
				o = wire.OverloadInstance
			}
			wantO = o
		}
		if s.Overload != wantO {
			t.Fatalf("overload %q: %v; want %v", overload, s.Overload, wantO)
		}
		if s.Overload != wire.OverloadNone && s.Overload != wire.OverloadInstance && s.Overload != wire.OverloadService {
			t.Fatalf("overload %q: %v is not a known value", overload, s.Overload)
		}
		if s.Exhausted != wire.ParseExhausted(exhausted) {
			t.Fatalf("exhausted %q: %v", exhausted, s.Exhausted)
		}
	})
}
