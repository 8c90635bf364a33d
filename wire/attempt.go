package wire

import "strconv"

// MaxAttempt is the largest attempt number [ParseAttempt] accepts. No sane
// retry policy comes near it; a larger value is a bug or an attack.
const MaxAttempt = 1_000_000

// maxAttemptDigits is the number of digits of MaxAttempt.
const maxAttemptDigits = 7

// FormatAttempt encodes attempt number n for [HeaderAttempt]: "1" for a first
// try, "2" for the first retry, and so on.
//
// n is clamped to [1, MaxAttempt]; a value below 1 is a bug in the caller.
func FormatAttempt(n int) string {
	return strconv.Itoa(clampAttempt(n))
}

// AppendAttempt appends the encoding of attempt number n to dst, as
// [FormatAttempt] does, and returns the extended buffer. It does not allocate
// if dst has room for 7 more bytes.
func AppendAttempt(dst []byte, n int) []byte {
	return strconv.AppendInt(dst, int64(clampAttempt(n)), 10)
}

func clampAttempt(n int) int {
	return min(max(n, 1), MaxAttempt)
}

// ParseAttempt decodes a [HeaderAttempt] value: 1 to 7 ASCII digits (leading
// zeros allowed) denoting an attempt number from 1 to [MaxAttempt]. Anything
// else, including 0, a sign or spaces, gives ok false, and the receiver should
// then treat the request as a first try.
func ParseAttempt(s string) (n int, ok bool) {
	if len(s) > maxAttemptDigits {
		return 0, false
	}
	v, ok := parseDigits(s, MaxAttempt+1)
	if !ok || v < 1 || v > MaxAttempt {
		return 0, false
	}
	return int(v), true
}

// AttemptFromPrevious decodes a grpc-previous-rpc-attempts value, the number
// of attempts of this RPC that came before the current one, and returns the
// current attempt number: one more. The value follows the rules of
// [ParseAttempt] except that it is from 0 to MaxAttempt − 1, so the result is
// from 1 to [MaxAttempt]. gRPC omits the key on a first try; an absent key
// means attempt 1.
func AttemptFromPrevious(s string) (n int, ok bool) {
	if len(s) > maxAttemptDigits {
		return 0, false
	}
	v, ok := parseDigits(s, MaxAttempt)
	if !ok || v > MaxAttempt-1 {
		return 0, false
	}
	return int(v) + 1, true
}
