package httpx

import (
	"sync/atomic"
	"time"
)

// clockRefresh is how long a [clock] goes on from one reading of the wall
// clock before it reads it again.
const clockRefresh = 100 * time.Millisecond

// clock tells the time on the server's hot path for the cost of one reading
// of the monotonic clock (time.Since), where time.Now reads the monotonic
// and the wall clocks, each about as dear (48 against 26 ns here). The
// monotonic reading of what it returns is exact: deadlines, the queue's
// waits and the limiter's latency samples (all computed with Sub, Before,
// Until, which use the monotonic readings) are as with time.Now. Its wall
// reading is a base's, read with time.Now at most clockRefresh ago, plus
// the monotonic time elapsed since: on Linux both clocks advance at the
// same rate (NTP slews them alike), so this is the wall clock's reading
// too, unless the wall clock was set (stepped) since the base was read,
// which the next refresh picks up. The zero clock is ready to use. It is
// safe for concurrent use.
type clock struct {
	base atomic.Pointer[time.Time] // a time.Now reading; nil until the first
}

// now returns the current time.
func (c *clock) now() time.Time {
	if b := c.base.Load(); b != nil {
		// Since reads only the monotonic clock when b has a monotonic
		// reading, which time.Now's always do here (outside a synctest
		// bubble; inside one it reads time.Now, and so stays right).
		if d := time.Since(*b); 0 <= d && d < clockRefresh {
			return b.Add(d)
		}
	}
	t := time.Now()
	c.base.Store(&t)
	return t
}

// since returns the current time as t.Add(time.Since(t)), one reading of the
// monotonic clock: t must have come from now, or time.Now, not long ago.
// Its monotonic reading is exact, as now's.
func since(t time.Time) time.Time { return t.Add(time.Since(t)) }
