package wire

import (
	"math"
	"strings"
	"testing"
)

func TestFormatAttempt(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{1, "1"},
		{2, "2"},
		{10, "10"},
		{MaxAttempt, "1000000"},
		// Out of range: clamped.
		{0, "1"},
		{-5, "1"},
		{math.MinInt, "1"},
		{MaxAttempt + 1, "1000000"},
		{math.MaxInt, "1000000"},
	}
	for _, tt := range tests {
		if got := FormatAttempt(tt.n); got != tt.want {
			t.Errorf("FormatAttempt(%d) = %q; want %q", tt.n, got, tt.want)
		}
		if got := string(AppendAttempt([]byte("a="), tt.n)); got != "a="+tt.want {
			t.Errorf("AppendAttempt(%q, %d) = %q; want %q", "a=", tt.n, got, "a="+tt.want)
		}
	}
}

func TestParseAttempt(t *testing.T) {
	tests := []struct {
		s      string
		want   int
		wantOK bool
	}{
		{"1", 1, true},
		{"2", 2, true},
		{"42", 42, true},
		{"01", 1, true},
		{"0000001", 1, true},
		{"999999", 999_999, true},
		{"1000000", MaxAttempt, true},
		// Out of range.
		{"0", 0, false},
		{"0000000", 0, false},
		{"1000001", 0, false},
		{"9999999", 0, false},
		{"10000000", 0, false},
		{"00000001", 0, false}, // more than 7 digits
		{"18446744073709551617", 0, false},
		{strings.Repeat("9", 1000), 0, false},
		// Malformed.
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"\t1", 0, false},
		{"١٢", 0, false},
		{"１", 0, false},
		{"one", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseAttempt(tt.s)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseAttempt(%q) = %d, %v; want %d, %v", tt.s, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAttemptFromPrevious(t *testing.T) {
	tests := []struct {
		s      string
		want   int
		wantOK bool
	}{
		{"0", 1, true},
		{"1", 2, true},
		{"4", 5, true},
		{"999999", MaxAttempt, true},
		{"1000000", 0, false},
		{"10000000", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{" 1", 0, false},
		{"١", 0, false},
	}
	for _, tt := range tests {
		got, ok := AttemptFromPrevious(tt.s)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("AttemptFromPrevious(%q) = %d, %v; want %d, %v", tt.s, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAttemptRoundTrip(t *testing.T) {
	for _, n := range []int{1, 2, 3, 9, 10, 99, 100, 12345, MaxAttempt - 1, MaxAttempt} {
		if got, ok := ParseAttempt(FormatAttempt(n)); got != n || !ok {
			t.Errorf("ParseAttempt(FormatAttempt(%d)) = %d, %v; want %d, true", n, got, ok, n)
		}
	}
}
