package sim

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
)

// Scenario describes a system and what happens to it, as plain data: a YAML
// file decodes into it (see Load), and the embedded default is one. A zero
// field takes the default given in brackets. Names link the parts: a
// client's Target and a call's Service name a service.
type Scenario struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Duration of virtual time simulated [60s].
	Duration time.Duration `yaml:"duration" json:"duration_ns"`
	// Bin is the width of one row of the time series [1s].
	Bin time.Duration `yaml:"bin,omitempty" json:"bin_ns"`
	// Seed of every random stream; the same scenario and seed give the same
	// bytes [1].
	Seed uint64 `yaml:"seed,omitempty" json:"seed"`

	Clients  []Client  `yaml:"clients" json:"clients"`
	Services []Service `yaml:"services" json:"services"`
	Triggers []Trigger `yaml:"triggers,omitempty" json:"triggers,omitempty"`
	// Actions: an operator's runbook, steps at given times (see Action).
	Actions []Action `yaml:"actions,omitempty" json:"actions,omitempty"`
	Verdict Verdict  `yaml:"verdict,omitempty" json:"verdict"`
}

// Client is a population of callers: open-loop arrivals or closed-loop
// users, split over Processes client processes that each own a retrier (and
// so a budget) built from Policy.
type Client struct {
	Name   string `yaml:"name" json:"name"`
	Target string `yaml:"target" json:"target"` // the service called
	// Arrivals of new requests (first tries).
	Arrivals Arrivals `yaml:"arrivals" json:"arrivals"`
	// Policy: a preset name, or a mapping {preset: NAME, field: value …}
	// that overrides the preset's fields [naive].
	Policy PolicySpec `yaml:"policy,omitempty" json:"policy"`
	// Timeout: the client abandons an attempt with no answer after it,
	// which classes as a timeout [1s].
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout_ns"`
	// Deadline of the whole request, from its arrival; 0 means the request
	// lasts as long as its attempts do [0].
	Deadline time.Duration `yaml:"deadline,omitempty" json:"deadline_ns,omitempty"`
	// PropagateDeadline sends the remaining deadline (the request deadline
	// or, without one, the attempt timeout) with each attempt, so servers
	// can drop work nobody waits for.
	PropagateDeadline bool `yaml:"propagate_deadline,omitempty" json:"propagate_deadline,omitempty"`
	// Processes sharing the arrivals, each with its own retrier and budget [1].
	Processes int `yaml:"processes,omitempty" json:"processes,omitempty"`
	// Fleet, when set, makes the processes share one budget (see FleetSpec)
	// instead of one budget each.
	Fleet *FleetSpec `yaml:"fleet,omitempty" json:"fleet,omitempty"`
	// Network between this client and its target.
	Network Network `yaml:"network,omitempty" json:"network"`
	// Breaker, optional: a circuit breaker in every process's retrier.
	Breaker *BreakerSpec `yaml:"breaker,omitempty" json:"breaker,omitempty"`
	// Humans, optional: the arrivals are people who tap again (see Humans).
	Humans *Humans `yaml:"humans,omitempty" json:"humans,omitempty"`
	// IdempotencyKey: every attempt carries a key, one per request (one per
	// person's intent, every tap the same), for servers that supersede.
	IdempotencyKey bool `yaml:"idempotency_key,omitempty" json:"idempotency_key,omitempty"`
	// PolicyFile and Dependency: see PolicyRef.
	PolicyRef `yaml:",inline"`
}

// Arrivals says when new requests arrive.
//
//	poisson   Poisson process at Rate per second (or the Schedule)
//	constant  evenly spaced at Rate per second (or the Schedule)
//	burst     Count requests at once, at time At
//	closed    Users users, each sends a request, waits for its outcome,
//	          thinks for Think, and sends the next
type Arrivals struct {
	Kind string  `yaml:"kind,omitempty" json:"kind"` // [poisson]
	Rate float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Schedule changes the rate over time: at each point's At the rate
	// becomes Rate, or with Ramp, moves linearly to Rate from the previous
	// point. It overrides Rate.
	Schedule []RatePoint   `yaml:"schedule,omitempty" json:"schedule,omitempty"`
	Count    int           `yaml:"count,omitempty" json:"count,omitempty"`
	At       time.Duration `yaml:"at,omitempty" json:"at_ns,omitempty"`
	Users    int           `yaml:"users,omitempty" json:"users,omitempty"`
	Think    Dist          `yaml:"think,omitempty" json:"think"`
}

