package lab

import (
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/scenario"
)

// DefaultBin is the width of a lab time bin when the scenario sets none:
// the lab measures in 100 ms bins (the simulator's default is 1 s).
const DefaultBin = 100 * time.Millisecond

// Bounds of what the lab runs, so that a scenario written for the
// simulator cannot make the machine the bottleneck unnoticed.
const (
	// MaxDuration bounds a lab run's duration.
	MaxDuration = 10 * time.Minute
	// MaxRate bounds the client's arrival rate, requests per second.
	MaxRate = 3000
	// MaxWorkers bounds a service's workers.
	MaxWorkers = 10000
)

// Common is what every role's configuration holds.
type Common struct {
	// Role is the role's name: loadgen, app, proxy or backend.
	Role string `json:"role"`
	// Name of the scenario part the role plays (a client or service name).
	Name string `json:"name"`
	// Seed of the role's random streams.
	Seed uint64 `json:"seed"`
	// Bin is the width of a time bin; Duration the length of the run.
	Bin      time.Duration `json:"bin_ns"`
	Duration time.Duration `json:"duration_ns"`
	// Result is the file the role writes its counts to when it stops.
	Result string `json:"result"`
}

// Window is a span of the run, relative to its start, during which a
// trigger acts.
type Window struct {
	// Kind of the trigger: outage, latency, load, capacity or errors.
	Kind string `json:"kind"`
	// At is the start of the window from the run's start; Duration its
	// length.
	At       time.Duration `json:"at_ns"`
	Duration time.Duration `json:"duration_ns"`
	// Mode of an outage (hold or drop); Add of a latency trigger; Factor
	// of a load, capacity or errors trigger.
	Mode   string        `json:"mode,omitempty"`
	Add    time.Duration `json:"add_ns,omitempty"`
	Factor float64       `json:"factor,omitempty"`
}

// active reports whether w acts at offset t from the run's start.
func (w Window) active(t time.Duration) bool { return t >= w.At && t < w.At+w.Duration }

// ServiceConfig configures a service role (app or backend); its fields
// are those of the scenario's scenario.Service.
type ServiceConfig struct {
	Common
	// Workers serve requests concurrently; the others wait in the queue.
	Workers int `json:"workers"`
	// ServiceTime of one request on one worker (the app's calls excluded).
	ServiceTime scenario.Dist `json:"service_time"`
	// Queue of the requests waiting for a worker
	// (scenario.Service.RunQueue).
	Queue shed.Config `json:"queue"`
	// Slowdown: the service time grows with the queue, as in the
	// simulator.
	Slowdown scenario.Slowdown `json:"slowdown"`
	// ErrorRate: the probability that a response fails (500).
	ErrorRate float64 `json:"error_rate,omitempty"`
	// Defended puts the service behind httpx.Server: deadlines from the
	// wire, expired work dropped, the queue's order and the overload
	// signals. Without Admission the gate stands for the workers: its
	// concurrency limit is fixed at Workers and its queue is Queue;
	// MinRemaining is the least time before its deadline a request needs
	// to start.
	Defended     bool          `json:"defended"`
	MinRemaining time.Duration `json:"min_remaining_ns,omitempty"`
	// Admission, when set, is the service's own admission, the one the
	// simulator's core takes (scenario.Service.Admission: a limiter,
	// rejecting at its limit unless reject_at_limit says otherwise, or a
	// policy file's server block): the gate admits through it, and an
	// admitted request then waits in Queue for one of Workers, as in the
	// simulator. ExpiredDrop: a request whose deadline passes while it
	// waits there is dropped (the simulator's run queue with
	// expired_drop).
	Admission   *admit.Config `json:"admission,omitempty"`
	ExpiredDrop bool          `json:"expired_drop,omitempty"`
	// Triggers of kind capacity and errors aimed at this service.
	Triggers []Window `json:"triggers,omitempty"`
	// Call is the downstream call of an app; nil for a backend.
	Call *CallConfig `json:"call,omitempty"`
}

// CallConfig is an app's downstream call.
type CallConfig struct {
	// Upstream is the address the call goes to (the fault proxy's).
	Upstream string `json:"upstream"`
	// Policy retries the call; its AttemptTimeout is the call's timeout.
	Policy retry.Policy `json:"policy"`
	// Timeout of one attempt.
	Timeout time.Duration `json:"timeout_ns"`
	// PropagateDeadline passes the caller's deadline (and its leaving) on
	// to the call, and sends the remaining time on the wire.
	PropagateDeadline bool `json:"propagate_deadline,omitempty"`
	// OnFailure: "fail" (answer 502 or 504) or "fallback" (answer a
	// degraded success).
	OnFailure string `json:"on_failure"`
}

