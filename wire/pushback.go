package wire

import "time"

// MaxPushback is the largest delay [ParseRetryAfter] and [ParseMillis] return:
// a larger hint (one server was seen asking for 484,289 hours) saturates here.
// The retry layer clamps hints much further; the bound only keeps the
// arithmetic safe while keeping the meaning "not any time soon".
const MaxPushback = 24 * time.Hour

// The three HTTP-date forms of RFC 9110, section 5.6.7, as layouts: the ones
// net/http's ParseTime accepts.
const (
	imfFixdate = "Mon, 02 Jan 2006 15:04:05 GMT" // preferred
	rfc850Date = time.RFC850                     // obsolete
	asctime    = time.ANSIC                      // obsolete
)

// ParseRetryAfter decodes a Retry-After value (RFC 9110, section 10.2.3)
// received at time now, and returns how long the server asked the client to
// wait.
//
// The value is either delay-seconds, a non-negative integer of ASCII digits
// ("120"), or an HTTP-date in any of the forms net/http's ParseTime accepts
// ("Sun, 06 Nov 1994 08:49:37 GMT"). A date in the past gives 0. A delay
// beyond [MaxPushback] saturates at MaxPushback.
//
// ok is false for an empty, negative, fractional or otherwise malformed value,
// including one with surrounding whitespace; the caller should then act as if
// there were no hint.
//
// It does not allocate for delay-seconds or for a well-formed date in the
// preferred form or the asctime form; the obsolete RFC 850 form, which names
// a time zone, may allocate.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if '0' <= v[0] && v[0] <= '9' { // an HTTP-date starts with a day name
		secs, ok := parseDigits(v, uint64(MaxPushback/time.Second))
		if !ok {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	// The three forms differ at the fourth byte: "Sun," "Sunday," "Sun ".
	// Choosing the one layout that can match saves two failed parses, each of
	// which would allocate an error.
	if len(v) < 4 {
		return 0, false
	}
	layout := rfc850Date
	switch v[3] {
	case ',':
		layout = imfFixdate
	case ' ':
		layout = asctime
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxPushback), true
}

// ParseMillis decodes a delay given as a whole number of milliseconds, as in
// X-Amz-Retry-After and grpc-retry-pushback-ms: a non-empty string of ASCII
// digits, nothing else. A delay beyond [MaxPushback] saturates at MaxPushback.
//
// ok is false for a negative or otherwise malformed value. What that means is
// the caller's to decide and depends on the header: under gRFC A6 a negative
// or malformed grpc-retry-pushback-ms means "do not retry", while the AWS SDKs
// ignore a malformed X-Amz-Retry-After.
func ParseMillis(v string) (time.Duration, bool) {
	ms, ok := parseDigits(v, uint64(MaxPushback/time.Millisecond))
	if !ok {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
