package engine

import (
	"math/bits"
	"math/rand/v2"
)

// Rand is a fast pseudo-random generator for one simulated entity: a
// PCG-DXSM generator from math/rand/v2 (128 bits of state) held by value, so
// a model can keep one in each client's struct and draw from it without
// allocating or calling through an interface.
//
// Get one from [Stream]. The zero Rand is a valid generator, but every zero
// Rand produces the same numbers. Copying a Rand copies its state: the copy
// then repeats the original's numbers. A Rand is not safe for concurrent use.
//
// *Rand implements math/rand/v2's Source, so rand.New(&r) gives the full
// set of distributions (one allocation, at setup, not per draw).
type Rand struct {
	pcg rand.PCG
}

var _ rand.Source = (*Rand)(nil)

// Stream returns the random stream of the entity with stable identifier id
// in the simulation seeded with seed.
//
// A stream depends only on (seed, id), never on the order in which entities
// are created, so adding a client to a scenario does not change the numbers
// any other client draws. Give every entity an id that names it, for example
// kind<<32 | index, and never reuse an id for two entities of one run.
//
// Derivation (stable; changing it changes every simulation's results): with
// mix the SplitMix64 finalizer
//
//	mix(z) = z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27; z *= 0x94d049bb133111eb; z ^ z>>31
//
// and γ = 0x9e3779b97f4a7c15, the PCG state is seeded with
//
//	lo = mix(id + γ)
//	hi = mix(seed ^ lo)
//
// as rand.NewPCG(hi, lo). mix is a bijection, so distinct (seed, id) pairs
// give distinct 128-bit starting states; mixing scatters them over the
// generator's 2¹²⁸-long cycle, so two streams overlap only with negligible
// probability (about n²·L/2¹²⁸ for n streams of L draws each).
func Stream(seed, id uint64) Rand {
	lo := mix64(id + 0x9e3779b97f4a7c15)
	hi := mix64(seed ^ lo)
	var r Rand
	r.pcg.Seed(hi, lo)
	return r
}

// mix64 is the SplitMix64 output function, a bijection on uint64 with good
// avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Uint64 returns a uniformly distributed 64-bit value.
func (r *Rand) Uint64() uint64 { return r.pcg.Uint64() }

// Float64 returns a uniformly distributed value in [0, 1): one of the 2⁵³
// multiples of 2⁻⁵³.
func (r *Rand) Float64() float64 {
	return float64(int64(r.pcg.Uint64()>>11)) * 0x1p-53
}

// Uint64N returns a uniformly distributed value in [0, n). It panics if n
// is 0. It uses Lemire's multiply-and-reject method, so there is no modulo
// bias.
func (r *Rand) Uint64N(n uint64) uint64 {
	if n == 0 {
		panic("engine: Uint64N with n == 0")
	}
	hi, lo := bits.Mul64(r.pcg.Uint64(), n)
	if lo < n {
		threshold := -n % n // 2⁶⁴ mod n
		for lo < threshold {
			hi, lo = bits.Mul64(r.pcg.Uint64(), n)
		}
	}
	return hi
}

// IntN returns a uniformly distributed value in [0, n). It panics if n <= 0.
func (r *Rand) IntN(n int) int {
	if n <= 0 {
		panic("engine: IntN with n <= 0")
	}
	return int(r.Uint64N(uint64(n)))
}
