package limit

import (
	"errors"
	"time"
)

// Gradient2Config configures [Gradient2]. A zero field means the default
// given in brackets (Netflix's). It is plain data: copy it and share it
// freely.
type Gradient2Config struct {
	Initial    int     `json:"initial,omitempty" yaml:"initial,omitempty"`         // starting limit [20, moved into [Min, Max]]
	Min        int     `json:"min,omitempty" yaml:"min,omitempty"`                 // lowest limit, ≥ 1 [20]
	Max        int     `json:"max,omitempty" yaml:"max,omitempty"`                 // highest limit, in [Min, 2³⁰] [200]
	Smoothing  float64 `json:"smoothing,omitempty" yaml:"smoothing,omitempty"`     // weight of each new estimate, in (0, 1] [0.2]
	QueueSize  float64 `json:"queue_size,omitempty" yaml:"queue_size,omitempty"`   // requests of headroom added to each estimate, > 0 [4]
	LongWindow int     `json:"long_window,omitempty" yaml:"long_window,omitempty"` // samples in the long-term RTT average, ≥ 1 [600]
	Tolerance  float64 `json:"tolerance,omitempty" yaml:"tolerance,omitempty"`     // RTT growth tolerated before backing off, ≥ 1 [1.5]
}

// Defaults of Gradient2Config.
const (
	defaultG2Initial    = 20
	defaultG2Min        = 20
	defaultG2Max        = 200
	defaultG2Smoothing  = 0.2
	defaultG2QueueSize  = 4
	defaultG2LongWindow = 600
	defaultG2Tolerance  = 1.5

	g2Warmup = 10   // samples averaged plainly before the long RTT turns exponential
	g2Drift  = 2    // long/short ratio beyond which the long RTT decays
	g2Decay  = 0.95 // factor of that decay, per sample
)

// withDefaults returns c with its zero fields set to their defaults.
func (c Gradient2Config) withDefaults() Gradient2Config {
	c.Min = orInt(c.Min, defaultG2Min)
	c.Max = orInt(c.Max, defaultG2Max)
	c.Initial = orInt(c.Initial, max(c.Min, min(c.Max, defaultG2Initial)))
	c.Smoothing = orFloat(c.Smoothing, defaultG2Smoothing)
	c.QueueSize = orFloat(c.QueueSize, defaultG2QueueSize)
	c.LongWindow = orInt(c.LongWindow, defaultG2LongWindow)
	c.Tolerance = orFloat(c.Tolerance, defaultG2Tolerance)
	return c
}

// Validate reports whether c, once its zero fields take their defaults,
// describes a valid Gradient2. The error wraps [ErrInvalidConfig] and names
// every invalid field.
func (c Gradient2Config) Validate() error {
	c = c.withDefaults()
	errs := []error{checkBounds(c.Initial, c.Min, c.Max)}
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		errs = append(errs, invalid("smoothing", "must be in (0, 1], got %g", c.Smoothing))
	}
	if !(c.QueueSize > 0 && c.QueueSize <= 1e6) {
		errs = append(errs, invalid("queue_size", "must be in (0, 1e6], got %g", c.QueueSize))
	}
	if c.LongWindow < 1 {
		errs = append(errs, invalid("long_window", "must be at least 1, got %d", c.LongWindow))
	}
	if !(c.Tolerance >= 1 && c.Tolerance <= 1e6) {
		errs = append(errs, invalid("tolerance", "must be in [1, 1e6], got %g", c.Tolerance))
	}
	return errors.Join(errs...)
}

