package sim

import (
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
)

// sample draws a duration from d with the stream r.
func sample(d *scenario.Dist, r *engine.Rand) time.Duration {
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
		return sample(pick(d, r.Float64()), r)
	}
	return d.Mean
}

// pick returns the component of the mixture d that a uniform sample u in
// [0, 1) selects, each with weight / Σ weights.
func pick(d *scenario.Dist, u float64) *scenario.Dist {
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

// normal draws a standard normal sample (Box–Muller, one of the pair).
func normal(r *engine.Rand) float64 {
	u1 := r.Float64()
	for u1 == 0 {
		u1 = r.Float64()
	}
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*r.Float64())
}
