package rehearse

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
)

// The limits of a rehearsal: what it sends is bounded by flags whose
// defaults are modest and whose ceilings cannot be raised.
const (
	// DefaultMaxRate is the highest arrival rate, requests per second, a
	// rehearsal sends from one machine unless Limits.MaxRate raises it.
	DefaultMaxRate = 500
	// HardMaxRate is the most Limits.MaxRate may be: the lab's own
	// ceiling (lab.MaxRate).
	HardMaxRate = lab.MaxRate
	// DefaultMaxDuration is the longest run unless Limits.MaxDuration
	// raises it; HardMaxDuration the most it may be (lab.MaxDuration).
	DefaultMaxDuration = 2 * time.Minute
	HardMaxDuration    = lab.MaxDuration
)

// Limits bound a rehearsal. The zero Limits takes the defaults.
type Limits struct {
	// MaxRate bounds the sum of the clients' peak arrival rates this
	// machine sends (a shard's share), requests per second
	// [DefaultMaxRate], at most HardMaxRate.
	MaxRate float64
	// MaxDuration bounds the run's duration [DefaultMaxDuration], at most
	// HardMaxDuration.
	MaxDuration time.Duration
	// AllowRemote names the hosts (HOST, or HOST:PORT) beyond loopback a
	// rehearsal may send to; none by default.
	AllowRemote []string
}

// withDefaults fills in the defaults and checks the ceilings.
func (l Limits) withDefaults() (Limits, error) {
	if l.MaxRate == 0 {
		l.MaxRate = DefaultMaxRate
	}
	if l.MaxDuration == 0 {
		l.MaxDuration = DefaultMaxDuration
	}
	switch {
	case !(l.MaxRate > 0 && l.MaxRate <= HardMaxRate):
		return l, fmt.Errorf("rehearse: a rate limit of %v/s is not within (0, %d]", l.MaxRate, HardMaxRate)
	case l.MaxDuration < 0 || l.MaxDuration > HardMaxDuration:
		return l, fmt.Errorf("rehearse: a duration limit of %v is not within (0, %v]", l.MaxDuration, HardMaxDuration)
	}
	return l, nil
}

// Shard is a part of a rehearsal run on one machine: it sends the arrivals
// Index, Index+Count, Index+2×Count … (from 0) of every client, drawn from
// the same random streams as every other shard. The zero Shard is the
// whole run.
type Shard struct {
	Index, Count int
}

// ParseShard parses "I/N", 1 ≤ I ≤ N ≤ 1000.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || n > 1000 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("shard %q: want I/N with 1 <= I <= N <= 1000", s)
	}
	return Shard{Index: i - 1, Count: n}, nil
}

// String is "I/N" (1-based), or "1/1" for the whole run.
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index+1, s.count()) }

func (s Shard) count() int { return max(1, s.Count) }

// Plan is a rehearsal ready to run: every client's arrivals (this shard's),
// the endpoints and what sits in front of them, the runbook's steps, and
// the worst case of what it may send.
type Plan struct {
	// Name of the run.
	Name string
	// Scenario, normalized as the lab normalizes it (lab.Normalize: 100 ms
	// bins unless it sets its own).
	Scenario scenario.Scenario
	// Shard is the part of the run this plan sends.
	Shard   Shard
	Clients []ClientPlan
	// Endpoints are the scenario's services, in its order.
	Endpoints []EndpointPlan
	// Steps are the runbook's, in the scenario's order.
	Steps []Step
	// Redis is the address of the fleet's dials, if any step or client
	// uses them.
	Redis string
	// WorstCase is the most attempts the plan may send: every arrival of
	// this shard, times every tap of a person, times the policy's most
	// attempts (hedges included). Guard refuses one more.
	WorstCase int64
	// Limits the plan was checked against.
	Limits Limits
}