// LoadgenConfig configures the load generator.
type LoadgenConfig struct {
	Common
	// Target is the address requests go to.
	Target string `json:"target"`
	// Arrivals of new requests (kind poisson or constant).
	Arrivals scenario.Arrivals `json:"arrivals"`
	// Policy retries requests; its AttemptTimeout is Timeout.
	Policy retry.Policy `json:"policy"`
	// Timeout of one attempt; Deadline of a whole request (0: none).
	Timeout  time.Duration `json:"timeout_ns"`
	Deadline time.Duration `json:"deadline_ns,omitempty"`
	// PropagateDeadline sends the time left (Stormguard-Timeout).
	PropagateDeadline bool `json:"propagate_deadline,omitempty"`
	// Processes: retriers (and so budgets) the arrivals are spread over.
	Processes int `json:"processes"`
	// Triggers of kind load.
	Triggers []Window `json:"triggers,omitempty"`
}

// ProxyConfig configures the fault proxy.
type ProxyConfig struct {
	Common
	// Target is the address the proxy forwards to (the backend's).
	Target string `json:"target"`
	// Faults: outage (Mode hold or drop) and latency windows.
	Faults []Window `json:"faults,omitempty"`
}

// Plan is how a scenario maps onto the lab's processes.
type Plan struct {
	// Scenario with the defaults the lab uses filled in.
	Scenario scenario.Scenario
	// The roles' configurations, without the addresses and result files
	// the orchestrator fills in.
	Loadgen LoadgenConfig
	// App is nil when the client calls the backend directly.
	App     *ServiceConfig
	Backend ServiceConfig
	Proxy   ProxyConfig
	// Services lists the services' names in the scenario's order, for
	// the result.
	Services []string
}

// Normalize returns sc with its defaults filled in
// (scenario.Scenario.WithDefaults), a zero Bin becoming the lab's
// DefaultBin rather than the simulator's. The lab and its simulated twin
// both run the normalized scenario.
func Normalize(sc scenario.Scenario) scenario.Scenario {
	if sc.Bin == 0 {
		sc.Bin = DefaultBin
	}
	return sc.WithDefaults()
}

// Check reports every reason the lab cannot run sc (which must already be
// a valid scenario, see scenario.Scenario.Validate), naming the part.
func Check(sc scenario.Scenario) error {
	_, err := NewPlan(sc)
	return err
}

