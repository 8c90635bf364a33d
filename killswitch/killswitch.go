// Package killswitch holds the runtime dials an operator turns during an
// incident: retries off, shed a fraction of traffic, override a concurrency
// limit. The data path reads them with single atomic loads; changes come from
// a control path (an admin endpoint, a fleet-wide store).
//
// The zero Dials is ready to use: retries on, nothing shed, no override.
// A Dials is safe for concurrent use and must not be copied after first use.
package killswitch

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Dials is a set of runtime switches shared by clients and servers.
type Dials struct {
	retriesOff atomic.Bool
	shedPPM    atomic.Uint32 // fraction of traffic to shed, in parts per million
	limit      atomic.Int64  // concurrency limit override; 0 = none
}

// RetriesDisabled reports whether retries are turned off.
func (d *Dials) RetriesDisabled() bool { return d.retriesOff.Load() }

// SetRetriesDisabled turns retries off (true) or back on (false), at once,
// for every retrier that reads these dials.
func (d *Dials) SetRetriesDisabled(off bool) { d.retriesOff.Store(off) }

// ShedFraction returns the fraction of traffic to shed, in [0, 1].
func (d *Dials) ShedFraction() float64 { return float64(d.shedPPM.Load()) / 1e6 }

// ShedPPM returns the fraction of traffic to shed in parts per million; the
// hot path compares it with a random number without floating point.
func (d *Dials) ShedPPM() uint32 { return d.shedPPM.Load() }

// Shed reports whether a request whose uniform draw is r, in
// [0, 1,000,000), is to be shed: r < ShedPPM. The HTTP and gRPC servers
// draw r from math/rand/v2, the simulator from its seeded stream; both
// decide by this rule.
func (d *Dials) Shed(r uint32) bool { return r < d.shedPPM.Load() }

// SetShedFraction sets the fraction of traffic to shed; f must lie in [0, 1].
func (d *Dials) SetShedFraction(f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("killswitch: shed fraction %v is outside [0, 1]", f)
	}
	d.shedPPM.Store(uint32(math.Round(f * 1e6)))
	return nil
}

// LimitOverride returns the concurrency limit override and whether one is set.
func (d *Dials) LimitOverride() (limit int, ok bool) {
	l := d.limit.Load()
	return int(l), l > 0
}

// SetLimitOverride pins every adaptive limiter reading these dials to limit;
// 0 removes the override. A negative limit is an error.
func (d *Dials) SetLimitOverride(limit int) error {
	if limit < 0 {
		return fmt.Errorf("killswitch: limit override %d is negative", limit)
	}
	d.limit.Store(int64(limit))
	return nil
}
