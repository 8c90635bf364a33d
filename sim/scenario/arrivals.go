package scenario

import (
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
)

// The open-loop arrival process, shared by the simulator and the lab's
// load generator (lab/loadgen.go), so that both draw the same arrivals.

// ratePiece describes a client's arrival rate from t until it next changes:
// its value at t (per second), its slope (per second per second, nonzero on
// a schedule's ramp) and the instant the piece ends (a schedule point, or
// a load trigger starting or ending); ok is false when it never changes
// again.
func (a *Arrivals) ratePiece(t time.Duration, triggers []Trigger) (r, slope float64, end time.Duration, ok bool) {
	r = a.Rate
	prevT, prevR := time.Duration(0), a.Rate
	for _, p := range a.Schedule {
		if t < p.At {
			r = prevR
			if p.Ramp && p.At > prevT {
				span := (p.At - prevT).Seconds()
				slope = (p.Rate - prevR) / span
				r = prevR + (t-prevT).Seconds()*slope
			}
			end, ok = p.At, true
			break
		}
		prevT, prevR, r = p.At, p.Rate, p.Rate
	}
	for _, tr := range triggers {
		if tr.Kind != "load" {
			continue
		}
		if t >= tr.At && t < tr.At+tr.Duration {
			r, slope = r*tr.Factor, slope*tr.Factor
		}
		for _, at := range [2]time.Duration{tr.At, tr.At + tr.Duration} {
			if at > t && (!ok || at < end) {
				end, ok = at, true
			}
		}
	}
	return r, slope, end, ok
}

// NextArrival returns when the client's next open-loop arrival comes after
// t (the previous arrival, or 0 at the start), drawing from rng as the
// simulator does for the client, and false when none ever comes. The rate
// is the schedule's (stepped, or ramped linearly between points) times
// the factors of the load triggers active at the time (every client's
// rate is multiplied while one lasts); both change it at known instants,
// and the process follows them exactly:
//
//   - poisson: within a piece of constant rate r the gap is exponential at
//     r; a gap that reaches the piece's end is dropped and drawn again from
//     there at the new rate (the exponential forgets the time already
//     waited, so this is the process itself, not an approximation); on a
//     ramp, candidates drawn at the ramp's highest rate are kept with
//     probability rate / highest (thinning). A rate that never changes
//     draws one exponential per arrival.
//   - constant: the next arrival comes when the integral of the rate from
//     t reaches 1, across steps, ramps and load triggers (1/r for a rate
//     that does not change).
func (a *Arrivals) NextArrival(t time.Duration, triggers []Trigger, rng *engine.Rand) (time.Duration, bool) {
	if a.Kind == "constant" {
		return a.nextConstant(t, triggers)
	}
	for {
		r, slope, end, ok := a.ratePiece(t, triggers)
		top := r
		if ok && slope > 0 {
			top = r + slope*(end-t).Seconds()
		}
		if top <= 0 {
			if !ok {
				return 0, false
			}
			t = end
			continue
		}
		next := t + time.Duration(rng.ExpFloat64()/top*1e9)
		if ok && next >= end {
			t = end
			continue
		}
		if slope == 0 || rng.Float64()*top < r+slope*(next-t).Seconds() {
			return next, true
		}
		t = next
	}
}

// PlainRate returns the rate of a process NextArrival draws at one rate
// that never changes, with the triggers given: a poisson process at a rate
// above 0, without a schedule, when no trigger is a load trigger. Its next
// arrival after t is t plus one exponential gap at that rate, the first
// candidate NextArrival draws and returns. It returns 0 for any other
// process.
func (a *Arrivals) PlainRate(triggers []Trigger) float64 {
	if a.Kind != "poisson" && a.Kind != "" || len(a.Schedule) > 0 || !(a.Rate > 0) {
		return 0
	}
	for _, tr := range triggers {
		if tr.Kind == "load" {
			return 0
		}
	}
	return a.Rate
}

// nextConstant is NextArrival for a constant process.
func (a *Arrivals) nextConstant(t time.Duration, triggers []Trigger) (time.Duration, bool) {
	need := 1.0
	for {
		r, slope, end, ok := a.ratePiece(t, triggers)
		if !ok {
			if r <= 0 {
				return 0, false
			}
			return t + time.Duration(need/r*1e9), true
		}
		span := (end - t).Seconds()
		if area := r*span + slope*span*span/2; area > 0 && area >= need {
			s := need / r
			if slope != 0 {
				// r·s + slope·s²/2 = need
				s = (math.Sqrt(r*r+2*slope*need) - r) / slope
			}
			return t + time.Duration(s*1e9), true
		} else if area > 0 {
			need -= area
		}
		t = end
	}
}