// NewPlan validates sc, normalizes it (see Normalize) and maps it onto the
// lab's roles. Addresses and result files are left for the orchestrator.
func NewPlan(sc scenario.Scenario) (Plan, error) {
	if err := sc.Validate(); err != nil {
		return Plan{}, err
	}
	sc = Normalize(sc)
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("lab: "+format, a...)) }
	if sc.Duration > MaxDuration {
		bad("duration %v is longer than the lab runs (%v)", sc.Duration, MaxDuration)
	}
	if sc.Bin < 10*time.Millisecond {
		bad("bin %v is shorter than the lab measures (10ms)", sc.Bin)
	}
	if len(sc.Clients) != 1 {
		return Plan{}, fmt.Errorf("lab: the lab runs scenarios with one client, this one has %d", len(sc.Clients))
	}
	c := sc.Clients[0]
	switch c.Arrivals.Kind {
	case "poisson", "constant":
	default:
		bad("clients[0] (%s): arrivals of kind %q: the lab generates poisson or constant arrivals", c.Name, c.Arrivals.Kind)
	}
	if peak := peakRate(c.Arrivals, sc.Triggers); peak > MaxRate {
		bad("clients[0] (%s): a rate of %.0f/s is more than the lab sends (%d/s)", c.Name, peak, MaxRate)
	}
	if c.Fleet != nil {
		bad("clients[0] (%s): fleet: the lab's load generator gives each process its own budget (a shared one is the fleet package's, on Redis)", c.Name)
	}
	if !c.Network.Latency.IsZero() {
		bad("clients[0] (%s): network latency: the lab has no network model between the client and its target (use a latency trigger on the backend)", c.Name)
	}
	idx := map[string]int{}
	for i, v := range sc.Services {
		idx[v.Name] = i
	}
	front := sc.Services[idx[c.Target]]
	backIdx := idx[c.Target]
	var app *scenario.Service
	if len(front.Calls) > 0 {
		if len(front.Calls) != 1 {
			bad("services[%d] (%s): the lab's app makes one downstream call, this one makes %d", idx[front.Name], front.Name, len(front.Calls))
		}
		app = &front
		backIdx = idx[front.Calls[0].Service]
	}
	back := sc.Services[backIdx]
	if len(back.Calls) > 0 {
		bad("services[%d] (%s): the lab's backend makes no calls (the lab runs client → [app →] backend)", backIdx, back.Name)
	}
	used := map[string]bool{back.Name: true, front.Name: true}
	for i, v := range sc.Services {
		if !used[v.Name] {
			bad("services[%d] (%s): not on the client's path; the lab runs client → [app →] backend", i, v.Name)
		}
		if v.Capacity != nil {
			bad("services[%d] (%s): capacity per tick is a model of the simulator only", i, v.Name)
		}
		if m := v.SimOnly(); m != "" {
			bad("services[%d] (%s): %s is a model of the simulator only", i, v.Name, m)
		}
		if v.Workers > MaxWorkers {
			bad("services[%d] (%s): %d workers is more than the lab runs (%d)", i, v.Name, v.Workers, MaxWorkers)
		}
	}
	if app != nil && !app.Calls[0].Network.Latency.IsZero() {
		bad("services[%d] (%s): calls[0]: network latency: use a latency trigger on %s instead", idx[app.Name], app.Name, back.Name)
	}
	p := Plan{Scenario: sc}
	common := func(role, name string) Common {
		return Common{Role: role, Name: name, Seed: sc.Seed, Bin: sc.Bin, Duration: sc.Duration}
	}
	p.Loadgen = LoadgenConfig{
		Common: common(RoleLoadgen, c.Name), Arrivals: c.Arrivals, Policy: attemptPolicy(c.Policy.Policy, c.Timeout),
		Timeout: c.Timeout, Deadline: c.Deadline, PropagateDeadline: c.PropagateDeadline, Processes: c.Processes,
	}
	p.Proxy = ProxyConfig{Common: common(RoleProxy, back.Name)}
	p.Backend = serviceConfig(common(RoleBackend, back.Name), back)
	if app != nil {
		a := serviceConfig(common(RoleApp, app.Name), *app)
		call := app.Calls[0]
		a.Call = &CallConfig{Policy: attemptPolicy(call.Policy.Policy, call.Timeout), Timeout: call.Timeout,
			PropagateDeadline: call.PropagateDeadline, OnFailure: app.OnCallFailure}
		p.App = &a
	}
	for i, t := range sc.Triggers {
		w := Window{Kind: t.Kind, At: t.At, Duration: t.Duration, Mode: t.Mode, Add: t.Add, Factor: t.Factor}
		where := fmt.Sprintf("triggers[%d] (%s)", i, t.Kind)
		switch t.Kind {
		case "load":
			p.Loadgen.Triggers = append(p.Loadgen.Triggers, w)
			continue
		case "outage", "latency":
			if t.Target == back.Name {
				p.Proxy.Faults = append(p.Proxy.Faults, w)
				continue
			}
		case "capacity", "errors":
			switch t.Target {
			case back.Name:
				p.Backend.Triggers = append(p.Backend.Triggers, w)
				continue
			case front.Name:
				if p.App != nil {
					p.App.Triggers = append(p.App.Triggers, w)
					continue
				}
			}
		case "pause":
			bad("%s: the lab cannot pause a process's work (use capacity or an outage)", where)
			continue
		}
		bad("%s: the lab injects outages and latency into %s only (the service behind the fault proxy), not into %s", where, back.Name, t.Target)
	}
	for _, v := range sc.Services {
		p.Services = append(p.Services, v.Name)
	}
	return p, errors.Join(errs...)
}

// serviceConfig maps a scenario service onto a service role.
func serviceConfig(c Common, v scenario.Service) ServiceConfig {
	sc := ServiceConfig{Common: c, Workers: v.Workers, ServiceTime: v.ServiceTime, Queue: v.RunQueue(), Slowdown: v.Slowdown,
		ErrorRate: v.ErrorRate, MinRemaining: v.MinRemaining, ExpiredDrop: v.ExpiredDrop}
	if cfg, limited := v.Admission(); limited {
		sc.Admission = &cfg
	}
	sc.Defended = v.Defenses == "stormguard" || v.ExpiredDrop || sc.Admission != nil
	return sc
}

// attemptPolicy is p with its AttemptTimeout bounded by the edge's
// timeout, which the simulator applies to every attempt.
func attemptPolicy(p retry.Policy, timeout time.Duration) retry.Policy {
	if p.AttemptTimeout == 0 || p.AttemptTimeout > timeout {
		p.AttemptTimeout = timeout
	}
	return p
}

// peakRate is the highest arrival rate of a, with load triggers applied
// as if they all overlapped.
func peakRate(a scenario.Arrivals, ts []scenario.Trigger) float64 {
	r := a.Rate
	for _, p := range a.Schedule {
		r = max(r, p.Rate)
	}
	f := 1.0
	for _, t := range ts {
		if t.Kind == "load" && t.Factor > 1 {
			f *= t.Factor
		}
	}
	return r * f
}
