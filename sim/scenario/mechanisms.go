package scenario

import (
	"fmt"
	"math"
	"time"
)

// The sustaining mechanisms a service can declare beyond workers and a
// queue: how its speed depends on the attempts in service (CapacityLaw),
// what failures cost (FailureCost), attempts that never answer (Hang),
// replicas that crash under overload (Crash) and a look-aside cache in front
// of it (Cache). docs/simulator.md states each rule.

// CapacityLaw says how a replica's speed depends on the attempts in
// service: the attempts holding one of its workers (doing local work,
// waiting on downstream calls, or hung).
//
//	fixed              each attempt takes its service time, divided by
//	                   Speed(n) for the n in service when it starts [default]
//	processor-sharing  the attempts doing local work share Cores cores: with
//	                   m of them, each progresses at min(1, Cores/m) × Speed(n)
//	                   of full speed, re-evaluated whenever m or n changes
//	linear             an attempt started with n in service (itself included)
//	                   takes its service time + PerRequest × n (Brooker's
//	                   congestive-collapse server: 1 s + 10 ms × n)
//
// Speed(n) is the thrashing curve: 1 up to Knee attempts in service and
// 1 − Drop beyond it, or the piecewise-linear Curve; 1 when neither is set.
type CapacityLaw struct {
	Kind       string        `yaml:"kind,omitempty" json:"kind,omitempty"`
	Cores      float64       `yaml:"cores,omitempty" json:"cores,omitempty"`                // processor-sharing [1]
	PerRequest time.Duration `yaml:"per_request,omitempty" json:"per_request_ns,omitempty"` // linear
	Knee       int           `yaml:"knee,omitempty" json:"knee,omitempty"`
	Drop       float64       `yaml:"drop,omitempty" json:"drop,omitempty"`
	Curve      []CurvePoint  `yaml:"curve,omitempty" json:"curve,omitempty"`
}

// CurvePoint is one point of a thrashing curve: with InService attempts in
// service, the replica runs at Speed (a fraction of full speed).
type CurvePoint struct {
	InService int     `yaml:"in_service" json:"in_service"`
	Speed     float64 `yaml:"speed" json:"speed"`
}

// Speed returns the thrashing curve's speed with n attempts in service: 1
// for a nil law.
func (l *CapacityLaw) Speed(n int) float64 {
	switch {
	case l == nil:
		return 1
	case l.Knee > 0:
		if n > l.Knee {
			return 1 - l.Drop
		}
		return 1
	case len(l.Curve) > 0:
		c := l.Curve
		if n <= c[0].InService {
			return c[0].Speed
		}
		for i := 1; i < len(c); i++ {
			if n <= c[i].InService {
				f := float64(n-c[i-1].InService) / float64(c[i].InService-c[i-1].InService)
				return c[i-1].Speed + f*(c[i].Speed-c[i-1].Speed)
			}
		}
		return c[len(c)-1].Speed
	}
	return 1
}

