package wire

import (
	"math"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The oracles below decode the same formats a second way, with the standard
// library's general-purpose parsers, so that the fuzzers compare two
// implementations instead of restating one.

// allASCIIDigits reports whether s is a non-empty string of ASCII digits.
func allASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// decimalTimes returns digits × unit, saturated at limit, computed with big
// integers.
func decimalTimes(t *testing.T, digits string, unit, limit time.Duration) time.Duration {
	t.Helper()
	v, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		t.Fatalf("big.Int cannot parse %q", digits)
	}
	v.Mul(v, big.NewInt(int64(unit)))
	if v.Cmp(big.NewInt(int64(limit))) > 0 {
		return limit
	}
	return time.Duration(v.Int64())
}

// lowerASCII lower-cases the ASCII letters of s and nothing else.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{
		"1n", "250m", "1500000u", "30S", "5M", "1H", "0n", "99999999H", "2562048H",
		"2562047H", "00000001S", "100000000n", "", "S", "1", "-1S", "+1S", "1.5S",
		" 1S", "1S ", "1s", "١٢S", "1ms", "12345678m",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseTimeout(s)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseTimeout(%q) = %v, false; want 0 when not ok", s, d)
			}
		} else if d < 0 || d > MaxTimeout {
			t.Fatalf("ParseTimeout(%q) = %v: out of [0, MaxTimeout]", s, d)
		}

		// Oracle: the grammar and value, checked independently.
		var unit time.Duration
		wantOK := len(s) >= 2 && len(s) <= 9 && allASCIIDigits(s[:len(s)-1])
		if wantOK {
			unit = map[byte]time.Duration{
				'n': time.Nanosecond, 'u': time.Microsecond, 'm': time.Millisecond,
				'S': time.Second, 'M': time.Minute, 'H': time.Hour,
			}[s[len(s)-1]]
			wantOK = unit != 0
		}
		if ok != wantOK {
			t.Fatalf("ParseTimeout(%q) ok = %v; want %v", s, ok, wantOK)
		}
		if !ok {
			return
		}
		if want := decimalTimes(t, s[:len(s)-1], unit, MaxTimeout); d != want {
			t.Fatalf("ParseTimeout(%q) = %d; want %d", s, int64(d), int64(want))
		}

		// Round trip: re-encoding never shortens the deadline.
		if d > 0 {
			checkTimeoutRoundTrip(t, d)
		}
	})
}

func FuzzFormatTimeout(f *testing.F) {
	for _, d := range []int64{
		math.MinInt64, -1, 0, 1, 99_999_999, 100_000_000, 100_000_001,
		int64(time.Second), int64(time.Hour), math.MaxInt64,
	} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, d int64) {
		s, ok := FormatTimeout(time.Duration(d))
		if d <= 0 {
			if ok || s != "" {
				t.Fatalf("FormatTimeout(%d) = %q, %v; want \"\", false", d, s, ok)
			}
			return
		}
		checkTimeoutRoundTrip(t, time.Duration(d))
		b, ok := AppendTimeout([]byte("p"), time.Duration(d))
		if !ok || string(b) != "p"+s {
			t.Fatalf("AppendTimeout(%q, %d) = %q, %v; want %q, true", "p", d, b, ok, "p"+s)
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "1", "120", "86400", "86401", "1743440400", "18446744073709551616",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
		"", "-1", "+1", "1.5", " 1", "1 ", "١٢", "soon", "Wed,", "Wed ",
		"Sun, 06 Nov 1994 08:49:37.5 GMT", "Sun, 06 Nov 1994 08:49:37 PST",
	} {
		f.Add(s, int64(1445412480)) // 2015-10-21T07:28:00Z
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		d, ok := ParseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
			}
		} else if d < 0 || d > MaxPushback {
			t.Fatalf("ParseRetryAfter(%q) = %v: out of [0, MaxPushback]", v, d)
		}

		// Oracle: delay-seconds by big integers, dates by net/http.
		if allASCIIDigits(v) {
			if want := decimalTimes(t, v, time.Second, MaxPushback); !ok || d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true", v, d, ok, want)
			}
			return
		}
		date, err := http.ParseTime(v)
		if wantOK := err == nil; ok != wantOK {
			t.Fatalf("ParseRetryAfter(%q) ok = %v; http.ParseTime error %v", v, ok, err)
		}
		if ok {
			if want := min(max(date.Sub(now), 0), MaxPushback); d != want {
				t.Fatalf("ParseRetryAfter(%q, %v) = %v; want %v", v, now, d, want)
			}
		}
	})
}

