package result

// Hysteresis is the loop a load ramp draws: goodput against demand on the
// way up and on the way down.
type Hysteresis struct {
	// Collapse: the demand (requests/s) at which goodput first fell below
	// half of it on the way up, at time CollapseT (s); -1 if it never did.
	Collapse, CollapseT float64
	// Recovery: the demand at which goodput was first back at ≥ 90 % of it
	// on the way down, after the collapse, at time RecoveryT; -1 if never.
	Recovery, RecoveryT float64
}

// FindHysteresis reads the collapse and recovery thresholds from a client's
// bins over a ramp that rises to a peak and falls again. A threshold that
// was not crossed is -1.
func FindHysteresis(bins []ClientBin) Hysteresis {
	h := Hysteresis{-1, -1, -1, -1}
	peak := 0
	for i, b := range bins {
		if b.Demand > bins[peak].Demand {
			peak = i
		}
	}
	collapsed := -1
	for i := 0; i <= peak && i < len(bins); i++ {
		if b := bins[i]; b.Demand > 0 && b.Goodput < 0.5*b.Demand {
			h.Collapse, h.CollapseT, collapsed = b.Demand, b.T, i
			break
		}
	}
	if collapsed < 0 {
		return h
	}
	for i := max(peak, collapsed); i < len(bins); i++ {
		if b := bins[i]; b.Demand > 0 && b.Goodput >= 0.9*b.Demand {
			h.Recovery, h.RecoveryT = b.Demand, b.T
			break
		}
	}
	return h
}