func (l *CapacityLaw) validate() error {
	switch l.Kind {
	case "", "fixed", "processor-sharing":
	case "linear":
		if l.PerRequest < 0 {
			return &FieldError{"per_request", fmt.Sprintf("%v is negative", l.PerRequest)}
		}
	default:
		return &FieldError{"kind", fmt.Sprintf("%q is not one of fixed, processor-sharing, linear", l.Kind)}
	}
	if l.Kind != "linear" && l.PerRequest != 0 {
		return &FieldError{"per_request", "is for kind linear"}
	}
	if l.Kind != "processor-sharing" && l.Cores != 0 {
		return &FieldError{"cores", "is for kind processor-sharing"}
	}
	if l.Kind == "processor-sharing" && !(l.Cores >= 0 && l.Cores <= 1e6) {
		return &FieldError{"cores", fmt.Sprintf("%v is outside (0, 1e6] (absent: 1)", l.Cores)}
	}
	if l.Knee < 0 {
		return &FieldError{"knee", fmt.Sprintf("%d is negative", l.Knee)}
	}
	if l.Knee > 0 && len(l.Curve) > 0 {
		return &FieldError{"knee", "and curve are two ways to say the same thing: give one"}
	}
	if l.Knee > 0 && !(l.Drop > 0 && l.Drop < 1) {
		return &FieldError{"drop", fmt.Sprintf("%v must be in (0, 1) with a knee (0.5 halves the speed beyond it)", l.Drop)}
	}
	if l.Knee == 0 && l.Drop != 0 {
		return &FieldError{"drop", "needs a knee"}
	}
	for i, p := range l.Curve {
		if !(p.Speed > 0 && p.Speed <= 1) {
			return &FieldError{fmt.Sprintf("curve.%d.speed", i), fmt.Sprintf("%v is outside (0, 1]", p.Speed)}
		}
		if p.InService < 0 || (i > 0 && p.InService <= l.Curve[i-1].InService) {
			return &FieldError{fmt.Sprintf("curve.%d.in_service", i), fmt.Sprintf("%d must be ≥ 0 and above the previous point's", p.InService)}
		}
	}
	return nil
}

// FailureCost is work that failures take from the same capacity as
// requests, per event. The answer is not delayed; the work is done before
// any queued request (see docs/simulator.md).
type FailureCost struct {
	// Refuse: an attempt refused at admission by a replica (limiter, full
	// queue, the kill switch's shed fraction). A connection refused because
	// no replica is up costs nothing: no replica is there to do the work.
	Refuse time.Duration `yaml:"refuse,omitempty" json:"refuse_ns,omitempty"`
	// Shed: a queued attempt shed later (evicted for a better one, CoDel).
	Shed time.Duration `yaml:"shed,omitempty" json:"shed_ns,omitempty"`
	// Expire: an attempt dropped because its propagated deadline passed.
	Expire time.Duration `yaml:"expire,omitempty" json:"expire_ns,omitempty"`
	// Error: an error answer (error_rate, a failed downstream call).
	Error time.Duration `yaml:"error,omitempty" json:"error_ns,omitempty"`
	// Timeout: one of this service's downstream attempts timed out (the
	// worker that notices logs it, say).
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout_ns,omitempty"`
}

func (f FailureCost) validate() error {
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"refuse", f.Refuse}, {"shed", f.Shed}, {"expire", f.Expire}, {"error", f.Error}, {"timeout", f.Timeout}} {
		if c.d < 0 {
			return &FieldError{c.name, fmt.Sprintf("%v is negative", c.d)}
		}
	}
	return nil
}

// Hang makes attempts hang: with Probability an attempt that gets a worker
// never answers and holds the worker, doing no work, until its propagated
// deadline (when it carries one) or Release after it started, whichever is
// sooner; with neither, until the end of the run. The caller times out.
type Hang struct {
	Probability float64       `yaml:"probability" json:"probability"`
	Release     time.Duration `yaml:"release,omitempty" json:"release_ns,omitempty"`
}

func (h Hang) validate() error {
	if !(h.Probability >= 0 && h.Probability <= 1) {
		return &FieldError{"probability", fmt.Sprintf("%v is outside [0, 1]", h.Probability)}
	}
	if h.Release < 0 {
		return &FieldError{"release", fmt.Sprintf("%v is negative", h.Release)}
	}
	return nil
}

// Crash makes a replica crash when its queue passes a limit: Queue attempts,
// or MemoryMB of memory at RequestKB per queued attempt. A crash loses the
// replica's queue and the attempts in service (their callers see the
// connection reset at once), and the replica serves again Restart later,
// with a fresh queue and limiter, optionally Cold.
type Crash struct {
	Queue     int           `yaml:"queue,omitempty" json:"queue,omitempty"`
	MemoryMB  float64       `yaml:"memory_mb,omitempty" json:"memory_mb,omitempty"`
	RequestKB float64       `yaml:"request_kb,omitempty" json:"request_kb,omitempty"`
	Restart   time.Duration `yaml:"restart" json:"restart_ns"`
	Cold      *Cold         `yaml:"cold,omitempty" json:"cold,omitempty"`
}

