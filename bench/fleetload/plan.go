package main

import (
	"math"
	"time"
)

// The plan of a run: every simulated process's requests, their outcomes and
// the random samples of their backoffs follow from (seed, process, request,
// attempt) alone, so that the parent can replay the run through one shared
// bucket (reference.go) without a log of what the workers did.

// phase is one stretch of the run with its failure rates.
type phase struct {
	Name     string
	Dur      time.Duration
	Fail     float64 // the probability that an attempt fails
	Isolated int     // the first Isolated processes fail every attempt
	Measured bool    // reported in the table
}

// schedule returns the phases of a run: a warm-up that fills the pool, a
// healthy phase, a storm, a recovery, and a phase in which a few processes
// fail every attempt among healthy ones.
func schedule(scale float64, isolated int) []phase {
	d := func(s float64) time.Duration { return time.Duration(s * scale * float64(time.Second)) }
	return []phase{
		{Name: "warm-up", Dur: d(10), Fail: 0.01},
		{Name: "healthy", Dur: d(20), Fail: 0.01, Measured: true},
		{Name: "storm", Dur: d(20), Fail: 0.5, Measured: true},
		{Name: "recovery", Dur: d(10), Fail: 0.01},
		{Name: "isolated", Dur: d(20), Fail: 0.01, Isolated: isolated, Measured: true},
	}
}

// phaseAt returns the index of the phase that holds offset, or -1 past the
// end.
func phaseAt(ps []phase, offset time.Duration) int {
	for i, p := range ps {
		if offset < p.Dur {
			return i
		}
		offset -= p.Dur
	}
	return -1
}

// total returns the length of the schedule.
func total(ps []phase) time.Duration {
	var t time.Duration
	for _, p := range ps {
		t += p.Dur
	}
	return t
}

// phaseStart returns the offset at which phase i starts.
func phaseStart(ps []phase, i int) time.Duration {
	var t time.Duration
	for _, p := range ps[:i] {
		t += p.Dur
	}
	return t
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// uniform returns a number in [0, 1) determined by its arguments.
func uniform(seed uint64, proc, req, attempt int, what uint64) float64 {
	h := mix(seed ^ mix(uint64(proc)<<32^uint64(req)) ^ mix(uint64(attempt)<<8^what))
	return float64(h>>11) / (1 << 53)
}

const (
	drawGap  = 1
	drawFail = 2
	drawU    = 3
)

// arrivals calls f with the offset of each request of process proc, a
// Poisson process of the given rate, until the end of the schedule.
func arrivals(seed uint64, proc int, rate float64, end time.Duration, f func(req int, at time.Duration) bool) {
	var t float64 // seconds
	for req := 0; ; req++ {
		u := uniform(seed, proc, req, 0, drawGap)
		t += -math.Log(1-u) / rate
		at := time.Duration(t * float64(time.Second))
		if at >= end || !f(req, at) {
			return
		}
	}
}

// fails reports whether the attempt of a request of process proc made in
// phase ph fails.
func fails(seed uint64, ph phase, proc, req, attempt int) bool {
	if proc < ph.Isolated {
		return true
	}
	return uniform(seed, proc, req, attempt, drawFail) < ph.Fail
}
