package analyze

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/sim/result"
)

// RampSpec is a load ramp for [Ramp]: the first-try rate rises linearly
// from From to Peak over Duration, then falls back to From over Duration
// again, like the ramp of Paper 08's Sim B.
type RampSpec struct {
	From, Peak float64 // first tries per second
	// Duration of each half of the ramp.
	Duration time.Duration
	// Step of the integration [1ms].
	Step time.Duration
	// Bin: the results are averaged over bins of this width [1s], as the
	// simulator's time series are.
	Bin time.Duration
}

// RampBin is one bin of a ramp: averages over the bin.
type RampBin struct {
	T       float64 `json:"t"`             // start of the bin, seconds
	Demand  float64 `json:"demand"`        // first tries per second
	Offered float64 `json:"offered"`       // attempts per second, retries included
	Goodput float64 `json:"goodput"`       // requests per second answered in time
	Queue   float64 `json:"queue"`         // attempts waiting
	Failed  float64 `json:"failed"`        // fraction of attempts that failed
	Up      bool    `json:"up"`            // on the way up
	Shed    float64 `json:"shed,omitzero"` // attempts per second shed by the full queue
}

// RampResult is the hysteresis loop a ramp draws.
type RampResult struct {
	// Bins: the ramp's time series, one bin per RampSpec.Bin.
	Bins []RampBin `json:"bins"`
	// Collapse and Recovery: the thresholds read from the bins with the
	// simulator's rule ([result.FindHysteresis]): the demand at which goodput
	// first fell below half of it on the way up, and the demand at which
	// it was first back at 90 % of it on the way down; −1 when not crossed.
	// CollapseT and RecoveryT are the times of those bins, in seconds.
	Collapse  float64 `json:"collapse_per_s"`
	CollapseT float64 `json:"collapse_t"`
	Recovery  float64 `json:"recovery_per_s"`
	RecoveryT float64 `json:"recovery_t"`
	// Static: the quasi-static thresholds ([StaticThresholds]); the ramp's
	// lag their values by the time a backlog takes to build or drain.
	Static Thresholds `json:"static"`
}

// Ramp integrates the fluid model over a load ramp up and down (explicit
// Euler, one Step at a time, starting with an empty queue):
//
//	dq/dt = λ(t) × A(f(q)) − μ(q),  q kept within [0, QueueCap]
//
// At the empty queue with a negative drift the queue stays empty and the
// service completes what arrives; at the full queue with a positive drift
// the excess is shed, fails at once and is retried (see [Equilibria]).
// Goodput at each step is offered × (1 − F). Backoff delays are not
// modelled: retries rejoin at once, which only shifts the dynamics by a
// timeout (tens of milliseconds against a ramp of minutes). With a
// capacity law the state is the attempts present (see [Equilibria]); with
// replicas each integrates its share, and a cache's hits count as goodput.
func Ramp(p Params, r RampSpec) (RampResult, error) {
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		return RampResult{}, err
	}
	if r.Step == 0 {
		r.Step = time.Millisecond
	}
	if r.Bin == 0 {
		r.Bin = time.Second
	}
	switch {
	case r.Duration <= 0 || r.Step < 0 || r.Bin < 0:
		return RampResult{}, fmt.Errorf("fluid: ramp duration must be > 0, step and bin ≥ 0")
	case r.From < 0 || r.Peak < 0 || math.IsNaN(r.From) || math.IsNaN(r.Peak) || math.IsInf(r.Peak, 0):
		return RampResult{}, fmt.Errorf("fluid: ramp loads must be finite and ≥ 0")
	case r.Duration/r.Step > 50_000_000:
		return RampResult{}, fmt.Errorf("fluid: ramp of %v in steps of %v is too long", 2*r.Duration, r.Step)
	}
	static, err := StaticThresholds(p)
	if err != nil {
		return RampResult{}, err
	}
	dt := r.Step.Seconds()
	half := r.Duration.Seconds()
	total := 2 * half
	steps := int(math.Ceil(total / dt))
	perBin := max(1, int(math.Round(r.Bin.Seconds()/dt)))
	res := RampResult{Static: static, Collapse: -1, CollapseT: -1, Recovery: -1, RecoveryT: -1}
	one := p.replica()
	var step func(lambda float64) rampStep
	if one.Law != nil {
		step = newLawModel(one).stepper(dt)
	} else {
		step = one.stepper(dt)
	}
	reps, share := float64(p.Replicas), p.share()
	var acc RampBin
	n := 0
	for i := range steps {
		t := (float64(i) + 0.5) * dt
		lambda := r.From + (r.Peak-r.From)*t/half
		if t > half {
			lambda = r.Peak + (r.From-r.Peak)*(t-half)/half
		}
		st := step(lambda * share)
		acc.Demand += lambda
		acc.Offered += reps * st.offered
		acc.Goodput += reps*st.offered*(1-st.fail) + lambda*p.HitRate
		acc.Queue += reps * st.queue
		acc.Failed += st.fail
		acc.Shed += reps * st.shed
		n++
		if n == perBin || i == steps-1 {
			k := float64(n)
			res.Bins = append(res.Bins, RampBin{
				T: float64(len(res.Bins)) * float64(perBin) * dt, Demand: acc.Demand / k, Offered: acc.Offered / k,
				Goodput: acc.Goodput / k, Queue: acc.Queue / k, Failed: acc.Failed / k, Shed: acc.Shed / k,
				Up: t <= half,
			})
			acc, n = RampBin{}, 0
		}
	}
	bins := make([]result.ClientBin, len(res.Bins))
	for i, b := range res.Bins {
		bins[i] = result.ClientBin{T: b.T, Demand: b.Demand, Goodput: b.Goodput}
	}
	h := result.FindHysteresis(bins)
	res.Collapse, res.CollapseT, res.Recovery, res.RecoveryT = h.Collapse, h.CollapseT, h.Recovery, h.RecoveryT
	return res, nil
}

// rampStep is one replica's figures after one step of a ramp: attempts
// offered and shed per second, the fraction that failed, the queue.
type rampStep struct {
	offered, fail, shed, queue float64
}

// stepper integrates one replica without a capacity law over a ramp, from
// an empty queue: at the empty queue with a negative drift the queue stays
// empty, at the full queue with a positive drift it sheds (see atCap).
func (p Params) stepper(dt float64) func(lambda float64) rampStep {
	Q := p.QueueCap
	q := 0.0
	return func(lambda float64) rampStep {
		f := p.failed(p.timeoutFraction(q))
		st := rampStep{offered: lambda * p.amplification(lambda, f), fail: f}
		drift := st.offered - p.mu(q)
		switch {
		case q <= 0 && drift <= 0:
			q = 0
		case q >= Q && drift >= 0:
			q = Q
			var frac float64
			st.offered, frac = p.atCap(lambda)
			st.fail = frac + (1-frac)*f
			st.shed = st.offered * frac
		default:
			q = min(Q, max(0, q+drift*dt))
		}
		st.queue = q
		return st
	}
}