// ClientPlan is one client of a plan.
type ClientPlan struct {
	Name string
	// Endpoint is the index of the endpoint it calls.
	Endpoint int
	// Arrivals are this shard's arrivals, offsets from the run's start.
	Arrivals []time.Duration
	// Total counts the arrivals of every shard together.
	Total int
	// Rate is the arrival rate at the start, Peak the highest with load
	// triggers (all shards).
	Rate, Peak float64
	// Attempts is the most attempts one request makes; Taps the most
	// requests one person sends (1 without humans).
	Attempts, Taps int
	// Policy retries the requests; its AttemptTimeout is at most Timeout.
	Policy            retry.Policy
	Timeout, Deadline time.Duration
	PropagateDeadline bool
	IdempotencyKey    bool
	Processes         int
	Humans            *scenario.Humans
	// FleetDials names the fleet's dials its retriers follow ("": its own
	// local dials, which steps aimed at it turn).
	FleetDials string
	// WorstCase is the most attempts it may send in this shard.
	WorstCase int64
}

// EndpointPlan is one real service.
type EndpointPlan struct {
	Name string
	// Kind is scenario.EndpointHTTP, EndpointGRPC or EndpointTCP; Target
	// the URL, Addr its HOST:PORT, Path the HTTP path or gRPC method.
	Kind, Target, Addr, Path string
	Request                  Request
	// Listen is where the proxy in front of a tcp dependency listens.
	Listen string
	// Faults are the proxy's windows (outage, latency); Errors the fault
	// front's (errors).
	Faults, Errors []lab.Window
	// Admin, if not nil, is its kill-switch admin endpoint.
	Admin      *Admin
	FleetDials string
	// Metrics, if not nil, says where its side is measured.
	Metrics *scenario.Metrics
}

// Admin is a kill-switch admin endpoint and where its token is: read
// when the run starts (Token), never printed.
type Admin struct {
	URL string
	// TokenFile (an absolute path, or relative to the working directory)
	// or TokenEnv.
	TokenFile, TokenEnv string
}

