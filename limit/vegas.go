package limit

import (
	"errors"
	"math"
	"time"
)

// VegasConfig configures [Vegas]. A zero field means the default given in
// brackets (Netflix's, except the probe; see [Vegas]). It is plain data:
// copy it and share it freely.
type VegasConfig struct {
	Initial         int     `json:"initial,omitempty" yaml:"initial,omitempty"`                   // starting limit [20, moved into [Min, Max]]
	Min             int     `json:"min,omitempty" yaml:"min,omitempty"`                           // lowest limit, ≥ 1 [1]
	Max             int     `json:"max,omitempty" yaml:"max,omitempty"`                           // highest limit, in [Min, 2³⁰] [1000]
	Smoothing       float64 `json:"smoothing,omitempty" yaml:"smoothing,omitempty"`               // weight of each new estimate, in (0, 1] [1: none]
	ProbeMultiplier int     `json:"probe_multiplier,omitempty" yaml:"probe_multiplier,omitempty"` // probe every ProbeMultiplier × limit samples, in [1, 2²⁰] [30]
	NoProbe         bool    `json:"no_probe,omitempty" yaml:"no_probe,omitempty"`                 // never probe: the baseline only ever falls
}

// Defaults of VegasConfig.
const (
	defaultVegasInitial   = 20
	defaultVegasMin       = 1
	defaultVegasMax       = 1000
	defaultVegasSmoothing = 1
	defaultVegasProbe     = 30
)

// withDefaults returns c with its zero fields set to their defaults.
func (c VegasConfig) withDefaults() VegasConfig {
	c.Min = orInt(c.Min, defaultVegasMin)
	c.Max = orInt(c.Max, defaultVegasMax)
	c.Initial = orInt(c.Initial, max(c.Min, min(c.Max, defaultVegasInitial)))
	c.Smoothing = orFloat(c.Smoothing, defaultVegasSmoothing)
	c.ProbeMultiplier = orInt(c.ProbeMultiplier, defaultVegasProbe)
	return c
}

// Validate reports whether c, once its zero fields take their defaults,
// describes a valid Vegas. The error wraps [ErrInvalidConfig] and names
// every invalid field.
func (c VegasConfig) Validate() error {
	c = c.withDefaults()
	errs := []error{checkBounds(c.Initial, c.Min, c.Max)}
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		errs = append(errs, invalid("smoothing", "must be in (0, 1], got %g", c.Smoothing))
	}
	if c.ProbeMultiplier < 1 || c.ProbeMultiplier > 1<<20 {
		errs = append(errs, invalid("probe_multiplier", "must be in [1, %d], got %d", 1<<20, c.ProbeMultiplier))
	}
	return errors.Join(errs...)
}

// Vegas is a delay-based limit after TCP Vegas, with the semantics of
// Netflix's VegasLimit. It keeps the lowest RTT seen, noLoad, as the latency
// of a request that did not queue, and estimates how many requests are
// queued at the current limit L from a sample's RTT:
//
//	queue = ⌈L × (1 − noLoad / RTT)⌉
//
// With lg = max(1, ⌊log10 L⌋) (1 below 100, 2 below 1000, 3 at 1000), each
// sample, in order:
//
//	RTT ≤ 0 and not dropped            skipped
//	not dropped, RTT < noLoad          noLoad = RTT; L unchanged (also the first sample)
//	dropped                            L' = L − lg
//	2 × InFlight < L                   unchanged (application-limited)
//	queue ≤ lg                         L' = L + 6·lg   (no queue: grow fast)
//	queue < 3·lg  (alpha)              L' = L + lg
//	queue > 6·lg  (beta)               L' = L − lg
//	otherwise                          unchanged
//
// then L = (1 − Smoothing) × L + Smoothing × clamp(L', Min, Max). The limit
// reported is ⌊L⌋. Drops do not lower noLoad: a request that failed fast
// says nothing about the latency of one that is served. Expected values with
// the defaults, from L = 20 and noLoad = 10 ms, for one sample with
// InFlight = 20:
//
//	RTT      queue   limit after
//	10 ms    0       26
//	11 ms    2       21
//	12.5 ms  4       20
//	20 ms    10      19
//	dropped  –       19
//
// Against a server with capacity C and no-load latency D, RTT = D × L / C
// once L > C, so queue = L − C and the limit settles where L − C lies
// between alpha and beta: in [C + 3, C + 6] for limits below 100.
//
// # Probing
//
// The baseline only ever falls, so without help a Vegas would never learn
// that the no-load latency has risen (a slower dependency, a new
// deployment). So once ProbeMultiplier × ⌊L⌋ samples have been counted since
// the previous probe (or the start), with the current L, it probes:
//
//  1. it saves L and reports max(Min, ⌊L⌋ / 2) as the limit, so that the
//     queue drains;
//  2. it takes the lowest RTT among the following samples that were
//     admitted with at most that many in flight, and lowers the saved L on
//     a drop as usual;
//  3. after as many such samples as the reduced limit, or 4 × ⌊L⌋ + 4
//     samples in all, whichever comes first, that RTT becomes noLoad (it
//     may rise; if no sample qualified, noLoad stays) and the saved L is
//     restored.
//
// Netflix's library instead sets noLoad to the RTT of the sample that
// triggers the probe. Under sustained saturation that RTT includes the
// queue, so every probe inflates the baseline and the limit jumps until
// lower RTTs bring it back: in the package's closed-loop test (capacity 8)
// that variant averages 13.9 with peaks of 48, against 10.9 and 22 here.
// There is no random jitter on the period, to stay deterministic.
// Since the period shrinks with L, a limit that falls sharply brings the
// next probe forward. Set NoProbe to turn probing off.
//
// The zero Vegas behaves as one built from the zero [VegasConfig]. A Vegas
// is not safe for concurrent use (wrap it in a [Limiter]); Update allocates
// nothing.
type Vegas struct {
	cfg        VegasConfig
	limit      float64       // L
	noLoad     time.Duration // lowest RTT, 0 until the first sample
	sinceProbe int           // samples since the last probe
	ready      bool

	probing    bool
	saved      float64       // L before the probe
	probeLimit int           // the limit reported while probing
	probeMin   time.Duration // lowest qualifying RTT in this probe, 0 if none
	probeGood  int           // qualifying samples in this probe
	probeSeen  int           // samples in this probe
	probeMax   int           // samples after which the probe ends regardless
}

