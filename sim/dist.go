package sim

import (
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
)

// IsZero reports whether d is the zero Dist (a constant 0).
func (d *Dist) IsZero() bool {
	return d.Kind == "" && d.Mean == 0 && d.Min == 0 && d.Max == 0 && d.Sigma == 0 && len(d.Of) == 0
}

// sample draws a duration from d with the stream r.
func (d *Dist) sample(r *engine.Rand) time.Duration {
	if d.Kind == "exponential" {
		// The common service time, tested first: the switch below orders
		// its cases by their strings' lengths, not by use.
		return time.Duration(r.ExpFloat64() * float64(d.Mean))
	}
	switch d.Kind {
	case "uniform":
		return d.Min + time.Duration(r.Float64()*float64(d.Max-d.Min))
	case "lognormal":
		// mean = exp(mu + sigma²/2)
		mu := math.Log(float64(d.Mean)) - d.Sigma*d.Sigma/2
		return time.Duration(math.Exp(mu + d.Sigma*normal(r)))
	case "mixture":
		return d.pick(r.Float64()).sample(r)
	}
	return d.Mean
}

// pick returns the mixture's component that a uniform sample u in [0, 1)
// selects, each with weight / Σ weights.
func (d *Dist) pick(u float64) *Dist {
	total := 0.0
	for i := range d.Of {
		total += d.Of[i].Weight
	}
	x := u * total
	for i := range d.Of {
		if x < d.Of[i].Weight {
			return &d.Of[i].Dist
		}
		x -= d.Of[i].Weight
	}
	return &d.Of[len(d.Of)-1].Dist
}

// Average returns the distribution's mean (a mixture's weighted mean).
func (d Dist) Average() time.Duration { return d.mean() }

// mean returns the distribution's mean.
func (d *Dist) mean() time.Duration {
	switch d.Kind {
	case "uniform":
		return (d.Min + d.Max) / 2
	case "mixture":
		total, sum := 0.0, 0.0
		for i := range d.Of {
			total += d.Of[i].Weight
			sum += d.Of[i].Weight * float64(d.Of[i].Dist.mean())
		}
		return time.Duration(sum / total)
	}
	return d.Mean
}

// normal draws a standard normal sample (Box–Muller, one of the pair).
func normal(r *engine.Rand) float64 {
	u1 := r.Float64()
	for u1 == 0 {
		u1 = r.Float64()
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*r.Float64())
}
