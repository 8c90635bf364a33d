package scenario

import (
	"math"
	"time"
)

// The capacity figures of a scenario's services, when every call succeeds
// at the first try: what `stormguard analyze` reports for each service and
// the load `stormguard sweep` takes for a client's target, from this one
// formula.

// Figure is a service's capacity figure.
type Figure struct {
	// Hold is how long one request holds a worker at full speed: its local
	// work — the mean service time (Dist.Average: a mixture's weighted
	// mean), and under the linear law per_request × workers more (every
	// worker busy) — and, for each call, twice the mean network latency
	// and the callee's own Hold.
	Hold time.Duration
	// Capacity is the attempts per second it serves with every worker
	// busy: workers ÷ (the local work ÷ its speed + the calls), the speed
	// being the thrashing curve's with every worker busy
	// (CapacityLaw.Speed(workers): past a knee, the fallen capacity);
	// under processor sharing at most cores × speed ÷ the local work;
	// replicas multiply it. A tick capacity serves per_tick per tick.
	// +Inf when nothing bounds it (no service time, no calls).
	Capacity float64
	// Peak is Capacity at full speed: the capacity before a thrashing
	// curve's knee (Capacity itself without a curve, or for a tick
	// capacity).
	Peak float64
}

// Figures returns the capacity figure of every service of s, in the order
// of s.Services. Its zero fields take their defaults. s must be valid (see
// Validate); a cycle in its calls would count as no calls.
func Figures(s Scenario) []Figure {
	s = s.WithDefaults()
	idx := make(map[string]int, len(s.Services))
	for i, v := range s.Services {
		idx[v.Name] = i
	}
	hold := make([]time.Duration, len(s.Services))
	done := make([]bool, len(s.Services))
	var holdOf func(i, depth int) time.Duration
	holdOf = func(i, depth int) time.Duration {
		if done[i] || depth > len(s.Services) {
			return hold[i] // a cycle (Validate rejects it) ends here
		}
		v := s.Services[i]
		h := localWork(v)
		for _, c := range v.Calls {
			if j, ok := idx[c.Service]; ok {
				h += 2*c.Network.Latency.Average() + holdOf(j, depth+1)
			}
		}
		hold[i], done[i] = h, true
		return h
	}
	out := make([]Figure, len(s.Services))
	for i, v := range s.Services {
		f := Figure{Hold: holdOf(i, 0)}
		switch {
		case v.Capacity != nil:
			f.Capacity = float64(v.Capacity.PerTick) / v.Capacity.Tick.Seconds()
			f.Peak = f.Capacity
		default:
			local := localWork(v)
			calls := f.Hold - local
			f.Capacity = capacityAt(v, local, calls, v.Law.Speed(v.Workers))
			f.Peak = capacityAt(v, local, calls, 1)
		}
		out[i] = f
	}
	return out
}

// localWork is how long a request's local work holds a worker of v (with
// its defaults) at full speed.
func localWork(v Service) time.Duration {
	local := v.ServiceTime.Average()
	if v.Law != nil && v.Law.Kind == "linear" {
		local += time.Duration(v.Workers) * v.Law.PerRequest
	}
	return local
}

// capacityAt is the attempts per second v (with its defaults) serves with
// every worker busy, its local work taking local at full speed and running
// at speed, its calls taking calls.
func capacityAt(v Service, local, calls time.Duration, speed float64) float64 {
	h := time.Duration(float64(local)/speed) + calls
	if h <= 0 {
		return math.Inf(1)
	}
	c := float64(v.Workers) / h.Seconds()
	if v.Law != nil && v.Law.Kind == "processor-sharing" && local > 0 {
		c = math.Min(c, v.Law.Cores*speed/local.Seconds())
	}
	return c * float64(v.Replicas)
}

// ServiceCapacity is the Capacity of the service named target (see
// Figure): +Inf when nothing bounds it, 0 when s has no such service. The
// cache in front of it is not counted (see Capacity).
func ServiceCapacity(s Scenario, target string) float64 {
	for i, v := range s.Services {
		if v.Name == target {
			return Figures(s)[i].Capacity
		}
	}
	return 0
}

// Capacity estimates the requests per second the service named target can
// serve when every call succeeds at the first try: its ServiceCapacity,
// and then
//
//   - no more than any callee serves (a callee called twice per request
//     counts twice);
//   - a look-aside cache in front of a service passes on only its misses:
//     the requests per second it serves are its capacity ÷ (1 − the warm
//     hit rate, Cache.WarmHitRate), the advertised capacity of a cached
//     service.
//
// It is 0 when it cannot be told (no service time, or a cache that hits
// every request) and when s has no such service.
func Capacity(s Scenario, target string) float64 {
	figs := Figures(s)
	idx := make(map[string]int, len(s.Services))
	for i, v := range s.Services {
		idx[v.Name] = i
	}
	memo := map[int]float64{}
	var reqs func(i, depth int) float64 // requests/s arriving at i that it serves
	reqs = func(i, depth int) float64 {
		if c, ok := memo[i]; ok {
			return c
		}
		if depth > len(s.Services) {
			return 0 // a cycle: Validate rejects it
		}
		v := s.Services[i]
		c := figs[i].Capacity
		count := map[int]int{}
		for _, call := range v.Calls {
			if j, ok := idx[call.Service]; ok {
				count[j]++
			}
		}
		for j, n := range count {
			c = math.Min(c, reqs(j, depth+1)/float64(n))
		}
		if v.Cache != nil {
			c /= 1 - v.Cache.WarmHitRate()
		}
		memo[i] = c
		return c
	}
	i, ok := idx[target]
	if !ok {
		return 0
	}
	c := reqs(i, 0)
	if math.IsInf(c, 0) || math.IsNaN(c) || !(c > 0) {
		return 0
	}
	return c
}
