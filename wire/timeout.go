package wire

import (
	"math"
	"strconv"
	"time"
)

// MaxTimeout is the largest duration [ParseTimeout] returns, the largest
// time.Duration (about 292 years). A well-formed value that denotes more, such
// as "99999999H" (about 11,400 years), saturates here.
const MaxTimeout = time.Duration(math.MaxInt64)

// maxTimeoutValue is the largest number that fits in the 8 digits of a
// timeout value.
const maxTimeoutValue = 99_999_999

// timeoutUnits lists the units from the finest to the coarsest, the order in
// which AppendTimeout tries them.
var timeoutUnits = [...]struct {
	d    time.Duration
	unit byte
}{
	{time.Nanosecond, 'n'},
	{time.Microsecond, 'u'},
	{time.Millisecond, 'm'},
	{time.Second, 'S'},
	{time.Minute, 'M'},
	{time.Hour, 'H'},
}

// FormatTimeout encodes a remaining deadline d for [HeaderTimeout] or
// grpc-timeout. It is [AppendTimeout] returning a string.
//
// It reports false if d ≤ 0: the deadline has passed, and the caller must fail
// the request locally rather than send it.
func FormatTimeout(d time.Duration) (string, bool) {
	var buf [9]byte
	b, ok := AppendTimeout(buf[:0], d)
	if !ok {
		return "", false
	}
	return string(b), true
}

// AppendTimeout appends the encoding of a remaining deadline d to dst and
// returns the extended buffer. It does not allocate if dst has room for 9 more
// bytes.
//
// The value uses the finest unit in which d fits in 8 digits and is rounded
// up, never down, so a receiver never sees a shorter deadline than the sender
// had; the receiver sees at most one unit more. Every positive time.Duration
// fits: the largest is 2,562,048 hours.
//
//	d                   encoding
//	1ns                 1n
//	99.999999ms         99999999n
//	100ms               100000u
//	1.5s                1500000u
//	100s                100000m
//	1h                  3600000m
//	30h                 108000S
//	1.500000001s        1500001u (rounded up)
//
// It reports false, and returns dst unchanged, if d ≤ 0: the deadline has
// passed, and the caller must fail the request locally rather than send it.
func AppendTimeout(dst []byte, d time.Duration) ([]byte, bool) {
	if d <= 0 {
		return dst, false
	}
	u := timeoutUnits[len(timeoutUnits)-1]
	for _, c := range timeoutUnits[:len(timeoutUnits)-1] {
		if ceilDiv(d, c.d) <= maxTimeoutValue {
			u = c
			break
		}
	}
	dst = strconv.AppendInt(dst, int64(ceilDiv(d, u.d)), 10)
	return append(dst, u.unit), true
}

// ceilDiv returns ⌈d/u⌉ for d > 0 and u > 0, without overflow.
func ceilDiv(d, u time.Duration) time.Duration {
	return (d-1)/u + 1
}

// ParseTimeout decodes a [HeaderTimeout] or grpc-timeout value: 1 to 8 ASCII
// digits followed by one of the units H, M, S, m, u, n, and nothing else (no
// sign, no space). Leading zeros are allowed.
//
// A value larger than [MaxTimeout] saturates at MaxTimeout. A zero value
// ("0n", "0S") is well formed and means the deadline has already passed: the
// receiver should drop the work without starting it. ok is false for anything
// malformed, and the receiver should then act as if the header were absent.
func ParseTimeout(s string) (d time.Duration, ok bool) {
	n := len(s) - 1 // number of digits
	if n < 1 || n > 8 {
		return 0, false
	}
	var unit time.Duration
	switch s[n] {
	case 'n':
		unit = time.Nanosecond
	case 'u':
		unit = time.Microsecond
	case 'm':
		unit = time.Millisecond
	case 'S':
		unit = time.Second
	case 'M':
		unit = time.Minute
	case 'H':
		unit = time.Hour
	default:
		return 0, false
	}
	v, ok := parseDigits(s[:n], maxTimeoutValue) // 8 digits never exceed the limit
	if !ok {
		return 0, false
	}
	if time.Duration(v) > MaxTimeout/unit {
		return MaxTimeout, true
	}
	return time.Duration(v) * unit, true
}