func FuzzParseMillis(f *testing.F) {
	for _, s := range []string{
		"0", "1", "250", "86400000", "86400001", "1743440400000",
		"9223372036854775807", "9223372036854775808", "99999999999999999999999",
		"", "-1", "-0", "+1", "1.5", "1e3", " 1", "1 ", "١٢", "0x10",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseMillis(v)
		if ok != allASCIIDigits(v) {
			t.Fatalf("ParseMillis(%q) ok = %v; want %v", v, ok, !ok)
		}
		if !ok {
			if d != 0 {
				t.Fatalf("ParseMillis(%q) = %v, false; want 0 when not ok", v, d)
			}
			return
		}
		if want := decimalTimes(t, v, time.Millisecond, MaxPushback); d != want {
			t.Fatalf("ParseMillis(%q) = %v; want %v", v, d, want)
		}
	})
}

func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{
		"1", "2", "01", "0000001", "999999", "1000000", "1000001", "0", "",
		"-1", "+1", " 1", "1 ", "١٢", "10000000", "18446744073709551617",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseAttempt(s)
		wantOK := len(s) <= 7 && allASCIIDigits(s)
		var want int
		if wantOK {
			want = int(decimalTimes(t, s, 1, math.MaxInt64))
			wantOK = 1 <= want && want <= MaxAttempt
		}
		if !wantOK {
			want = 0
		}
		if n != want || ok != wantOK {
			t.Fatalf("ParseAttempt(%q) = %d, %v; want %d, %v", s, n, ok, want, wantOK)
		}
		if ok {
			if got, ok := ParseAttempt(FormatAttempt(n)); got != n || !ok {
				t.Fatalf("ParseAttempt(FormatAttempt(%d)) = %d, %v", n, got, ok)
			}
		}

		prev, ok := AttemptFromPrevious(s)
		wantOK = len(s) <= 7 && allASCIIDigits(s)
		if wantOK {
			want = int(decimalTimes(t, s, 1, math.MaxInt64)) + 1
			wantOK = want <= MaxAttempt
		}
		if !wantOK {
			want = 0
		}
		if prev != want || ok != wantOK {
			t.Fatalf("AttemptFromPrevious(%q) = %d, %v; want %d, %v", s, prev, ok, want, wantOK)
		}
	})
}

func FuzzFormatAttempt(f *testing.F) {
	for _, n := range []int64{math.MinInt64, -1, 0, 1, 2, MaxAttempt, MaxAttempt + 1, math.MaxInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n64 int64) {
		n := int(n64)
		s := FormatAttempt(n)
		got, ok := ParseAttempt(s)
		if !ok || got != min(max(n, 1), MaxAttempt) {
			t.Fatalf("ParseAttempt(FormatAttempt(%d) = %q) = %d, %v", n, s, got, ok)
		}
		if b := AppendAttempt(nil, n); string(b) != s {
			t.Fatalf("AppendAttempt(nil, %d) = %q; want %q", n, b, s)
		}
	})
}

func FuzzParseOverload(f *testing.F) {
	for _, s := range []string{"", "none", "instance", "service", "SERVICE", "ſervice", " service", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, ok := ParseOverload(s)
		want, wantOK := OverloadNone, true
		switch lowerASCII(s) {
		case "", "none":
		case "instance":
			want = OverloadInstance
		case "service":
			want = OverloadService
		default:
			wantOK = false
		}
		if o != want || ok != wantOK {
			t.Fatalf("ParseOverload(%q) = %v, %v; want %v, %v", s, o, ok, want, wantOK)
		}
		if back, ok := ParseOverload(o.String()); back != o || !ok {
			t.Fatalf("ParseOverload(%v.String()) = %v, %v", o, back, ok)
		}
	})
}

func FuzzParseExhausted(f *testing.F) {
	for _, s := range []string{"", "1", "true", "TRUE", "0", "false", " 1", "truE "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s == "1" || lowerASCII(s) == "true"
		if got := ParseExhausted(s); got != want {
			t.Fatalf("ParseExhausted(%q) = %v; want %v", s, got, want)
		}
	})
}

func FuzzParseCriticality(f *testing.F) {
	for _, s := range []string{
		"", "critical-plus", "critical", "sheddable-plus", "sheddable", "CRITICAL",
		"critical_plus", "default", " critical",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := ParseCriticality(s)
		want, wantOK := DefaultCriticality, true
		switch lowerASCII(s) {
		case "":
		case "critical-plus":
			want = CriticalPlus
		case "critical":
			want = Critical
		case "sheddable-plus":
			want = SheddablePlus
		case "sheddable":
			want = Sheddable
		default:
			wantOK = false
		}
		if c != want || ok != wantOK {
			t.Fatalf("ParseCriticality(%q) = %v, %v; want %v, %v", s, c, ok, want, wantOK)
		}
		if back, ok := ParseCriticality(c.String()); back != c || !ok {
			t.Fatalf("ParseCriticality(%v.String()) = %v, %v", c, back, ok)
		}
	})
}
