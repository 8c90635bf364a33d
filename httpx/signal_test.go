package httpx_test

import (
	"net/http"
	"net/textproto"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

func TestParseSignal(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	push := func(d time.Duration) retry.Signal { return retry.Signal{Pushback: d, HasPushback: true} }
	tests := []struct {
		name   string
		header http.Header
		want   retry.Signal
	}{
		{"none", http.Header{}, retry.Signal{}},
		{"Retry-After seconds", http.Header{"Retry-After": {"2"}}, push(2 * time.Second)},
		{"Retry-After date", http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:29:30 GMT"}}, push(90 * time.Second)},
		{"Retry-After past date", http.Header{"Retry-After": {"Tue, 20 Oct 2015 07:28:00 GMT"}}, push(0)},
		{"Retry-After negative", http.Header{"Retry-After": {"-5"}}, retry.Signal{BadPushback: true}},
		{"Retry-After malformed", http.Header{"Retry-After": {"soon"}}, retry.Signal{BadPushback: true}},
		{"Retry-After huge saturates", http.Header{"Retry-After": {"1743440400"}}, push(wire.MaxPushback)},
		{"X-Amz-Retry-After", http.Header{"X-Amz-Retry-After": {"1500"}}, push(1500 * time.Millisecond)},
		{"X-Amz-Retry-After malformed ignored", http.Header{"X-Amz-Retry-After": {"-1"}}, retry.Signal{}},
		{"both: the longer wins", http.Header{"Retry-After": {"1"}, "X-Amz-Retry-After": {"1500"}}, push(1500 * time.Millisecond)},
		{"both: the longer wins, other way", http.Header{"Retry-After": {"2"}, "X-Amz-Retry-After": {"1500"}}, push(2 * time.Second)},
		{"overload service", http.Header{"Stormguard-Overload": {"Service"}}, retry.Signal{Overload: wire.OverloadService}},
		{"overload instance", http.Header{"Stormguard-Overload": {"instance"}}, retry.Signal{Overload: wire.OverloadInstance}},
		{"overload unknown is instance", http.Header{"Stormguard-Overload": {"meltdown"}}, retry.Signal{Overload: wire.OverloadInstance}},
		{"overload none", http.Header{"Stormguard-Overload": {"none"}}, retry.Signal{}},
		{"exhausted 1", http.Header{"Stormguard-Retries-Exhausted": {"1"}}, retry.Signal{Exhausted: true}},
		{"exhausted true", http.Header{"Stormguard-Retries-Exhausted": {"TRUE"}}, retry.Signal{Exhausted: true}},
		{"exhausted other", http.Header{"Stormguard-Retries-Exhausted": {"yes"}}, retry.Signal{}},
	}
	for _, tt := range tests {
		if got := httpx.ParseSignal(tt.header, now); got != tt.want {
			t.Errorf("%s: ParseSignal(%v) = %+v, want %+v", tt.name, tt.header, got, tt.want)
		}
	}
}

// TestHeaderNamesCanonical: the header names ParseSignal and the Transport
// look up directly (first) are in canonical form, as net/http stores them.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, k := range []string{wire.HeaderRetryAfter, wire.HeaderAmzRetryAfter, wire.HeaderOverload, wire.HeaderRetriesExhausted,
		wire.HeaderAttempt, wire.HeaderTimeout, wire.HeaderCriticality, httpx.HeaderSuperseded} {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}
