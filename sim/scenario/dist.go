package scenario

import "time"

// IsZero reports whether d is the zero Dist (a constant 0).
func (d *Dist) IsZero() bool {
	return d.Kind == "" && d.Mean == 0 && d.Min == 0 && d.Max == 0 && d.Sigma == 0 && len(d.Of) == 0
}

// Average returns the distribution's mean (a mixture's weighted mean).
func (d Dist) Average() time.Duration {
	switch d.Kind {
	case "uniform":
		return (d.Min + d.Max) / 2
	case "mixture":
		total, sum := 0.0, 0.0
		for i := range d.Of {
			total += d.Of[i].Weight
			sum += d.Of[i].Weight * float64(d.Of[i].Dist.Average())
		}
		return time.Duration(sum / total)
	}
	return d.Mean
}