// Gradient2 is a delay-based limit with the semantics of Netflix's
// Gradient2Limit. It compares each sample's RTT (short) with a long-term
// average of RTTs (long) and shrinks the limit L in proportion when the
// short one grows more than Tolerance times the long one. For each sample
// with RTT > 0 (drops are treated like any other sample):
//
//	long  = mean of the RTTs so far                     the first min(10, LongWindow) samples
//	long += (RTT − long) × 2 / (LongWindow + 1)          afterwards
//	if long > 2 × RTT: long = long × 0.95                (for the next samples)
//	if 2 × InFlight < L: stop                            (application-limited)
//	gradient = max(0.5, min(1, Tolerance × long / RTT))  (long before the decay)
//	L = (1 − Smoothing) × L + Smoothing × (L × gradient + QueueSize)
//	L = clamp(L, Min, Max)
//
// The limit reported is ⌊L⌋. The gradient is 1 while the RTT stays within
// Tolerance of the long average, so L then grows by Smoothing × QueueSize
// (0.8) per sample; it falls by at most Smoothing × (L/2 − QueueSize) per
// sample, less than 10 % with the defaults. The decay lets the long
// average come back down quickly after a long overload, when it has
// absorbed the high latencies and the current ones are low again. Expected values with the defaults, from L = 40 and
// long = 10 ms (warmed up), for one sample with InFlight = 40:
//
//	RTT      long after            gradient   limit after
//	4 ms     9.481 ms (decayed)    1          40.80
//	10 ms    10 ms                 1          40.80
//	15 ms    10.017 ms             1          40.80
//	20 ms    10.033 ms             0.7525     38.82
//	30 ms    10.067 ms             0.5033     36.83
//	100 ms   10.300 ms             0.5        36.80
//
// Gradient2 reacts to changes in latency, not to its level: the long
// average is not a no-load baseline, and it follows the RTT wherever the
// limit takes it. Against a server that stays saturated, whose RTT grows
// with the limit (D × L / C for capacity C and no-load latency D), there is
// no fixed point: the limit grows by 0.8 per sample until the RTT outruns
// the long average by Tolerance, falls back, and starts again. In the
// package's closed-loop test (C = 8, D = 10 ms, Min 1) it saws between
// about 15 and 88, averaging about 46, and the same at C = 4. This is the
// published algorithm's behaviour, not a flaw of this port: Netflix's own
// tracker records it (concurrency-limits issue #137, a steady RTT lets the
// limit grow to Max; PR #134, still open, where failsafe-go's author reports
// the limit creeping up without end under modest overload). Tuning does not
// remove it: Tolerance 1.0–1.5 with QueueSize 1–4 gives at best a mean of
// about 17 at C = 8. A no-load baseline gives a fixed point but goes stale:
// measured in the same loop with the minimum RTT ever seen in place of the
// long average, the limit settles at C + QueueSize (Tolerance 1; mean 11.6
// at C = 8) or about 1.5 C + QueueSize (Tolerance 1.5; mean 16.4), and once
// the no-load latency triples it sits at 2 × QueueSize = 8 whatever the
// capacity (C = 16 included). Keeping such a baseline current takes probing,
// which is what Vegas does. Prefer [Vegas] for a server that is kept saturated; Gradient2 suits
// one that is saturated only now and then, so that its long average holds
// the latency of normal times.
//
// The zero Gradient2 behaves as one built from the zero [Gradient2Config].
// A Gradient2 is not safe for concurrent use (wrap it in a [Limiter]);
// Update allocates nothing.
type Gradient2 struct {
	cfg   Gradient2Config
	limit float64 // L
	long  float64 // long-term RTT average, in nanoseconds
	n     int     // samples averaged, up to the warm-up count
	warm  int     // warm-up count: min(g2Warmup, LongWindow)
	alpha float64 // weight of a sample after the warm-up: 2 / (LongWindow + 1)
	ready bool
}

var _ Algorithm = (*Gradient2)(nil)

// NewGradient2 returns a Gradient2 configured by c (zero fields take their
// defaults) at its initial limit, with no RTT history, or an error wrapping
// [ErrInvalidConfig].
func NewGradient2(c Gradient2Config) (*Gradient2, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &Gradient2{}
	g.init(c)
	return g, nil
}

func (g *Gradient2) init(c Gradient2Config) {
	*g = Gradient2{cfg: c.withDefaults(), ready: true}
	g.limit = float64(g.cfg.Initial)
	g.warm = min(g2Warmup, g.cfg.LongWindow)
	g.alpha = 2 / float64(g.cfg.LongWindow+1)
}

// Update applies the rule in the type's documentation and returns the new
// limit.
func (g *Gradient2) Update(s Sample) int {
	if !g.ready {
		g.init(Gradient2Config{})
	}
	if s.RTT <= 0 {
		return int(g.limit)
	}
	short := float64(s.RTT)
	if g.n < g.warm {
		g.n++
		g.long += (short - g.long) / float64(g.n)
	} else {
		g.long += (short - g.long) * g.alpha
	}
	long := g.long
	if long > g2Drift*short {
		g.long *= g2Decay
	}
	if 2*float64(s.InFlight) < g.limit {
		return int(g.limit)
	}
	gradient := clamp(g.cfg.Tolerance*long/short, 0.5, 1)
	l := (1-g.cfg.Smoothing)*g.limit + g.cfg.Smoothing*(g.limit*gradient+g.cfg.QueueSize)
	g.limit = clamp(l, float64(g.cfg.Min), float64(g.cfg.Max))
	return int(g.limit)
}

// Limit returns the current limit, ⌊L⌋.
func (g *Gradient2) Limit() int {
	if !g.ready {
		return Gradient2Config{}.withDefaults().Initial
	}
	return int(g.limit)
}

// LongRTT returns the long-term RTT average, 0 before the first sample.
func (g *Gradient2) LongRTT() time.Duration { return time.Duration(g.long) }

// Config returns the configuration in effect, with the defaults filled in.
func (g *Gradient2) Config() Gradient2Config {
	if !g.ready {
		return Gradient2Config{}.withDefaults()
	}
	return g.cfg
}
