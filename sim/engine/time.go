package engine

import (
	"math"
	"time"
)

// Time is an instant of virtual time: nanoseconds since the start of the
// simulation, which is Time(0). Spans of virtual time are time.Duration
// values, so Time(d) converts an offset d from the start into an instant and
// [Time.Duration] converts back.
type Time int64

// Never is later than every event: [Engine.Run] with until = Never runs until
// nothing is pending, and a delay too long to represent saturates to Never.
const Never Time = math.MaxInt64

// Add returns t+d. The sum saturates at [Never] and at math.MinInt64
// instead of wrapping around.
func (t Time) Add(d time.Duration) Time {
	s := t + Time(d)
	switch {
	case d > 0 && s < t:
		return Never
	case d < 0 && s > t:
		return math.MinInt64
	}
	return s
}

// Sub returns the span t−u. Like time.Time.Sub, the result saturates at the
// largest and smallest time.Duration.
func (t Time) Sub(u Time) time.Duration {
	d := time.Duration(t - u)
	switch {
	case u < 0 && d < time.Duration(t):
		return math.MaxInt64
	case u > 0 && d > time.Duration(t):
		return math.MinInt64
	}
	return d
}

// Duration returns t as an offset from the start of the simulation.
func (t Time) Duration() time.Duration { return time.Duration(t) }

// Seconds returns t in seconds since the start of the simulation.
func (t Time) Seconds() float64 { return float64(t) / 1e9 }

// String formats t as its offset from the start, like time.Duration
// ("1.5s", "250ms").
func (t Time) String() string { return time.Duration(t).String() }
