package wire

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestFormatTimeout(t *testing.T) {
	tests := []struct {
		d      time.Duration
		want   string
		wantOK bool
	}{
		{0, "", false},
		{-1, "", false},
		{math.MinInt64, "", false},
		{1, "1n", true},
		{999, "999n", true},
		{99_999_999, "99999999n", true},
		{100_000_000, "100000u", true}, // 9 digits of ns: switch to µs
		{100_000_001, "100001u", true}, // rounded up
		{100 * time.Millisecond, "100000u", true},
		{250 * time.Millisecond, "250000u", true},
		{1500 * time.Millisecond, "1500000u", true},
		{1500*time.Millisecond + 1, "1500001u", true},
		{99_999_999 * time.Microsecond, "99999999u", true},
		{99_999_999*time.Microsecond + 1, "100000m", true}, // ⌈99,999,999.001 µs⌉ needs 9 digits
		{100 * time.Second, "100000m", true},
		{time.Hour, "3600000m", true},
		{30 * time.Hour, "108000S", true},
		{99_999_999 * time.Second, "99999999S", true},
		{99_999_999*time.Second + 1, "1666667M", true},
		{99_999_999 * time.Minute, "99999999M", true},
		{99_999_999*time.Minute + 1, "1666667H", true},
		{math.MaxInt64, "2562048H", true},
	}
	for _, tt := range tests {
		got, ok := FormatTimeout(tt.d)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("FormatTimeout(%d) = %q, %v; want %q, %v", int64(tt.d), got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAppendTimeout(t *testing.T) {
	dst := []byte("x=")
	got, ok := AppendTimeout(dst, 2*time.Second)
	if string(got) != "x=2000000u" || !ok {
		t.Errorf("AppendTimeout(%q, 2s) = %q, %v; want %q, true", dst, got, ok, "x=2000000u")
	}
	got, ok = AppendTimeout(dst, 0)
	if string(got) != "x=" || ok {
		t.Errorf("AppendTimeout(%q, 0) = %q, %v; want %q, false", dst, got, ok, "x=")
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		s      string
		want   time.Duration
		wantOK bool
	}{
		// Every unit.
		{"1n", time.Nanosecond, true},
		{"1u", time.Microsecond, true},
		{"1m", time.Millisecond, true},
		{"1S", time.Second, true},
		{"1M", time.Minute, true},
		{"1H", time.Hour, true},
		{"250m", 250 * time.Millisecond, true},
		{"1500000u", 1500 * time.Millisecond, true},
		// Boundaries.
		{"0n", 0, true},
		{"0H", 0, true},
		{"00000000S", 0, true},
		{"00000001S", time.Second, true},
		{"99999999n", 99_999_999, true},
		{"99999999S", 99_999_999 * time.Second, true},
		{"99999999M", 99_999_999 * time.Minute, true},
		{"2562047H", 2_562_047 * time.Hour, true},
		// Saturation: more than a time.Duration holds.
		{"2562048H", MaxTimeout, true},
		{"99999999H", MaxTimeout, true},
		// Malformed.
		{"", 0, false},
		{"n", 0, false},
		{"1", 0, false},
		{"10", 0, false},
		{"100000000n", 0, false}, // 9 digits
		{"000000001n", 0, false}, // 9 digits, even with leading zeros
		{"1s", 0, false},         // units are case-sensitive
		{"1h", 0, false},
		{"1U", 0, false},
		{"1ms", 0, false},
		{"1x", 0, false},
		{"-1S", 0, false},
		{"+1S", 0, false},
		{"1.5S", 0, false},
		{"1e3m", 0, false},
		{" 1S", 0, false},
		{"1S ", 0, false},
		{"1 S", 0, false},
		{"\t1S", 0, false},
		{"١٢S", 0, false}, // Arabic-Indic digits
		{"１S", 0, false},  // fullwidth digit
		{"1Ｓ", 0, false},  // fullwidth unit
		{"1S\x00", 0, false},
		{"0x1S", 0, false},
		{strings.Repeat("9", 100) + "S", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseTimeout(tt.s)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v, %v", tt.s, got, ok, tt.want, tt.wantOK)
		}
	}
}

// unitOf returns the duration of the unit that ends encoded timeout s.
func unitOf(t *testing.T, s string) time.Duration {
	t.Helper()
	for _, u := range timeoutUnits {
		if s[len(s)-1] == u.unit {
			return u.d
		}
	}
	t.Fatalf("timeout %q has no known unit", s)
	return 0
}

// checkTimeoutRoundTrip checks that d, encoded and decoded, comes back no
// shorter and at most one unit longer, in the finest unit that fits.
func checkTimeoutRoundTrip(t *testing.T, d time.Duration) {
	t.Helper()
	s, ok := FormatTimeout(d)
	if !ok {
		t.Fatalf("FormatTimeout(%d) = %q, false; want true", int64(d), s)
	}
	if len(s) < 2 || len(s) > 9 {
		t.Fatalf("FormatTimeout(%d) = %q: want 1 to 8 digits and a unit", int64(d), s)
	}
	got, ok := ParseTimeout(s)
	if !ok {
		t.Fatalf("ParseTimeout(FormatTimeout(%d) = %q) not ok", int64(d), s)
	}
	unit := unitOf(t, s)
	if got < d || got-d >= unit {
		t.Fatalf("ParseTimeout(FormatTimeout(%d) = %q) = %d: want in [d, d + %v)", int64(d), s, int64(got), unit)
	}
	// The finest unit was used: the next finer one would need 9 digits.
	for i, u := range timeoutUnits {
		if u.d == unit && i > 0 {
			if finer := timeoutUnits[i-1].d; (d-1)/finer+1 <= maxTimeoutValue {
				t.Fatalf("FormatTimeout(%d) = %q: unit %v fits too", int64(d), s, finer)
			}
		}
	}
}

func TestTimeoutRoundTrip(t *testing.T) {
	// Every unit boundary and its neighbours.
	for _, u := range timeoutUnits {
		bases := []time.Duration{u.d, 2 * u.d}
		if u.d <= math.MaxInt64/(maxTimeoutValue+1) { // not for hours: beyond time.Duration
			bases = append(bases, maxTimeoutValue*u.d, (maxTimeoutValue+1)*u.d)
		}
		for _, base := range bases {
			for delta := time.Duration(-2); delta <= 2; delta++ {
				if d := base + delta; d > 0 {
					checkTimeoutRoundTrip(t, d)
				}
			}
		}
	}
	checkTimeoutRoundTrip(t, math.MaxInt64)
	checkTimeoutRoundTrip(t, math.MaxInt64-1)

	// Random durations, log-uniform over the whole range.
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		bits := 1 + r.IntN(63)
		d := time.Duration(r.Uint64()>>(64-bits)) | 1
		checkTimeoutRoundTrip(t, d)
	}
}