// RatePoint is one point of an arrival-rate schedule.
type RatePoint struct {
	At   time.Duration `yaml:"at" json:"at_ns"`
	Rate float64       `yaml:"rate" json:"rate"`
	Ramp bool          `yaml:"ramp,omitempty" json:"ramp,omitempty"`
}

// PolicySpec is a retry policy in a scenario: a preset, with fields
// overridden. In YAML either a preset name (`policy: naive`) or a mapping
// (`policy: {preset: aws-2026, max_attempts: 2}`).
type PolicySpec struct {
	Preset string
	retry.Policy
}

// Service is a pool of workers behind an admission queue.
type Service struct {
	Name string `yaml:"name" json:"name"`
	// Workers that serve requests concurrently [1].
	Workers int `yaml:"workers,omitempty" json:"workers"`
	// ServiceTime of one request on one worker, excluding downstream calls.
	ServiceTime Dist `yaml:"service_time" json:"service_time"`
	// Queue of admitted requests waiting for a worker.
	Queue QueueSpec `yaml:"queue,omitempty" json:"queue"`
	// Limiter, optional: an adaptive concurrency limit on requests in
	// service; excess is rejected at once (503, this instance overloaded).
	Limiter *limit.Spec `yaml:"limiter,omitempty" json:"limiter,omitempty"`
	// ExpiredDrop: work whose propagated deadline has passed (or leaves
	// less than MinRemaining) is dropped before it starts.
	ExpiredDrop  bool          `yaml:"expired_drop,omitempty" json:"expired_drop,omitempty"`
	MinRemaining time.Duration `yaml:"min_remaining,omitempty" json:"min_remaining_ns,omitempty"`
	// Slowdown: the seed's "capacity drops": service time is multiplied by
	// 1 + Factor × min(1, queued / Queue) as the queue grows.
	Slowdown Slowdown `yaml:"slowdown,omitempty" json:"slowdown"`
	// ErrorRate: probability that a response fails (a transient error),
	// independently of everything else.
	ErrorRate float64 `yaml:"error_rate,omitempty" json:"error_rate,omitempty"`
	// Calls made, one after the other, while a worker handles a request;
	// the worker is held meanwhile.
	Calls []Call `yaml:"calls,omitempty" json:"calls,omitempty"`
	// OnCallFailure: "fail" (answer with an error; the default) or
	// "fallback" (answer with a degraded success).
	OnCallFailure string `yaml:"on_call_failure,omitempty" json:"on_call_failure,omitempty"`
	// Capacity limits the service to a number of admissions per Tick
	// instead of workers and a queue: the seed 004 "virtual capacity" model.
	// An attempt beyond it in the same tick fails at once.
	Capacity *TickCapacity `yaml:"capacity,omitempty" json:"capacity,omitempty"`
	// Defenses: "stormguard" turns on the shipped server defaults
	// (first tries first with adaptive LIFO, expired drop, overload
	// signals) unless the fields say otherwise.
	Defenses string `yaml:"defenses,omitempty" json:"defenses,omitempty"`

	// Replicas of the service behind one balancer, each with its own
	// workers, queue, limiter and capacity law [1].
	Replicas int `yaml:"replicas,omitempty" json:"replicas,omitempty"`
	// Balancer spreads attempts over the replicas that are up:
	// round-robin or least-outstanding (fewest queued + in service)
	// [round-robin].
	Balancer string `yaml:"balancer,omitempty" json:"balancer,omitempty"`
	// Law says how a replica's speed depends on the attempts in service
	// (see CapacityLaw) [fixed].
	Law *CapacityLaw `yaml:"capacity_law,omitempty" json:"capacity_law,omitempty"`
	// FailureCost: work that refusals, sheds, expiries, errors and timeouts
	// take from the same capacity [free].
	FailureCost FailureCost `yaml:"failure_cost,omitempty" json:"failure_cost"`
	// Hang: attempts that never answer and hold their worker.
	Hang *Hang `yaml:"hang,omitempty" json:"hang,omitempty"`
	// Crash: a replica crashes when its queue passes a limit.
	Crash *Crash `yaml:"crash,omitempty" json:"crash,omitempty"`
	// Cache: a look-aside cache in front of the service.
	Cache *Cache `yaml:"cache,omitempty" json:"cache,omitempty"`
	// Autoscale scales its replicas from a metric (see Autoscale).
	Autoscale *Autoscale `yaml:"autoscale,omitempty" json:"autoscale,omitempty"`
	// Supersede collapses attempts with the same idempotency key (see
	// Supersede).
	Supersede *Supersede `yaml:"supersede,omitempty" json:"supersede,omitempty"`
	// PolicyFile and Server: admission from a policy file's server block
	// (see ServerRef).
	ServerRef `yaml:",inline"`
}