// Token reads the admin token: its file's first line, or its variable.
func (a *Admin) Token() (string, error) {
	if a.TokenEnv != "" {
		tok := strings.TrimSpace(os.Getenv(a.TokenEnv))
		if tok == "" {
			return "", fmt.Errorf("$%s is empty or unset: it should hold the admin token of %s", a.TokenEnv, a.URL)
		}
		return tok, nil
	}
	b, err := os.ReadFile(a.TokenFile)
	if err != nil {
		return "", fmt.Errorf("the admin token of %s: %w", a.URL, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if tok := strings.TrimSpace(line); tok != "" {
		return tok, nil
	}
	return "", fmt.Errorf("the admin token of %s: the first line of %s is empty", a.URL, a.TokenFile)
}

// source says where the token is read from.
func (a *Admin) source() string {
	if a.TokenEnv != "" {
		return "$" + a.TokenEnv
	}
	return a.TokenFile
}

// Step is one of the runbook's steps, as a rehearsal carries it out.
type Step struct {
	At     time.Duration
	Kind   string // retries-off, retries-on, shed, limit
	Target string
	Value  float64
	Label  string
	// Client is set when the step turns a client's dials; Endpoint is the
	// service's index otherwise.
	Client   bool
	Endpoint int
	// Via says how: "the admin endpoint URL", "the fleet's dials NAME on
	// Redis ADDR" or "the client's own dials".
	Via string
}

// NewPlan checks sc (a run of a file read by scenario.ParseRehearsal)
// against a rehearsal's rules and limits and draws every client's
// arrivals. dir is the scenario file's directory, against which body and
// token files are read. Every problem is reported, naming the part.
func NewPlan(sc scenario.Scenario, name, dir string, shard Shard, lim Limits) (Plan, error) {
	if err := sc.ValidateRehearsal(); err != nil {
		return Plan{}, err
	}
	lim, err := lim.withDefaults()
	if err != nil {
		return Plan{}, err
	}
	if shard.Count == 0 {
		shard.Count = 1
	}
	sc = lab.Normalize(sc)
	p := Plan{Name: name, Scenario: sc, Shard: shard, Limits: lim}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("rehearse: "+format, a...)) }
	if sc.Duration > lim.MaxDuration {
		bad("duration %v is longer than the limit (%v; --max-duration raises it up to %v)", sc.Duration, lim.MaxDuration, HardMaxDuration)
	}
	if sc.Bin < lab.MinBin {
		bad("bin %v is shorter than a rehearsal measures (%v)", sc.Bin, lab.MinBin)
	}
	idx := map[string]int{}
	for i, v := range sc.Services {
		idx[v.Name] = i
		e, err := endpointPlan(v, dir, lim.AllowRemote)
		if err != nil {
			bad("services.%s: %v", v.Name, err)
		}
		p.Endpoints = append(p.Endpoints, e)
	}
	var loads []scenario.Trigger
	for i, t := range sc.Triggers {
		w := lab.Window{Kind: t.Kind, At: t.At, Duration: t.Duration, Mode: t.Mode, Add: t.Add, Factor: t.Factor}
		where := fmt.Sprintf("triggers.%d (%s)", i, t.Kind)
		switch t.Kind {
		case "load":
			loads = append(loads, t)
		case "outage", "latency":
			p.Endpoints[idx[t.Target]].Faults = append(p.Endpoints[idx[t.Target]].Faults, w)
		case "errors":
			if e := &p.Endpoints[idx[t.Target]]; e.Kind == scenario.EndpointTCP {
				bad("%s: the proxy in front of a tcp dependency moves bytes; it injects outages and latency, not errors (put the errors trigger on an http or grpc service)", where)
			} else {
				e.Errors = append(e.Errors, w)
			}
		default:
			bad("%s: a rehearsal applies outage, latency and errors on the path and load from the generator; a %s trigger has no lever on a real service", where, t.Kind)
		}
	}
	total := 0.0
	for i, c := range sc.Clients {
		cp, err := clientPlan(sc, c, idx[c.Target], loads, shard)
		if err != nil {
			bad("clients.%s: %v", c.Name, err)
			continue
		}
		total += cp.Peak / float64(shard.count())
		p.Clients = append(p.Clients, cp)
		p.WorstCase += cp.WorstCase
		_ = i
	}
	if total > lim.MaxRate {
		bad("the clients' peak rates add up to %.0f/s on this machine, more than the limit (%.0f/s; --max-rate raises it up to %d/s, or --shard spreads it over machines)", total, lim.MaxRate, HardMaxRate)
	}
	clients := map[string]int{}
	for i, c := range p.Clients {
		clients[c.Name] = i
	}
	if r := sc.Rehearse; r != nil && r.Redis != "" {
		p.Redis = r.Redis
		if err := checkHost(r.Redis, lim.AllowRemote); err != nil {
			bad("rehearse.redis: %v", err)
		}
	}
	for i, a := range sc.Actions {
		s, err := step(a, p.Endpoints, clients, idx, p.Clients, p.Redis)
		if err != nil {
			bad("actions.%d (%s %s): %v", i, a.Kind, a.Target, err)
			continue
		}
		p.Steps = append(p.Steps, s)
	}
	return p, errors.Join(errs...)
}

