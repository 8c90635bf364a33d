// Package wire names and encodes the signals stormguard puts on the wire or
// reads from it.
//
// Processes cooperate through a handful of request and response headers (on
// gRPC, metadata entries with the same names in lower case, which grpc-go's
// metadata package produces itself). This package holds their names and pure
// codecs for their values: no I/O, no clock (the current time is a parameter
// where one is needed), no state. Every function is safe for concurrent use.
// The Append functions do not allocate, nor do the parsers on well-formed
// input (except for dates in an obsolete form, see [ParseRetryAfter]).
//
// # Headers stormguard writes and reads
//
//	Stormguard-Timeout            request: the caller's remaining deadline,
//	                              relative, in the grpc-timeout format: 1 to 8
//	                              ASCII digits and one unit, H (hours),
//	                              M (minutes), S (seconds), m (milliseconds),
//	                              u (microseconds) or n (nanoseconds).
//	                              "250m", "1500000u". Sent rounded up, never
//	                              once the deadline has passed.
//	Stormguard-Attempt            request: the attempt number, decimal, 1 for a
//	                              first try, at most MaxAttempt. "1", "3".
//	                              Absent (or malformed) means 1: stormguard's
//	                              clients send it on retries only.
//	Stormguard-Overload           response: "instance" (this instance is
//	                              overloaded: retry on another one, after a
//	                              delay) or "service" (the whole service is
//	                              overloaded: do not retry, at any layer).
//	Stormguard-Retries-Exhausted  response: "1" (or "true"): a layer below
//	                              already retried this request and gave up; do
//	                              not retry the failure.
//	Stormguard-Criticality        request: "critical-plus", "critical" (the
//	                              default when absent), "sheddable-plus" or
//	                              "sheddable".
//
// # Standard signals stormguard reads
//
//	Retry-After                   response, RFC 9110: delay-seconds ("120") or
//	                              an HTTP-date ("Sun, 06 Nov 1994 08:49:37 GMT",
//	                              or the obsolete RFC 850 and asctime forms).
//	X-Amz-Retry-After             response (AWS): integer milliseconds.
//	grpc-retry-pushback-ms        trailer (gRFC A6): integer milliseconds; a
//	                              negative or malformed value means "do not
//	                              retry".
//	grpc-previous-rpc-attempts    request (gRFC A6): how many attempts of this
//	                              RPC came before this one.
//	grpc-timeout                  request: same format as Stormguard-Timeout.
//
// # Parsing rules
//
// Parsers report whether the value was well formed with a second, boolean
// result; a returned value is never a sentinel. They are strict: numbers are
// ASCII digits only (no sign, no decimal point, no other scripts' digits) and
// no parser trims whitespace (net/http has already removed the optional
// whitespace around a header value). Tokens ("instance", "critical", "true")
// match ASCII case-insensitively. A duration too large to represent saturates
// at a documented bound ([MaxTimeout], [MaxPushback]) instead of overflowing,
// however many digits it has; an attempt number above [MaxAttempt] is
// rejected.
package wire

// Headers that stormguard writes and reads, in canonical MIME form. On gRPC
// the same names are used as metadata keys in lower case.
const (
	HeaderTimeout          = "Stormguard-Timeout"
	HeaderAttempt          = "Stormguard-Attempt"
	HeaderOverload         = "Stormguard-Overload"
	HeaderRetriesExhausted = "Stormguard-Retries-Exhausted"
	HeaderCriticality      = "Stormguard-Criticality"
)

// Standard HTTP headers that stormguard reads, in canonical MIME form.
const (
	HeaderRetryAfter    = "Retry-After"       // see [ParseRetryAfter]
	HeaderAmzRetryAfter = "X-Amz-Retry-After" // see [ParseMillis]
)

// Standard gRPC metadata keys that stormguard reads.
const (
	KeyGRPCTimeout          = "grpc-timeout"               // see [ParseTimeout]
	KeyGRPCRetryPushback    = "grpc-retry-pushback-ms"     // see [ParseMillis]
	KeyGRPCPreviousAttempts = "grpc-previous-rpc-attempts" // see [AttemptFromPrevious]
)

// equalFoldASCII reports whether s equals lower, a lower-case ASCII token,
// ignoring ASCII case only (so that, unlike strings.EqualFold, "ſervice" with
// a long s does not match "service").
func equalFoldASCII(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// parseDigits parses s, a non-empty string of ASCII digits, as an unsigned
// decimal number, saturating at limit: any value above limit is returned as
// limit. It reports false if s is empty or holds anything but ASCII digits.
// It reads every byte, so it runs in time linear in len(s), and never
// overflows as long as limit < (2^64 - 9) / 10, which holds for every caller.
func parseDigits(s string, limit uint64) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v <= limit { // once above limit, only validate the rest
			v = v*10 + uint64(c-'0') // v ≤ limit < 2^64/10 - 9 for every caller's limit
		}
	}
	return min(v, limit), true
}