var _ Algorithm = (*Vegas)(nil)

// NewVegas returns a Vegas configured by c (zero fields take their
// defaults) at its initial limit, with no baseline yet, or an error wrapping
// [ErrInvalidConfig].
func NewVegas(c VegasConfig) (*Vegas, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	v := &Vegas{}
	v.init(c)
	return v, nil
}

func (v *Vegas) init(c VegasConfig) {
	*v = Vegas{cfg: c.withDefaults(), ready: true}
	v.limit = float64(v.cfg.Initial)
}

// log10 returns max(1, ⌊log10 n⌋) for the limits Vegas works with.
func log10(n int) float64 {
	switch {
	case n < 1000:
		if n < 100 {
			return 1
		}
		return 2
	case n < 10000:
		return 3
	}
	return math.Floor(math.Log10(float64(n)))
}

// Update applies the rule in the type's documentation and returns the new
// limit.
func (v *Vegas) Update(s Sample) int {
	if !v.ready {
		v.init(VegasConfig{})
	}
	if v.probing {
		v.probe(s)
		return v.Limit()
	}
	if s.RTT <= 0 && !s.Dropped {
		return v.Limit()
	}
	v.update(s)
	v.sinceProbe++
	if !v.cfg.NoProbe && v.sinceProbe >= v.cfg.ProbeMultiplier*int(v.limit) {
		v.probing = true
		v.saved = v.limit
		v.probeLimit = max(v.cfg.Min, int(v.limit)/2)
		v.probeMax = 4*int(v.limit) + 4
		v.probeMin, v.probeGood, v.probeSeen = 0, 0, 0
	}
	return v.Limit()
}

// update applies one sample outside a probe.
func (v *Vegas) update(s Sample) {
	l := v.limit
	if !s.Dropped {
		if v.noLoad == 0 || s.RTT < v.noLoad {
			v.noLoad = s.RTT
			return
		}
		if 2*float64(s.InFlight) < l {
			return // application-limited
		}
	}
	lg := log10(int(l))
	next := l - lg // a drop, or a queue above beta
	if !s.Dropped {
		queue := math.Ceil(l * (1 - float64(v.noLoad)/float64(s.RTT)))
		switch {
		case queue <= lg:
			next = l + 6*lg
		case queue < 3*lg:
			next = l + lg
		case queue <= 6*lg:
			return
		}
	}
	v.limit = v.smooth(l, next)
}

// smooth returns the smoothed limit moving from l towards next.
func (v *Vegas) smooth(l, next float64) float64 {
	next = clamp(next, float64(v.cfg.Min), float64(v.cfg.Max))
	return (1-v.cfg.Smoothing)*l + v.cfg.Smoothing*next
}

// probe applies one sample during a probe.
func (v *Vegas) probe(s Sample) {
	v.probeSeen++
	switch {
	case s.Dropped:
		v.saved = v.smooth(v.saved, v.saved-log10(int(v.saved)))
	case s.RTT > 0 && s.InFlight <= v.probeLimit:
		if v.probeMin == 0 || s.RTT < v.probeMin {
			v.probeMin = s.RTT
		}
		v.probeGood++
	}
	if v.probeGood >= v.probeLimit || v.probeSeen >= v.probeMax {
		if v.probeMin > 0 {
			v.noLoad = v.probeMin
		}
		v.limit = v.saved
		v.probing = false
		v.sinceProbe = 0
	}
}

// Limit returns the current limit: ⌊L⌋, or the reduced limit during a probe.
func (v *Vegas) Limit() int {
	switch {
	case !v.ready:
		return VegasConfig{}.withDefaults().Initial
	case v.probing:
		return v.probeLimit
	}
	return int(v.limit)
}

// NoLoadRTT returns the baseline: the lowest RTT seen since the last probe
// (or since the start), 0 before the first sample.
func (v *Vegas) NoLoadRTT() time.Duration { return v.noLoad }

// Config returns the configuration in effect, with the defaults filled in.
func (v *Vegas) Config() VegasConfig {
	if !v.ready {
		return VegasConfig{}.withDefaults()
	}
	return v.cfg
}
