package scenario

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/autoscale"
)

// What people do during a storm: an operator's runbook (Action) and an
// autoscaler (Autoscale). Both act through the same levers as production:
// the killswitch.Dials the shells read, and a service's replica count.

// Action is one step of an operator's runbook, at a time.
//
//	retries-off, retries-on  the Dials of Target (a client, or a service's
//	                         downstream calls): retries stop or resume
//	shed                     Target service's Dials shed the fraction Value
//	                         of arriving attempts (0 stops shedding)
//	limit                    Target service's Dials override its limiters'
//	                         limit with Value (0 removes the override)
//	replicas                 Target service runs Value replicas; new ones
//	                         serve Delay later (and after its autoscaler's
//	                         start-up calls, if any)
//	capacity                 Target service's speed is Value × its own (2
//	                         doubles it, 1 restores it)
//	pause, resume            attempts of Target client, or every attempt
//	                         into Target service, or those of Target
//	                         service's call to Call, are refused at once
//	                         (connection refused, counted as lost), or flow
//	                         again
type Action struct {
	At     time.Duration `yaml:"at" json:"at_ns"`
	Kind   string        `yaml:"kind" json:"kind"`
	Target string        `yaml:"target" json:"target"`
	Call   string        `yaml:"call,omitempty" json:"call,omitempty"`
	Value  float64       `yaml:"value,omitempty" json:"value,omitempty"`
	Delay  time.Duration `yaml:"delay,omitempty" json:"delay_ns,omitempty"`
	// Label names the step on the charts [kind target value].
	Label string `yaml:"label,omitempty" json:"label,omitempty"`
}

// Name is how charts and the JSON name the action: its Label, or its
// kind, target and value.
func (a Action) Name() string {
	if a.Label != "" {
		return a.Label
	}
	l := a.Kind + " " + a.Target
	if a.Call != "" {
		l += "→" + a.Call
	}
	switch a.Kind {
	case "shed", "limit", "replicas", "capacity":
		l += fmt.Sprintf(" %g", a.Value)
	}
	return l
}

// Autoscale scales a service's replicas with the autoscale package's rule,
// Kubernetes' Horizontal Pod Autoscaler with its defaults (see
// autoscale.Policy: tolerance, stabilization windows, rate policies each
// way, readiness): every Interval the simulator measures the metric over
// the interval and asks the rule for a replica count. The metrics:
//
//	cpu          the busy share of the replicas' capacity: the work time of
//	             attempts doing local work (and failure work) over workers ×
//	             time (cores × time under processor sharing). A worker
//	             waiting on a downstream call is not busy.
//	concurrency  attempts in service (working, waiting, hung) per replica,
//	             averaged over time
//	queue-delay  the mean queue wait of the attempts that started service
//	rate         attempts arriving per second per replica
//
// The replicas it counts are those serving, starting or restarting; of
// them, the ready ones — serving, and with cpu serving for the readiness
// delay — give the metric (averaged over the time they served), and the
// others count as idle when it scales up. A new replica serves UpDelay
// after it is asked for, and, with Startup, once it has made its start-up
// calls. A replica scaled down stops receiving attempts, finishes what it
// holds, and is gone; those not serving yet go first.
type Autoscale struct {
	autoscale.Policy `yaml:",inline"`
	// Startup: calls each new replica makes before it serves.
	Startup *Startup `yaml:"startup,omitempty" json:"startup,omitempty"`
}

// Startup is the work a new replica does before it serves: Calls requests
// to Service (a configuration service, say), one after the other, each
// through a retrier of Policy with attempt Timeout. A request that gives up
// is made again RetryAfter later; the replica serves once every call has
// succeeded and its UpDelay has passed.
type Startup struct {
	Service    string        `yaml:"service" json:"service"`
	Calls      int           `yaml:"calls" json:"calls"`
	Timeout    time.Duration `yaml:"timeout,omitempty" json:"timeout_ns"`         // [1s]
	Policy     PolicySpec    `yaml:"policy,omitempty" json:"policy"`              // [naive]
	RetryAfter time.Duration `yaml:"retry_after,omitempty" json:"retry_after_ns"` // [1s]
}

// validateRunbook reports the problems of the actions and autoscalers.
func (s Scenario) validateRunbook(f *fieldErrs, services map[string]int) {
	clients := map[string]bool{}
	for _, c := range s.Clients {
		clients[c.Name] = true
	}
	for i, a := range s.Actions {
		at := fmt.Sprintf("actions.%d", i)
		_, isSvc := services[a.Target]
		switch a.Kind {
		case "retries-off", "retries-on", "pause", "resume":
			if !isSvc && !clients[a.Target] {
				f.add(fmt.Sprintf("%q is neither a client nor a service", a.Target), at, "target")
			}
		case "shed", "limit", "replicas", "capacity":
			if !isSvc {
				f.add(fmt.Sprintf("%q is not a service (a %s action needs one)", a.Target, a.Kind), at, "target")
			}
		default:
			f.add(fmt.Sprintf("%q is not one of retries-off, retries-on, shed, limit, replicas, capacity, pause, resume", a.Kind), at, "kind")
		}
		if a.At < 0 || a.Delay < 0 {
			f.add("at and delay must not be negative", at)
		}
		if a.Call != "" {
			j, ok := services[a.Target]
			has := false
			if ok {
				for _, c := range s.Services[j].Calls {
					has = has || c.Service == a.Call
				}
			}
			if !has || (a.Kind != "pause" && a.Kind != "resume") {
				f.add(fmt.Sprintf("%q: call names a call of the target service, for pause and resume", a.Call), at, "call")
			}
		}
		switch v := a.Value; a.Kind {
		case "shed":
			if !(v >= 0 && v <= 1) {
				f.add(fmt.Sprintf("%v: a shed fraction is in [0, 1]", v), at, "value")
			}
		case "limit":
			if !(v >= 0 && v <= 1<<30) || v != math.Trunc(v) {
				f.add(fmt.Sprintf("%v: a limit override is a whole number in [0, 2^30] (0 removes it)", v), at, "value")
			}
		case "replicas":
			if !(v >= 0 && v <= maxReplicas) || v != math.Trunc(v) {
				f.add(fmt.Sprintf("%v: replicas is a whole number in [0, %d]", v, maxReplicas), at, "value")
			}
		case "capacity":
			if !(v > 0 && v <= 1e6) {
				f.add(fmt.Sprintf("%v: a capacity factor is in (0, 1e6]", v), at, "value")
			}
		default:
			if v != 0 {
				f.add("is for shed, limit, replicas and capacity", at, "value")
			}
		}
	}
	for i, v := range s.Services {
		if v.Autoscale == nil {
			continue
		}
		at := elemPath("services", v.Name, i) + ".autoscale"
		f.wrap(v.Autoscale.Policy.Validate(), at)
		if v.Capacity != nil {
			f.add("a tick-capacity service has no replicas to scale", at)
		}
		if st := v.Autoscale.Startup; st != nil {
			if _, ok := services[st.Service]; !ok {
				f.add(fmt.Sprintf("%q is not a service", st.Service), at, "startup.service")
			}
			if st.Calls <= 0 || st.Calls > 1000 {
				f.add(fmt.Sprintf("%d is outside [1, 1000]", st.Calls), at, "startup.calls")
			}
			if st.Timeout < 0 || st.RetryAfter < 0 {
				f.add("timeout and retry_after must not be negative", at, "startup")
			}
			f.wrap(st.Policy.Policy.Validate(), at, "startup.policy")
		}
	}
}