// clientPlan draws a client's arrivals and bounds what it may send.
func clientPlan(sc scenario.Scenario, c scenario.Client, ep int, loads []scenario.Trigger, shard Shard) (ClientPlan, error) {
	switch c.Arrivals.Kind {
	case "poisson", "constant":
	default:
		return ClientPlan{}, fmt.Errorf("arrivals of kind %q: a rehearsal sends open-loop arrivals, poisson or constant", c.Arrivals.Kind)
	}
	if c.Fleet != nil {
		return ClientPlan{}, errors.New("fleet: a rehearsal's client processes each have their own budget (a shared one is the fleet package's, in your processes)")
	}
	if c.Breaker != nil {
		return ClientPlan{}, errors.New("breaker: not in a rehearsal yet")
	}
	if !c.Network.Latency.IsZero() {
		return ClientPlan{}, errors.New("network latency: the network is real here (use a latency trigger on the service)")
	}
	pol := c.Policy.Policy
	if pol.AttemptTimeout == 0 || pol.AttemptTimeout > c.Timeout {
		pol.AttemptTimeout = c.Timeout
	}
	if _, err := retry.New(pol); err != nil {
		return ClientPlan{}, fmt.Errorf("policy: %w", err)
	}
	full := pol.WithDefaults()
	attempts := full.MaxAttempts
	if h := full.Hedge; h != nil {
		attempts = max(attempts, h.MaxAttempts)
	}
	cp := ClientPlan{Name: c.Name, Endpoint: ep, Policy: pol, Timeout: c.Timeout, Deadline: c.Deadline,
		PropagateDeadline: c.PropagateDeadline, IdempotencyKey: c.IdempotencyKey, Processes: c.Processes,
		Humans: c.Humans, FleetDials: c.FleetDials, Attempts: attempts, Taps: 1,
		Peak: lab.PeakRate(c.Arrivals, loads)}
	cp.Rate = c.Arrivals.Rate
	if len(c.Arrivals.Schedule) > 0 {
		cp.Rate = c.Arrivals.Schedule[0].Rate
		if c.Arrivals.Schedule[0].At > 0 {
			cp.Rate = c.Arrivals.Rate
		}
	}
	if c.Humans != nil {
		cp.Taps = c.Humans.Taps
	}
	if cp.Peak*sc.Duration.Seconds() > 10*float64(HardMaxRate)*HardMaxDuration.Seconds() {
		return ClientPlan{}, fmt.Errorf("a peak rate of %.0f/s is beyond any rehearsal", cp.Peak)
	}
	rng := engine.Stream(sc.Seed, lab.StreamID("client", c.Name, "arrivals"))
	n := shard.count()
	for t, i := time.Duration(0), 0; ; i++ {
		next, ok := c.Arrivals.NextArrival(t, loads, &rng)
		if !ok || next >= sc.Duration {
			break
		}
		t = next
		cp.Total++
		if i%n == shard.Index {
			cp.Arrivals = append(cp.Arrivals, t)
		}
	}
	cp.WorstCase = int64(len(cp.Arrivals)) * int64(cp.Taps) * int64(cp.Attempts)
	return cp, nil
}

// endpointPlan reads a service's endpoint: its address (which must be on
// loopback or allowed), its request (body files read), its admin token.
func endpointPlan(v scenario.Service, dir string, allow []string) (EndpointPlan, error) {
	e := v.Endpoint
	kind, addr, path, err := scenario.EndpointAddr(e.Target)
	if err != nil {
		return EndpointPlan{}, err
	}
	ep := EndpointPlan{Name: v.Name, Kind: kind, Target: e.Target, Addr: addr, Path: path, Listen: e.Listen,
		FleetDials: e.FleetDials, Metrics: e.Metrics}
	var errs []error
	if err := checkHost(addr, allow); err != nil {
		errs = append(errs, fmt.Errorf("target: %w", err))
	}
	if kind != scenario.EndpointTCP {
		r, err := newRequest(kind, e.Request, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("request: %w", err))
		}
		ep.Request = r
	}
	if a := e.Admin; a != nil {
		_, host, _, _ := scenario.EndpointAddr(a.URL)
		if err := checkHost(host, allow); err != nil {
			errs = append(errs, fmt.Errorf("admin: %w", err))
		}
		ep.Admin = &Admin{URL: a.URL, TokenEnv: a.TokenEnv, TokenFile: a.TokenFile}
		if a.TokenFile != "" && !filepath.IsAbs(a.TokenFile) {
			ep.Admin.TokenFile = filepath.Join(dir, a.TokenFile)
		}
	}
	if m := e.Metrics; m != nil {
		u := m.Scrape + m.Prometheus
		_, host, _, _ := scenario.EndpointAddr(u)
		if err := checkHost(host, allow); err != nil {
			errs = append(errs, fmt.Errorf("metrics: %w", err))
		}
	}
	return ep, errors.Join(errs...)
}

