package scenario

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stormguard/stormguard/shed"
)

// Validate reports every problem with the scenario, naming the part. A
// scenario with rehearsal keys (a real service's target, see Endpoint) is
// refused: the model cannot run it.
func (s Scenario) Validate() error { return s.validate(false) }

// ValidateRehearsal is Validate for a rehearsal (stormguard rehearse):
// every service must be a real one (see Endpoint).
func (s Scenario) ValidateRehearsal() error { return s.validate(true) }

func (s Scenario) validate(rehearsal bool) error {
	var f fieldErrs
	s.validateRehearsal(&f, rehearsal)
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
		switch r := v.RejectAtLimit; {
		case r != nil && v.Limiter == nil:
			bad(at+".reject_at_limit", "there is no limiter to reject at: set limiter, or remove reject_at_limit")
		case r != nil && !*r:
			bad(at+".reject_at_limit", "false is not offered: a service without a policy file's server block has no queue at its limit; for one, admit through policy_file with a server block that sets limit and queue")
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
	if s.Verdict.Warmup < 0 {
		bad("verdict.warmup", "must not be negative")
	}
	if s.Verdict.Patience < 0 {
		bad("verdict.patience", "must not be negative")
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