// QueueSpec configures a service's admission queue.
type QueueSpec struct {
	// Capacity: queued requests beyond it are rejected [200000, in
	// effect unbounded].
	Capacity int `yaml:"capacity,omitempty" json:"capacity,omitempty"`
	// Discipline [fifo]:
	//
	//	fifo                        oldest first
	//	lifo                        newest first
	//	first-tries-first           first tries before retries, each oldest first
	//	adaptive-lifo               Facebook's adaptive LIFO with CoDel queue timeouts
	//	first-tries-adaptive-lifo   both (stormguard's default)
	Discipline    string        `yaml:"discipline,omitempty" json:"discipline,omitempty"`
	CoDelTarget   time.Duration `yaml:"codel_target,omitempty" json:"codel_target_ns,omitempty"`
	CoDelInterval time.Duration `yaml:"codel_interval,omitempty" json:"codel_interval_ns,omitempty"`
}

// Slowdown models capacity that degrades as the queue grows.
type Slowdown struct {
	Queue  int     `yaml:"queue,omitempty" json:"queue,omitempty"`
	Factor float64 `yaml:"factor,omitempty" json:"factor,omitempty"`
}

// TickCapacity admits at most PerTick attempts in each Tick.
type TickCapacity struct {
	PerTick int           `yaml:"per_tick" json:"per_tick"`
	Tick    time.Duration `yaml:"tick" json:"tick_ns"`
}

// Call is a downstream call a service makes while handling a request.
type Call struct {
	Service string     `yaml:"service" json:"service"`
	Policy  PolicySpec `yaml:"policy,omitempty" json:"policy"`
	// Timeout of one attempt [1s].
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout_ns"`
	// PropagateDeadline passes on the caller's remaining deadline.
	PropagateDeadline bool    `yaml:"propagate_deadline,omitempty" json:"propagate_deadline,omitempty"`
	Network           Network `yaml:"network,omitempty" json:"network"`
	// Breaker, optional: a circuit breaker in the call's retrier.
	Breaker *BreakerSpec `yaml:"breaker,omitempty" json:"breaker,omitempty"`
	// PolicyFile and Dependency: see PolicyRef.
	PolicyRef `yaml:",inline"`
}

// Network is one direction's latency on a call edge (the same both ways).
type Network struct {
	Latency Dist `yaml:"latency,omitempty" json:"latency"`
}

// Trigger is a disturbance at a given time.
//
//	outage    the network into Target is cut: Mode "hold" keeps packets and
//	          delivers them together at the end; "drop" fails them at once
//	          (connection refused) [hold]
//	latency   Add is added to the network latency into Target
//	capacity  Target's service time is divided by Factor (0.5 halves capacity)
//	load      every client's arrival rate is multiplied by Factor
//	pause     Target stops starting work (a GC or VM pause)
//	errors    Target's responses fail with probability Factor (a brownout)
//	hang      Target's attempts hang with probability Factor (see Hang),
//	          released after Release
//	cache-flush  Target's cache loses its Keys most popular keys (0: all) at
//	          At; a cache without keys misses every lookup while it lasts
type Trigger struct {
	Kind     string        `yaml:"kind" json:"kind"`
	At       time.Duration `yaml:"at" json:"at_ns"`
	Duration time.Duration `yaml:"duration" json:"duration_ns"`
	Target   string        `yaml:"target,omitempty" json:"target,omitempty"`
	Mode     string        `yaml:"mode,omitempty" json:"mode,omitempty"`
	Add      time.Duration `yaml:"add,omitempty" json:"add_ns,omitempty"`
	Factor   float64       `yaml:"factor,omitempty" json:"factor,omitempty"`
	Release  time.Duration `yaml:"release,omitempty" json:"release_ns,omitempty"`
	Keys     int           `yaml:"keys,omitempty" json:"keys,omitempty"`
}

