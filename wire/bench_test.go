package wire

import (
	"testing"
	"time"
)

// A benchmark result kept alive so the compiler cannot drop the work.
var (
	sinkString   string
	sinkBytes    []byte
	sinkDuration time.Duration
	sinkOK       bool
)

func BenchmarkFormatTimeout(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkString, sinkOK = FormatTimeout(1500 * time.Millisecond)
	}
}

func BenchmarkAppendTimeout(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 16)
	for b.Loop() {
		sinkBytes, sinkOK = AppendTimeout(buf[:0], 1500*time.Millisecond)
	}
}

func BenchmarkParseTimeout(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration, sinkOK = ParseTimeout("1500000u")
	}
}

func BenchmarkParseRetryAfter(b *testing.B) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	for _, v := range []string{"120", "Wed, 21 Oct 2015 07:29:30 GMT"} {
		b.Run(v, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkDuration, sinkOK = ParseRetryAfter(v, now)
			}
		})
	}
}

func BenchmarkParseMillis(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkDuration, sinkOK = ParseMillis("250")
	}
}
