package scenario

import (
	"time"

	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
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
	// Rehearse: settings of a rehearsal against real services (see
	// Endpoint); stormguard rehearse only.
	Rehearse *RehearseSpec `yaml:"rehearse,omitempty" json:"rehearse,omitempty"`
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
	// FleetDials, in a rehearsal: the client's retriers follow the fleet's
	// dials of that name on Redis (fleet.Watch), and the runbook's steps
	// aimed at the client set them there (see Endpoint).
	FleetDials string `yaml:"fleet_dials,omitempty" json:"fleet_dials,omitempty"`
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
	// RejectAtLimit says what the limiter does with a request over its
	// limit: refuse it at once, with no queue for it (admit.Config's
	// reject_at_limit), the only way a service without a policy file's
	// server block has [true, with a limiter]. A limit whose excess waits
	// in a queue comes from a server block (policy_file).
	RejectAtLimit *bool `yaml:"reject_at_limit,omitempty" json:"reject_at_limit,omitempty"`
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
	// Endpoint, in a rehearsal: the service is a real one at its target
	// instead of a model (see Endpoint).
	Endpoint `yaml:",inline"`
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

// Verdict configures how a run is judged (see package result's Judge).
type Verdict struct {
	// Healthy: a bin is healthy when goodput ≥ Healthy × demand [0.9].
	Healthy float64 `yaml:"healthy,omitempty" json:"healthy"`
	// Warmup bins at the start are not judged [the longest client
	// timeout, at most a quarter of the run and at least 1 bin].
	Warmup time.Duration `yaml:"warmup,omitempty" json:"warmup_ns"`
	// Patience: a request still in flight at the end of the run counts as
	// failed once it is older than this; younger, its fate is open [each
	// client's Lifetime: the longest its caller waits].
	Patience time.Duration `yaml:"patience,omitempty" json:"patience_ns,omitempty"`
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