// Verdict configures how a run is judged (see Verdict in result.go).
type Verdict struct {
	// Healthy: a bin is healthy when goodput ≥ Healthy × demand [0.9].
	Healthy float64 `yaml:"healthy,omitempty" json:"healthy"`
	// Warmup bins at the start are not judged [the client timeout, ≥ 1 bin].
	Warmup time.Duration `yaml:"warmup,omitempty" json:"warmup_ns"`
}

// Dist is a distribution of durations.
//
//	constant     Mean
//	exponential  mean Mean
//	uniform      U[Min, Max]
//	lognormal    mean Mean, with the given standard deviation of log(x): Sigma
//	mixture      one of Of, drawn by weight, then sampled (components nest)
type Dist struct {
	Kind  string        `yaml:"kind,omitempty" json:"kind,omitempty"` // [constant]
	Mean  time.Duration `yaml:"mean,omitempty" json:"mean_ns,omitempty"`
	Min   time.Duration `yaml:"min,omitempty" json:"min_ns,omitempty"`
	Max   time.Duration `yaml:"max,omitempty" json:"max_ns,omitempty"`
	Sigma float64       `yaml:"sigma,omitempty" json:"sigma,omitempty"`
	Of    []Component   `yaml:"of,omitempty" json:"of,omitempty"`
}

// Component is one part of a mixture: a distribution and its weight (the
// weights need not sum to 1; each part is drawn with weight / Σ weights).
type Component struct {
	Weight float64 `yaml:"weight" json:"weight"`
	Dist   `yaml:",inline"`
}

// Defaults.
const (
	DefaultDuration = 60 * time.Second
	DefaultBin      = time.Second
	DefaultTimeout  = time.Second
	DefaultHealthy  = 0.9
)