// Cold is a slow start after a restart: the replica's speed starts at
// Speed and rises linearly to full over Duration (caches and JIT warming).
type Cold struct {
	Duration time.Duration `yaml:"duration" json:"duration_ns"`
	Speed    float64       `yaml:"speed" json:"speed"`
}

// Limit returns the queue length past which the replica crashes.
func (c *Crash) Limit() int {
	if c.Queue > 0 {
		return c.Queue
	}
	return int(math.Floor(c.MemoryMB * 1024 / c.RequestKB))
}

func (c *Crash) validate() error {
	switch {
	case c.Queue < 0:
		return &FieldError{"queue", fmt.Sprintf("%d is negative", c.Queue)}
	case c.Queue > 0 && (c.MemoryMB != 0 || c.RequestKB != 0):
		return fmt.Errorf("give queue, or memory_mb with request_kb, not both")
	case c.Queue == 0 && !(c.MemoryMB > 0 && c.RequestKB > 0):
		return fmt.Errorf("needs queue > 0, or memory_mb > 0 with request_kb > 0")
	case c.Queue == 0 && c.Limit() < 1:
		return &FieldError{"memory_mb", fmt.Sprintf("%v at request_kb %v holds no request", c.MemoryMB, c.RequestKB)}
	case c.Restart <= 0:
		return &FieldError{"restart", "must be > 0 (how long the replica is down)"}
	}
	if c.Cold != nil && (c.Cold.Duration <= 0 || !(c.Cold.Speed > 0 && c.Cold.Speed <= 1)) {
		return &FieldError{"cold", "needs duration > 0 and speed in (0, 1]"}
	}
	return nil
}

// Cache is a look-aside cache in front of a service, shared by every
// caller: a caller looks a request up first; a hit is answered after
// Latency without reaching the service; a miss goes to the service and, if
// it succeeds (in time: the caller was still waiting), fills the cache.
//
// Either a fixed HitRate (no keys: every lookup hits with that probability,
// and a cache-flush trigger makes every lookup miss while it lasts), or
// Keys drawn from a Zipf popularity (key k, from 0, has weight
// (k + 1)^−Zipf; Zipf [1], 0 makes every key equally popular) over that many keys
// with an LRU of Size entries, each valid for TTL after its fill (0: no
// expiry). A keyed cache starts warm (the Size most popular keys) unless Cold.
type Cache struct {
	HitRate float64       `yaml:"hit_rate,omitempty" json:"hit_rate,omitempty"`
	Keys    int           `yaml:"keys,omitempty" json:"keys,omitempty"`
	Zipf    *float64      `yaml:"zipf,omitempty" json:"zipf,omitempty"`
	Size    int           `yaml:"size,omitempty" json:"size,omitempty"`
	TTL     time.Duration `yaml:"ttl,omitempty" json:"ttl_ns,omitempty"`
	Latency Dist          `yaml:"latency,omitempty" json:"latency"`
	Cold    bool          `yaml:"cold,omitempty" json:"cold,omitempty"`
}

// WarmHitRate is the cache's hit rate when warm: HitRate, or for a keyed
// cache the popularity share of its Size most popular keys — the most an
// LRU of that size can hit (it holds other keys too).
func (c *Cache) WarmHitRate() float64 {
	if c.Keys == 0 {
		return c.HitRate
	}
	s := 1.0
	if c.Zipf != nil {
		s = *c.Zipf
	}
	var top, all float64
	for k := range c.Keys {
		w := math.Pow(float64(k+1), -s)
		all += w
		if k < c.Size {
			top += w
		}
	}
	return top / all
}