// step maps a runbook action onto the real kill switch.
func step(a scenario.Action, eps []EndpointPlan, clients map[string]int, services map[string]int, cps []ClientPlan, redis string) (Step, error) {
	s := Step{At: a.At, Kind: a.Kind, Target: a.Target, Value: a.Value, Label: a.Name()}
	switch a.Kind {
	case "retries-off", "retries-on", "shed", "limit":
	default:
		return s, errors.New("a rehearsal turns the kill switch's dials (retries-off, retries-on, shed, limit); it has no lever for this on a real service")
	}
	if ci, ok := clients[a.Target]; ok {
		if a.Kind != "retries-off" && a.Kind != "retries-on" {
			return s, errors.New("a client's dials turn its retries off and on; shed and limit are a service's")
		}
		s.Client = true
		s.Via = "the client's own dials"
		if d := cps[ci].FleetDials; d != "" {
			s.Via = fmt.Sprintf("the fleet's dials %q on Redis %s, which the client's processes follow", d, redis)
		}
		return s, nil
	}
	i := services[a.Target]
	e := eps[i]
	s.Endpoint = i
	switch {
	case e.Admin != nil:
		s.Via = "the admin endpoint " + e.Admin.URL + " (token from " + e.Admin.source() + ")"
	case e.FleetDials != "":
		s.Via = fmt.Sprintf("the fleet's dials %q on Redis %s", e.FleetDials, redis)
	default:
		return s, errors.New("the service has no kill switch to turn: give it admin (its admin endpoint) or fleet_dials")
	}
	return s, nil
}

// checkHost accepts HOST:PORT on loopback (a loopback IP, or localhost),
// or a host the caller allowed (HOST or HOST:PORT in allow). Where the
// connection really goes is checked again when it is made (see guard).
func checkHost(hostport string, allow []string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", hostport)
	}
	if isLoopbackName(host) {
		return nil
	}
	for _, a := range allow {
		if strings.EqualFold(a, host) || strings.EqualFold(a, hostport) {
			return nil
		}
	}
	return fmt.Errorf("%s is not on loopback: a rehearsal sends real load, and sends it to this machine only unless --allow-remote %s names it", hostport, host)
}

// isLoopbackName reports whether host is a loopback IP or "localhost".
func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Duration is the run's length.
func (p Plan) Duration() time.Duration { return p.Scenario.Duration }

// Arrivals counts this shard's arrivals.
func (p Plan) Arrivals() int {
	n := 0
	for _, c := range p.Clients {
		n += len(c.Arrivals)
	}
	return n
}