// withDefaults returns a copy of s with zero fields set.
func (s Scenario) withDefaults() Scenario {
	if s.Duration == 0 {
		s.Duration = DefaultDuration
	}
	if s.Bin == 0 {
		s.Bin = DefaultBin
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Verdict.Healthy == 0 {
		s.Verdict.Healthy = DefaultHealthy
	}
	s.Clients = append([]Client(nil), s.Clients...)
	maxTimeout := time.Duration(0)
	for i := range s.Clients {
		c := &s.Clients[i]
		if c.Arrivals.Kind == "" {
			c.Arrivals.Kind = "poisson"
		}
		if c.Timeout == 0 {
			c.Timeout = DefaultTimeout
		}
		if c.Processes == 0 {
			c.Processes = 1
		}
		if c.Policy.Preset == "" && c.Policy.Policy == (retry.Policy{}) {
			c.Policy.Preset = "naive"
			c.Policy.Policy, _ = retry.Preset("naive")
		}
		maxTimeout = max(maxTimeout, c.Timeout)
	}
	if s.Verdict.Warmup == 0 {
		s.Verdict.Warmup = max(s.Bin, maxTimeout)
	}
	s.Services = append([]Service(nil), s.Services...)
	for i := range s.Services {
		v := &s.Services[i]
		if v.Workers == 0 {
			v.Workers = 1
		}
		if v.Defenses == "stormguard" {
			if v.Queue.Discipline == "" {
				v.Queue.Discipline = "first-tries-adaptive-lifo"
			}
			v.ExpiredDrop = true
		}
		if v.Queue.Discipline == "" {
			v.Queue.Discipline = "fifo"
		}
		if v.OnCallFailure == "" {
			v.OnCallFailure = "fail"
		}
		if v.Replicas == 0 {
			v.Replicas = 1
		}
		if v.Balancer == "" {
			v.Balancer = "round-robin"
		}
		if v.Law != nil {
			l := *v.Law
			if l.Kind == "" {
				l.Kind = "fixed"
			}
			if l.Kind == "processor-sharing" && l.Cores == 0 {
				l.Cores = 1
			}
			v.Law = &l
		}
		if v.Cache != nil && v.Cache.Keys > 0 && v.Cache.Zipf == nil {
			c := *v.Cache
			one := 1.0
			c.Zipf = &one
			v.Cache = &c
		}
		if a := v.Autoscale; a != nil && a.Startup != nil {
			st := *a.Startup
			if st.Timeout == 0 {
				st.Timeout = DefaultTimeout
			}
			if st.RetryAfter == 0 {
				st.RetryAfter = time.Second
			}
			if st.Policy.Preset == "" && st.Policy.Policy == (retry.Policy{}) {
				st.Policy.Preset = "naive"
				st.Policy.Policy, _ = retry.Preset("naive")
			}
			as := *a
			as.Startup = &st
			v.Autoscale = &as
		}
		v.Calls = append([]Call(nil), v.Calls...)
		for j := range v.Calls {
			if v.Calls[j].Timeout == 0 {
				v.Calls[j].Timeout = DefaultTimeout
			}
			if v.Calls[j].Policy.Preset == "" && v.Calls[j].Policy.Policy == (retry.Policy{}) {
				v.Calls[j].Policy.Preset = "naive"
				v.Calls[j].Policy.Policy, _ = retry.Preset("naive")
			}
		}
	}
	for i := range s.Triggers {
		if s.Triggers[i].Kind == "outage" && s.Triggers[i].Mode == "" {
			s.Triggers[i].Mode = "hold"
		}
	}
	return s
}

// Validate reports every problem with the scenario, naming the part.
func (s Scenario) Validate() error {
	var f fieldErrs
	bad := func(path, format string, a ...any) { f.add(fmt.Sprintf(format, a...), path) }
	if s.Duration < 0 {
		bad("duration", "%v is negative", s.Duration)
	}
	if s.Bin < 0 {
		bad("bin", "%v is negative", s.Bin)
	}
	if len(s.Clients) == 0 {
		bad("clients", "no clients: a scenario needs at least one")
	}
	services := map[string]int{}
	for i, v := range s.Services {
		at := elemPath("services", v.Name, i)
		if v.Name == "" {
			bad(at, "name is empty")
		}
		if _, dup := services[v.Name]; dup {
			bad(at+".name", "%q is used twice", v.Name)
		}
		services[v.Name] = i
	}
	clients := map[string]bool{}
	for i, c := range s.Clients {
		at := elemPath("clients", c.Name, i)
		if c.Name == "" {
			bad(at, "name is empty")
		}
		if clients[c.Name] {
			bad(at+".name", "%q is used twice", c.Name)
		}
		clients[c.Name] = true
		if _, ok := services[c.Target]; !ok {
			bad(at+".target", "%q is not a service (have %s)", c.Target, names(s.Services))
		}
		f.wrap(c.Arrivals.validate(), at, "arrivals")
		f.wrap(c.Policy.Policy.Validate(), at, "policy")
		for _, d := range []struct {
			key string
			neg bool
		}{{"timeout", c.Timeout < 0}, {"deadline", c.Deadline < 0}, {"processes", c.Processes < 0}} {
			if d.neg {
				bad(at+"."+d.key, "must not be negative")
			}
		}
		f.wrap(c.Network.Latency.validate(), at, "network.latency")
		if c.Breaker != nil {
			f.wrap(c.Breaker.Spec.Validate(), at, "breaker")
		}
		if c.Humans != nil {
			f.wrap(c.Humans.validate(), at, "humans")
			if c.Arrivals.Kind == "closed" {
				f.add("people tap again on open-loop arrivals (poisson, constant, burst), not closed", at, "humans")
			}
		}
		if c.Fleet != nil {
			f.wrap(c.Fleet.validate(c.Policy.Budget), at, "fleet")
		}
	}
	for i, v := range s.Services {
		at := elemPath("services", v.Name, i)
		if v.Workers < 0 {
			bad(at+".workers", "%d is negative", v.Workers)
		}
		f.wrap(v.ServiceTime.validate(), at, "service_time")
		switch v.Queue.Discipline {
		case "", "fifo", "lifo", "first-tries-first", "adaptive-lifo", "first-tries-adaptive-lifo":
		default:
			bad(at+".queue.discipline", "%q is not one of fifo, lifo, first-tries-first, adaptive-lifo, first-tries-adaptive-lifo", v.Queue.Discipline)
		}
		if v.Queue.Capacity < 0 || v.Queue.Capacity > shed.MaxCapacity {
			bad(at+".queue.capacity", "%d is outside [0, %d]", v.Queue.Capacity, shed.MaxCapacity)
		}
		if v.Limiter != nil {
			if _, err := v.Limiter.New(); err != nil {
				f.wrap(err, at, "limiter")
			}
		}
		if v.ErrorRate < 0 || v.ErrorRate > 1 || math.IsNaN(v.ErrorRate) {
			bad(at+".error_rate", "%v is outside [0, 1]", v.ErrorRate)
		}
		if v.Slowdown.Factor < 0 || v.Slowdown.Queue < 0 {
			bad(at+".slowdown", "must not be negative")
		}
		switch v.OnCallFailure {
		case "", "fail", "fallback":
		default:
			bad(at+".on_call_failure", "%q is not fail or fallback", v.OnCallFailure)
		}
		switch v.Defenses {
		case "", "none", "stormguard":
		default:
			bad(at+".defenses", "%q is not none or stormguard", v.Defenses)
		}
		if v.Capacity != nil && (v.Capacity.PerTick <= 0 || v.Capacity.Tick <= 0) {
			bad(at+".capacity", "needs per_tick > 0 and tick > 0")
		}
		v.validateMechanisms(&f, at)
		if v.Supersede != nil {
			f.wrap(v.Supersede.validate(), at, "supersede")
			if v.Capacity != nil {
				f.add("a tick-capacity service has no queue to supersede in", at, "supersede")
			}
		}
		for j, c := range v.Calls {
			cat := elemPath(at+".calls", c.Service, j)
			if _, ok := services[c.Service]; !ok {
				bad(cat+".service", "%q is not a service", c.Service)
			}
			f.wrap(c.Policy.Policy.Validate(), cat, "policy")
			f.wrap(c.Network.Latency.validate(), cat, "network.latency")
			if c.Breaker != nil {
				f.wrap(c.Breaker.Spec.Validate(), cat, "breaker")
			}
		}
	}
	if err := checkAcyclic(s.Services, services); err != nil {
		f.wrap(err, "services")
	}
	s.validateRunbook(&f, services)
	for i, t := range s.Triggers {
		at := fmt.Sprintf("triggers.%d", i)
		switch t.Kind {
		case "outage", "latency", "capacity", "pause", "errors", "hang", "cache-flush":
			if _, ok := services[t.Target]; !ok {
				bad(at+".target", "%q is not a service (a %s trigger needs one)", t.Target, t.Kind)
			}
		case "load":
		default:
			bad(at+".kind", "%q is not one of outage, latency, capacity, load, pause, errors, hang, cache-flush", t.Kind)
		}
		if j, ok := services[t.Target]; ok && t.Kind == "cache-flush" && s.Services[j].Cache == nil {
			bad(at+".target", "service %q has no cache", t.Target)
		}
		if t.Kind == "hang" && !(t.Factor > 0 && t.Factor <= 1) {
			bad(at+".factor", "%v: the probability that an attempt hangs must be in (0, 1]", t.Factor)
		}
		if t.Release < 0 {
			bad(at+".release", "must not be negative")
		}
		if t.Keys < 0 {
			bad(at+".keys", "must not be negative")
		}
		if t.Release != 0 && t.Kind != "hang" {
			bad(at+".release", "is for kind hang")
		}
		if t.Keys != 0 && t.Kind != "cache-flush" {
			bad(at+".keys", "is for kind cache-flush")
		}
		if t.At < 0 {
			bad(at+".at", "must not be negative")
		}
		if t.Duration < 0 {
			bad(at+".duration", "must not be negative")
		}
		if t.Kind == "outage" && t.Mode != "" && t.Mode != "hold" && t.Mode != "drop" {
			bad(at+".mode", "%q is not hold or drop", t.Mode)
		}
		if (t.Kind == "capacity" || t.Kind == "load") && !(t.Factor > 0) {
			bad(at+".factor", "%v must be > 0", t.Factor)
		}
		if t.Kind == "errors" && !(t.Factor >= 0 && t.Factor <= 1) {
			bad(at+".factor", "%v: the error probability must be in [0, 1]", t.Factor)
		}
	}
	if h := s.Verdict.Healthy; h < 0 || h > 1 {
		bad("verdict.healthy", "%v is outside [0, 1]", h)
	}
	return f.err()
}

// elemPath names the element of a list in a path: by its name, or by its
// index when it has none.
func elemPath(list, name string, i int) string {
	if name == "" || strings.Contains(name, ".") {
		return fmt.Sprintf("%s.%d", list, i)
	}
	return list + "." + name
}

func names(vs []Service) string {
	n := make([]string, len(vs))
	for i, v := range vs {
		n[i] = v.Name
	}
	return strings.Join(n, ", ")
}

// checkAcyclic rejects call graphs with cycles (a request would never end).
func checkAcyclic(vs []Service, idx map[string]int) error {
	state := make([]uint8, len(vs)) // 0 new, 1 on stack, 2 done
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("services: the call graph has a cycle through %q", vs[i].Name)
		case 2:
			return nil
		}
		state[i] = 1
		callees := make([]string, 0, len(vs[i].Calls)+1)
		for _, c := range vs[i].Calls {
			callees = append(callees, c.Service)
		}
		if a := vs[i].Autoscale; a != nil && a.Startup != nil {
			callees = append(callees, a.Startup.Service)
		}
		for _, c := range callees {
			if j, ok := idx[c]; ok {
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		state[i] = 2
		return nil
	}
	for i := range vs {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

func (a Arrivals) validate() error {
	switch a.Kind {
	case "", "poisson", "constant":
		if a.Rate < 0 || math.IsNaN(a.Rate) || math.IsInf(a.Rate, 0) {
			return &FieldError{"rate", fmt.Sprintf("%v is not a finite non-negative number", a.Rate)}
		}
		var last time.Duration = -1
		for i, p := range a.Schedule {
			if p.At < last {
				return &FieldError{fmt.Sprintf("schedule.%d.at", i), fmt.Sprintf("%v is before the previous point", p.At)}
			}
			if p.Rate < 0 || math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) {
				return &FieldError{fmt.Sprintf("schedule.%d.rate", i), fmt.Sprintf("%v is not a finite non-negative number", p.Rate)}
			}
			last = p.At
		}
	case "burst":
		if a.Count <= 0 {
			return &FieldError{"count", "a burst needs count > 0"}
		}
	case "closed":
		if a.Users <= 0 {
			return &FieldError{"users", "closed arrivals need users > 0"}
		}
		if err := a.Think.validate(); err != nil {
			var f fieldErrs
			f.wrap(err, "think")
			return f[0]
		}
		return nil
	default:
		return &FieldError{"kind", fmt.Sprintf("%q is not one of poisson, constant, burst, closed", a.Kind)}
	}
	return nil
}

func (d Dist) validate() error {
	switch d.Kind {
	case "", "constant", "exponential":
		if d.Mean < 0 {
			return &FieldError{"mean", fmt.Sprintf("%v is negative", d.Mean)}
		}
	case "uniform":
		if d.Min < 0 || d.Max < d.Min {
			return &FieldError{"max", fmt.Sprintf("uniform needs 0 ≤ min ≤ max, got [%v, %v]", d.Min, d.Max)}
		}
	case "lognormal":
		if d.Mean <= 0 || d.Sigma < 0 {
			return &FieldError{"mean", "lognormal needs mean > 0 and sigma ≥ 0"}
		}
	case "mixture":
		if len(d.Of) == 0 {
			return &FieldError{"of", "a mixture needs components"}
		}
		if d.Mean != 0 || d.Min != 0 || d.Max != 0 || d.Sigma != 0 {
			return &FieldError{"kind", "a mixture's mean, min, max and sigma are its components'"}
		}
		for i, c := range d.Of {
			at := fmt.Sprintf("of.%d", i)
			if !(c.Weight > 0) || math.IsInf(c.Weight, 0) {
				return &FieldError{at + ".weight", fmt.Sprintf("%v must be > 0", c.Weight)}
			}
			if err := c.Dist.validate(); err != nil {
				var f fieldErrs
				f.wrap(err, at)
				return f[0]
			}
		}
		return nil
	default:
		return &FieldError{"kind", fmt.Sprintf("%q is not one of constant, exponential, uniform, lognormal, mixture", d.Kind)}
	}
	if len(d.Of) > 0 {
		return &FieldError{"of", "is for kind mixture"}
	}
	return nil
}
