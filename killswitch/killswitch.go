// Package killswitch holds the runtime dials an operator turns during an
// incident: retries off, shed a fraction of traffic, override a concurrency
// limit. The data path reads them with single atomic loads; changes come from
// a control path (an admin endpoint, a fleet-wide store).
//
// The zero Dials is ready to use: retries on, nothing shed, no override.
// A Dials is safe for concurrent use and must not be copied after first use.
//
// The dials also remember their last change — when, and whether it was
// made in this process or came from the fleet ([Dials.LastChange]) — so
// that the exporters (package metrics, package otelx) can show on a
// dashboard that "retries off" took effect, where, and since when.
package killswitch

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Dials is a set of runtime switches shared by clients and servers.
type Dials struct {
	retriesOff atomic.Bool
	shedPPM    atomic.Uint32 // fraction of traffic to shed, in parts per million
	limit      atomic.Int64  // concurrency limit override; 0 = none
	last       atomic.Pointer[Change]
}

// Origin says where a change of the dials came from.
type Origin uint8

// The origins.
const (
	// OriginNone: the dials were never changed.
	OriginNone Origin = iota
	// OriginLocal: changed in this process — its admin endpoint, or its
	// own code calling the setters.
	OriginLocal
	// OriginFleet: applied from the fleet's dials (a fleet.Watcher), set
	// by an operator for every process.
	OriginFleet
)

var originNames = [...]string{OriginNone: "none", OriginLocal: "local", OriginFleet: "fleet"}

// String returns the origin's name: none, local or fleet.
func (o Origin) String() string {
	if int(o) < len(originNames) {
		return originNames[o]
	}
	return fmt.Sprintf("killswitch.Origin(%d)", uint8(o))
}

// Change describes the last change of a Dials.
type Change struct {
	// At is when the change was made (the zero Time if never).
	At time.Time
	// Origin says whether it was made here or came from the fleet.
	Origin Origin
	// By says who made it, when known: "admin 127.0.0.1:53412" for the
	// admin endpoint, "fleet NAME" for the fleet's dials; "" otherwise.
	By string
}

// LastChange returns the dials' last change: the zero Change (OriginNone)
// if they were never changed.
func (d *Dials) LastChange() Change {
	if c := d.last.Load(); c != nil {
		return *c
	}
	return Change{}
}

// NoteChange records c as the dials' last change, replacing what the
// setters recorded: call it after changing the dials on behalf of someone.
// The admin endpoint does, with its client's address; a fleet.Watcher does
// after it applied the fleet's dials (OriginFleet, "fleet NAME", at the
// time Redis stamped the change).
func (d *Dials) NoteChange(c Change) { d.last.Store(&c) }

// changed records a change made in this process through a setter, stamped
// with the wall clock: the setters are the wall-clock shorthand, and
// [Dials.NoteChange] takes the time as an argument.
func (d *Dials) changed() { d.last.Store(&Change{At: time.Now(), Origin: OriginLocal}) }

// RetriesDisabled reports whether retries are turned off.
func (d *Dials) RetriesDisabled() bool { return d.retriesOff.Load() }

// SetRetriesDisabled turns retries off (true) or back on (false), at once,
// for every retrier that reads these dials. It records a local change
// (see [Dials.LastChange]).
func (d *Dials) SetRetriesDisabled(off bool) {
	d.retriesOff.Store(off)
	d.changed()
}

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
// It records a local change (see [Dials.LastChange]).
func (d *Dials) SetShedFraction(f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("killswitch: shed fraction %v is outside [0, 1]", f)
	}
	d.shedPPM.Store(uint32(math.Round(f * 1e6)))
	d.changed()
	return nil
}

// LimitOverride returns the concurrency limit override and whether one is set.
func (d *Dials) LimitOverride() (limit int, ok bool) {
	l := d.limit.Load()
	return int(l), l > 0
}

// SetLimitOverride pins every adaptive limiter reading these dials to limit;
// 0 removes the override. A negative limit is an error. It records a local
// change (see [Dials.LastChange]).
func (d *Dials) SetLimitOverride(limit int) error {
	if limit < 0 {
		return fmt.Errorf("killswitch: limit override %d is negative", limit)
	}
	d.limit.Store(int64(limit))
	d.changed()
	return nil
}
