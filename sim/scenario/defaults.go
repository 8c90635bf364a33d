package scenario

import (
	"time"

	"github.com/stormguard/stormguard/retry"
)

// Defaults: the values in brackets in the field docs that are more than a
// literal.
const (
	DefaultDuration = 60 * time.Second
	DefaultBin      = time.Second
	DefaultTimeout  = time.Second
	DefaultHealthy  = 0.9
	// DefaultPreset is the retry policy of a client, call or start-up
	// call that gives none.
	DefaultPreset = "naive"
)

// WithDefaults returns a copy of s with its zero fields set to their
// defaults (the values in brackets in the field docs): what the simulator
// runs, the verdict judges and the analyzer reads. Its lists are copies;
// s is not changed. It does not validate: see Validate.
func (s Scenario) WithDefaults() Scenario {
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
		c.Policy = c.Policy.OrDefault()
		maxTimeout = max(maxTimeout, c.Timeout)
	}
	if s.Verdict.Warmup == 0 {
		s.Verdict.Warmup = max(s.Bin, min(maxTimeout, s.Duration/4))
	}
	s.Services = append([]Service(nil), s.Services...)
	for i := range s.Services {
		v := &s.Services[i]
		if v.Workers == 0 {
			v.Workers = 1
		}
		if v.Limiter != nil && v.RejectAtLimit == nil {
			yes := true
			v.RejectAtLimit = &yes
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
			st.Policy = st.Policy.OrDefault()
			as := *a
			as.Startup = &st
			v.Autoscale = &as
		}
		v.Calls = append([]Call(nil), v.Calls...)
		for j := range v.Calls {
			if v.Calls[j].Timeout == 0 {
				v.Calls[j].Timeout = DefaultTimeout
			}
			v.Calls[j].Policy = v.Calls[j].Policy.OrDefault()
		}
	}
	s.Triggers = append([]Trigger(nil), s.Triggers...)
	for i := range s.Triggers {
		if s.Triggers[i].Kind == "outage" && s.Triggers[i].Mode == "" {
			s.Triggers[i].Mode = "hold"
		}
	}
	return s
}

// OrDefault returns p, or the DefaultPreset when p gives no policy at all
// (no preset, every field zero).
func (p PolicySpec) OrDefault() PolicySpec {
	if p.Preset != "" || p.Policy != (retry.Policy{}) {
		return p
	}
	pol, _ := retry.Preset(DefaultPreset)
	return PolicySpec{Preset: DefaultPreset, Policy: pol}
}
