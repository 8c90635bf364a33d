package limit_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
)

// A server admits requests through a Limiter and tells it how each ended.
// Here the clock is virtual, as in the simulator; production code calls
// Acquire and Success, which read the wall clock.
func ExampleLimiter() {
	alg, err := limit.NewAIMD(limit.AIMDConfig{Initial: 2})
	if err != nil {
		panic(err)
	}
	l := limit.NewLimiter(alg)
	now := time.Unix(0, 0)

	a, _ := l.AcquireAt(now)
	b, _ := l.AcquireAt(now)
	_, ok := l.AcquireAt(now)
	fmt.Println("third admitted:", ok, "in flight:", l.InFlight())

	a.SuccessAt(now.Add(10 * time.Millisecond)) // served: +1
	b.IgnoreAt(now.Add(time.Second))            // the caller gave up: no sample
	fmt.Println("limit:", l.Limit(), "in flight:", l.InFlight())

	c, _ := l.AcquireAt(now)
	c.DroppedAt(now.Add(20 * time.Millisecond)) // overloaded downstream: × 0.9
	fmt.Println("limit:", l.Limit())
	// Output:
	// third admitted: false in flight: 2
	// limit: 3 in flight: 0
	// limit: 2
}

// An operator pins the limit during an incident; the algorithm keeps
// learning underneath and takes over again when the override is removed.
func ExampleWithDials() {
	var dials killswitch.Dials
	l := limit.NewLimiter(limit.Fixed{N: 100}, limit.WithDials(&dials))
	_ = dials.SetLimitOverride(5)
	fmt.Println(l.Limit(), l.AlgorithmLimit())
	_ = dials.SetLimitOverride(0)
	fmt.Println(l.Limit())
	// Output:
	// 5 100
	// 100
}

// Scenario files and production configuration name an algorithm with a
// Spec; zero fields take the documented defaults.
func ExampleSpec() {
	var spec limit.Spec
	doc := `{"kind": "vegas", "vegas": {"max": 200}}`
	if err := json.Unmarshal([]byte(doc), &spec); err != nil {
		panic(err)
	}
	alg, err := spec.New()
	if err != nil {
		panic(err)
	}
	fmt.Println(alg.Limit())

	_, err = limit.Spec{Kind: limit.KindAIMD, AIMD: limit.AIMDConfig{BackoffRatio: 2}}.New()
	fmt.Println(err)
	// Output:
	// 20
	// limit: invalid config: backoff_ratio must be in (0, 1), got 2
}

// The algorithms are plain state machines: feed them samples, in real or
// virtual time.
func ExampleVegas() {
	v, err := limit.NewVegas(limit.VegasConfig{})
	if err != nil {
		panic(err)
	}
	sample := func(rtt time.Duration) int {
		return v.Update(limit.Sample{RTT: rtt, InFlight: v.Limit()})
	}
	fmt.Println(sample(10 * time.Millisecond)) // first sample: the no-load baseline
	fmt.Println(sample(10 * time.Millisecond)) // no queue: + 6
	fmt.Println(sample(40 * time.Millisecond)) // a queue of 20: − 1
	fmt.Println(v.NoLoadRTT())
	// Output:
	// 20
	// 26
	// 25
	// 10ms
}

// Gradient2 lowers its limit when the RTT outgrows its long-term average.
func ExampleGradient2() {
	g, err := limit.NewGradient2(limit.Gradient2Config{Min: 1})
	if err != nil {
		panic(err)
	}
	for range 10 {
		g.Update(limit.Sample{RTT: 10 * time.Millisecond, InFlight: 20})
	}
	fmt.Println(g.Limit(), g.LongRTT())
	for range 5 {
		g.Update(limit.Sample{RTT: 50 * time.Millisecond, InFlight: 20})
	}
	fmt.Println(g.Limit())
	// Output:
	// 28 10ms
	// 19
}
