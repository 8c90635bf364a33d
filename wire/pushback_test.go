package wire

import (
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	tests := []struct {
		v      string
		want   time.Duration
		wantOK bool
	}{
		// delay-seconds.
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{"0120", 2 * time.Minute, true},
		{"86400", MaxPushback, true},
		// Huge values saturate: 484,289 hours was once seen in the wild.
		{"86401", MaxPushback, true},
		{"1743440400", MaxPushback, true},
		{"18446744073709551616", MaxPushback, true}, // 2^64
		{strings.Repeat("9", 10_000), MaxPushback, true},
		// HTTP-date, preferred form.
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0, true},
		{"Wed, 21 Oct 2015 07:28:30 GMT", 30 * time.Second, true},
		{"Wed, 21 Oct 2015 08:28:00 GMT", time.Hour, true},
		{"Tue, 20 Oct 2015 07:28:00 GMT", 0, true}, // in the past
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", MaxPushback, true},
		// HTTP-date, obsolete forms.
		{"Wednesday, 21-Oct-15 07:29:00 GMT", time.Minute, true},
		{"Wed Oct 21 07:28:05 2015", 5 * time.Second, true},
		{"Wed Oct  1 07:28:05 2015", 0, true},
		// Malformed.
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{" 120", 0, false},
		{"120 ", 0, false},
		{"\t120", 0, false},
		{"1 20", 0, false},
		{"١٢", 0, false}, // Arabic-Indic digits
		{"１２", 0, false}, // fullwidth digits
		{"12١", 0, false},
		{"soon", 0, false},
		{"Wed", 0, false},
		{"Wed, 21 Oct 2015 07:28:00", 0, false},
		{"Wed, 21 Oct 2015 07:28:00 GMT ", 0, false},
		{" Wed, 21 Oct 2015 07:28:00 GMT", 0, false},
		{"Wed, 32 Oct 2015 07:28:00 GMT", 0, false},
		{"2015-10-21T07:28:00Z", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.v, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseRetryAfterMonotonicNow(t *testing.T) {
	// A time.Now() reading carries a monotonic clock; the date has none. The
	// result must still be the wall-clock difference.
	now := time.Now()
	date := now.Add(90 * time.Second).UTC().Format(imfFixdate)
	got, ok := ParseRetryAfter(date, now)
	if !ok || got <= 88*time.Second || got > 90*time.Second {
		t.Errorf("ParseRetryAfter(%q, now) = %v, %v; want about 89s, true", date, got, ok)
	}
}

func TestParseMillis(t *testing.T) {
	tests := []struct {
		v      string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"1", time.Millisecond, true},
		{"250", 250 * time.Millisecond, true},
		{"000250", 250 * time.Millisecond, true},
		{"5000", 5 * time.Second, true},
		{"86400000", MaxPushback, true},
		{"86400001", MaxPushback, true},
		{"1743440400000", MaxPushback, true}, // 484,289 hours
		{"9223372036854775807", MaxPushback, true},
		{"99999999999999999999999", MaxPushback, true},
		{strings.Repeat("7", 10_000), MaxPushback, true},
		{"", 0, false},
		{"-1", 0, false}, // gRFC A6: do not retry
		{"-0", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1\n", 0, false},
		{"١٢", 0, false},
		{"1_000", 0, false},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseMillis(tt.v)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseMillis(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
		}
	}
}
