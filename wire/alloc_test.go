package wire

import (
	"testing"
	"time"
)

// TestNoAllocs holds the promise of the package documentation: the Append
// functions do not allocate, nor do the parsers on well-formed input (the
// obsolete RFC 850 date form, which names a time zone, is the exception).
func TestNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocation counts")
	}
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	buf := make([]byte, 0, 16)
	tests := []struct {
		name string
		f    func()
	}{
		{"AppendTimeout", func() { sinkBytes, sinkOK = AppendTimeout(buf[:0], 1500*time.Millisecond) }},
		{"AppendAttempt", func() { sinkBytes = AppendAttempt(buf[:0], 123456) }},
		{"ParseTimeout", func() { sinkDuration, sinkOK = ParseTimeout("1500000u") }},
		{"ParseAttempt", func() { _, sinkOK = ParseAttempt("3") }},
		{"AttemptFromPrevious", func() { _, sinkOK = AttemptFromPrevious("2") }},
		{"ParseRetryAfter/seconds", func() { sinkDuration, sinkOK = ParseRetryAfter("120", now) }},
		{"ParseRetryAfter/IMF-fixdate", func() { sinkDuration, sinkOK = ParseRetryAfter("Wed, 21 Oct 2015 07:29:30 GMT", now) }},
		{"ParseRetryAfter/asctime", func() { sinkDuration, sinkOK = ParseRetryAfter("Wed Oct 21 07:29:30 2015", now) }},
		{"ParseMillis", func() { sinkDuration, sinkOK = ParseMillis("250") }},
		{"ParseOverload", func() { _, sinkOK = ParseOverload("Service") }},
		{"ParseExhausted", func() { sinkOK = ParseExhausted("true") }},
		{"ParseCriticality", func() { _, sinkOK = ParseCriticality("sheddable-plus") }},
		{"FormatAttempt/small", func() { sinkString = FormatAttempt(3) }},
		{"Overload.String", func() { sinkString = OverloadService.String() }},
		{"Criticality.String", func() { sinkString = CriticalPlus.String() }},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, tt.f); n != 0 {
			t.Errorf("%s: %v allocations per call; want 0", tt.name, n)
		}
	}
}