// String describes the plan as --dry-run prints it: per client its
// rates, arrivals and the worst case of its attempts; the endpoints and
// what sits in front of them; the triggers and the runbook, with their
// times; and the limits.
func (p Plan) String() string {
	var b strings.Builder
	sc := p.Scenario
	fmt.Fprintf(&b, "Run %s: %v, in %v bins, seed %d", p.Name, sc.Duration, sc.Bin, sc.Seed)
	if p.Shard.count() > 1 {
		fmt.Fprintf(&b, ", shard %s (every %s arrival of each client, from the %s)", p.Shard, ordinal(p.Shard.count()), ordinal(p.Shard.Index+1))
	}
	b.WriteString("\n  clients:\n")
	for _, c := range p.Clients {
		e := p.Endpoints[c.Endpoint]
		fmt.Fprintf(&b, "    %s → %s (%s): %s at %s/s", c.Name, e.Name, e.Target, arrivalKind(sc, c.Name), num(c.Rate))
		if c.Peak != c.Rate {
			fmt.Fprintf(&b, ", peak %s/s", num(c.Peak))
		}
		fmt.Fprintf(&b, "; %d arrivals", len(c.Arrivals))
		if len(c.Arrivals) != c.Total {
			fmt.Fprintf(&b, " of %d", c.Total)
		}
		pol := presetName(sc, c.Name)
		fmt.Fprintf(&b, "; policy %s, up to %d attempts, timeout %v", pol, c.Attempts, c.Timeout)
		if c.Deadline > 0 {
			fmt.Fprintf(&b, ", deadline %v", c.Deadline)
		}
		if c.Taps > 1 {
			fmt.Fprintf(&b, ", people tap up to %d times", c.Taps)
		}
		fmt.Fprintf(&b, "; worst case %d attempts\n", c.WorstCase)
	}
	b.WriteString("  services:\n")
	for _, e := range p.Endpoints {
		fmt.Fprintf(&b, "    %s: %s", e.Name, e.Target)
		if e.Kind == scenario.EndpointTCP {
			fmt.Fprintf(&b, ", a dependency behind the fault proxy on %s", e.Listen)
		} else {
			fmt.Fprintf(&b, ", %s", e.Request.describe(e.Kind))
		}
		var on []string
		if len(e.Faults) > 0 {
			on = append(on, "the fault proxy")
		}
		if len(e.Errors) > 0 {
			on = append(on, "the error front")
		}
		if len(on) > 0 {
			fmt.Fprintf(&b, "; in front: %s", strings.Join(on, " and "))
		}
		if m := e.Metrics; m != nil {
			if m.Scrape != "" {
				fmt.Fprintf(&b, "; metrics scraped from %s every second", m.Scrape)
			} else {
				fmt.Fprintf(&b, "; metrics queried from Prometheus %s every second", m.Prometheus)
			}
		} else if e.Kind != scenario.EndpointTCP {
			b.WriteString("; measured from the clients' side only")
		}
		b.WriteString("\n")
	}
	if len(sc.Triggers) > 0 {
		b.WriteString("  triggers:\n")
		for _, t := range sc.Triggers {
			fmt.Fprintf(&b, "    %v–%v %s", t.At, t.At+t.Duration, t.Kind)
			switch t.Kind {
			case "outage":
				fmt.Fprintf(&b, " (%s) on the path to %s, by the fault proxy", t.Mode, t.Target)
			case "latency":
				fmt.Fprintf(&b, " +%v on the path to %s, by the fault proxy", t.Add, t.Target)
			case "errors":
				fmt.Fprintf(&b, ": %s%% of %s's responses fail (500, gRPC UNAVAILABLE), by the error front", num(100*t.Factor), t.Target)
			case "load":
				fmt.Fprintf(&b, ": every client's rate × %s, by the generator", num(t.Factor))
			}
			b.WriteString("\n")
		}
	}
	if len(p.Steps) > 0 {
		b.WriteString("  runbook:\n")
		for _, s := range p.Steps {
			fmt.Fprintf(&b, "    at %v: %s, through %s\n", s.At, s.Label, s.Via)
		}
		b.WriteString("    (the dials are read before the run and set back after it)\n")
	}
	fmt.Fprintf(&b, "  limits: at most %s/s from this machine, runs of at most %v; sends to loopback", num(p.Limits.MaxRate), p.Limits.MaxDuration)
	if len(p.Limits.AllowRemote) > 0 {
		fmt.Fprintf(&b, " and %s", strings.Join(p.Limits.AllowRemote, ", "))
	}
	fmt.Fprintf(&b, " only\n  worst case: %d attempts in all (%d requests); a hard counter refuses one more\n", p.WorstCase, p.Arrivals())
	fmt.Fprintf(&b, "  before the run: a preflight sends each service at most %d single requests until %d in a row succeed\n", PreflightWorstCase, PreflightOK)
	return b.String()
}

// arrivalKind names a client's arrival process.
func arrivalKind(sc scenario.Scenario, client string) string {
	for _, c := range sc.Clients {
		if c.Name == client {
			return c.Arrivals.Kind
		}
	}
	return "?"
}

// presetName is a client's policy's preset name.
func presetName(sc scenario.Scenario, client string) string {
	for _, c := range sc.Clients {
		if c.Name == client {
			if c.Policy.Preset != "" {
				return c.Policy.Preset
			}
			if c.PolicyFile != "" {
				return "from " + c.PolicyFile
			}
		}
	}
	return "custom"
}

// num formats a rate without trailing zeros.
func num(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}