// maxCacheKeys bounds a keyed cache (17 bytes a key).
const maxCacheKeys = 10_000_000

func (c *Cache) validate() error {
	switch {
	case c.Keys == 0 && c.Size == 0 && c.Zipf == nil && c.TTL == 0 && !c.Cold:
		if !(c.HitRate > 0 && c.HitRate <= 1) {
			return &FieldError{"hit_rate", fmt.Sprintf("%v is outside (0, 1]; or give keys and size for a keyed cache", c.HitRate)}
		}
	case c.HitRate != 0:
		return &FieldError{"hit_rate", "is for a cache without keys; a keyed cache's hit rate follows from keys, zipf and size"}
	case c.Keys <= 0 || c.Keys > maxCacheKeys:
		return &FieldError{"keys", fmt.Sprintf("%d is outside [1, %d]", c.Keys, maxCacheKeys)}
	case c.Size <= 0 || c.Size > c.Keys:
		return &FieldError{"size", fmt.Sprintf("%d is outside [1, keys = %d]", c.Size, c.Keys)}
	case c.Zipf != nil && !(*c.Zipf >= 0 && *c.Zipf <= 10):
		return &FieldError{"zipf", fmt.Sprintf("%v is outside [0, 10] (0: every key equally popular)", *c.Zipf)}
	case c.TTL < 0:
		return &FieldError{"ttl", fmt.Sprintf("%v is negative", c.TTL)}
	}
	if err := c.Latency.validate(); err != nil {
		var f fieldErrs
		f.wrap(err, "latency")
		return f[0]
	}
	return nil
}

// validateMechanisms reports the problems of a service's mechanisms, at
// their paths under at.
func (v Service) validateMechanisms(f *fieldErrs, at string) {
	if v.Replicas < 0 || v.Replicas > maxReplicas {
		f.add(fmt.Sprintf("%d is outside [1, %d]", v.Replicas, maxReplicas), at, "replicas")
	}
	switch v.Balancer {
	case "", "round-robin", "least-outstanding":
	default:
		f.add(fmt.Sprintf("%q is not round-robin or least-outstanding", v.Balancer), at, "balancer")
	}
	if v.Law != nil {
		f.wrap(v.Law.validate(), at, "capacity_law")
	}
	f.wrap(v.FailureCost.validate(), at, "failure_cost")
	if v.Hang != nil {
		f.wrap(v.Hang.validate(), at, "hang")
	}
	if v.Crash != nil {
		f.wrap(v.Crash.validate(), at, "crash")
	}
	if v.Cache != nil {
		f.wrap(v.Cache.validate(), at, "cache")
	}
	if v.Capacity != nil && (v.Replicas > 1 || v.Law != nil || v.Hang != nil || v.Crash != nil || v.FailureCost != (FailureCost{})) {
		f.add("capacity (per tick) replaces workers and queue: it takes no replicas, capacity_law, hang, crash or failure_cost", at, "capacity")
	}
}

// SimOnly names the first of the service's mechanisms that only the
// simulator models (the lab's real processes do not), or "" if none.
func (v Service) SimOnly() string {
	switch {
	case v.Replicas > 1:
		return "replicas"
	case v.Law != nil:
		return "capacity_law"
	case v.FailureCost != (FailureCost{}):
		return "failure_cost"
	case v.Hang != nil:
		return "hang"
	case v.Crash != nil:
		return "crash"
	case v.Cache != nil:
		return "cache"
	}
	return ""
}

// maxReplicas bounds a service's replicas.
const maxReplicas = 10_000

// MaxSpeed is the highest speed factor the law gives any number in
// service: 1 for a nil law.
func (l *CapacityLaw) MaxSpeed() float64 {
	if l == nil || l.Knee > 0 || len(l.Curve) == 0 {
		return 1
	}
	m := 0.0
	for _, p := range l.Curve {
		m = max(m, p.Speed)
	}
	return m
}
