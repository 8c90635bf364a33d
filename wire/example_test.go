package wire_test

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/wire"
)

func ExampleFormatTimeout() {
	for _, remaining := range []time.Duration{
		250 * time.Millisecond,
		1500*time.Millisecond + 1, // rounded up, never down
		30 * time.Hour,
		0, // expired: fail locally, send nothing
	} {
		v, ok := wire.FormatTimeout(remaining)
		if !ok {
			fmt.Printf("%v: deadline passed, not sent\n", remaining)
			continue
		}
		back, _ := wire.ParseTimeout(v)
		fmt.Printf("%v: %s: %v\n", remaining, v, back)
	}
	// Output:
	// 250ms: 250000u: 250ms
	// 1.500000001s: 1500001u: 1.500001s
	// 30h0m0s: 108000S: 30h0m0s
	// 0s: deadline passed, not sent
}

func ExampleParseRetryAfter() {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	for _, v := range []string{
		"120",
		"Wed, 21 Oct 2015 07:29:30 GMT",
		"Tue, 20 Oct 2015 07:28:00 GMT", // in the past
		"1743440400",                    // 484,289 hours
		"1.5",
	} {
		d, ok := wire.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Wed, 21 Oct 2015 07:29:30 GMT": 1m30s true
	// "Tue, 20 Oct 2015 07:28:00 GMT": 0s true
	// "1743440400": 24h0m0s true
	// "1.5": 0s false
}
