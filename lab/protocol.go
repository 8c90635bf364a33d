package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// The protocol between the orchestrator and a role process (see RoleMain)
// has four messages, each parsed strictly here: the role's configuration
// file (JSON), the control lines on the role's stdin, the ready line on
// its stdout and its result file (JSON). Every parser refuses what the
// orchestrator would not write, with an error naming the part.

// MinBin is the narrowest time bin the lab measures.
const MinBin = 10 * time.Millisecond

// maxProcesses bounds the load generator's processes (each a retrier with
// its own budget).
const maxProcesses = 10000

// control is one line the orchestrator sends a role: "start NANOS" (the
// run's start, Unix nanoseconds) or "stop".
type controlLine struct {
	stop  bool
	start time.Time
}

// formatControl is the line for c, without its newline.
func formatControl(c controlLine) string {
	if c.stop {
		return "stop"
	}
	return "start " + strconv.FormatInt(c.start.UnixNano(), 10)
}

// parseControl parses a control line (without its newline): "stop", or
// "start " and a positive decimal count of Unix nanoseconds, with no sign,
// leading zero or other space.
func parseControl(line string) (controlLine, error) {
	if line == "stop" {
		return controlLine{stop: true}, nil
	}
	num, ok := strings.CutPrefix(line, "start ")
	if !ok {
		return controlLine{}, fmt.Errorf("control line %.40q: want \"start NANOS\" or \"stop\"", line)
	}
	ns, err := strconv.ParseInt(num, 10, 64)
	if err != nil || ns <= 0 || strconv.FormatInt(ns, 10) != num {
		return controlLine{}, fmt.Errorf("control line %.40q: the start is not a positive count of nanoseconds", line)
	}
	return controlLine{start: time.Unix(0, ns)}, nil
}

// formatReady is a role's ready line, with its newline.
func formatReady(addr string) []byte {
	line, _ := json.Marshal(readyLine{Addr: addr})
	return append(line, '\n')
}

// parseReady parses the ready line of role (with or without its
// newline): {"addr": "127.0.0.1:PORT"}, with an empty address for the
// load generator, which does not listen.
func parseReady(role string, line []byte) (string, error) {
	var r readyLine
	if err := decodeStrict(bytes.TrimSuffix(line, []byte("\n")), &r); err != nil {
		return "", fmt.Errorf("ready line %.60q: %w", line, err)
	}
	if role == RoleLoadgen {
		if r.Addr != "" {
			return "", fmt.Errorf("ready line %.60q: the load generator does not listen", line)
		}
		return "", nil
	}
	if err := checkLoopback(r.Addr); err != nil {
		return "", fmt.Errorf("ready line: %w", err)
	}
	return r.Addr, nil
}

// checkLoopback accepts exactly "127.0.0.1:PORT", PORT in 1..65535 in
// decimal without leading zeros: the lab listens and sends on the
// loopback interface only.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && host == "127.0.0.1" {
		if p, perr := strconv.ParseUint(port, 10, 16); perr == nil && p > 0 && strconv.FormatUint(p, 10) == port {
			return nil
		}
	}
	return fmt.Errorf("address %.60q is not 127.0.0.1:PORT", addr)
}

// decodeStrict decodes one JSON value from data into v, rejecting unknown
// fields and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// parseConfig parses and checks the configuration file of role: a
// *LoadgenConfig, *ProxyConfig or *ServiceConfig. What it accepts, the
// role can run without exhausting the machine: bins at least MinBin, a
// run at most MaxDuration, rates at most MaxRate, workers at most
// MaxWorkers, addresses on 127.0.0.1. (Policies, queues and limiters are
// checked when the role is built.)
func parseConfig(role string, data []byte) (any, error) {
	var (
		cfg    any
		common *Common
	)
	switch role {
	case RoleLoadgen:
		c := &LoadgenConfig{}
		cfg, common = c, &c.Common
	case RoleProxy:
		c := &ProxyConfig{}
		cfg, common = c, &c.Common
	case RoleApp, RoleBackend:
		c := &ServiceConfig{}
		cfg, common = c, &c.Common
	default:
		return nil, fmt.Errorf("unknown role %q", role)
	}
	if err := decodeStrict(data, cfg); err != nil {
		return nil, err
	}
	if err := checkCommon(role, *common); err != nil {
		return nil, err
	}
	var err error
	switch c := cfg.(type) {
	case *LoadgenConfig:
		err = checkLoadgen(c)
	case *ProxyConfig:
		err = checkProxy(c)
	case *ServiceConfig:
		err = checkService(role, c)
	}
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

func checkCommon(role string, c Common) error {
	switch {
	case c.Role != role:
		return fmt.Errorf("role %q in the configuration of a %s", c.Role, role)
	case c.Bin < MinBin || c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("the configuration needs bin_ns ≥ %d and 0 < duration_ns ≤ %d", MinBin, MaxDuration)
	case c.Result == "":
		return errors.New("the configuration needs a result file")
	case !filepath.IsAbs(c.Result):
		return fmt.Errorf("result %.60q is not an absolute path", c.Result)
	}
	return nil
}

// finite reports whether v is a number (not NaN or infinite) in [lo, hi].
func finite(v, lo, hi float64) bool { return !math.IsNaN(v) && v >= lo && v <= hi }

func checkLoadgen(c *LoadgenConfig) error {
	if err := checkLoopback(c.Target); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	a := c.Arrivals
	if a.Kind != "poisson" && a.Kind != "constant" {
		return fmt.Errorf("arrivals: kind %q is not poisson or constant", a.Kind)
	}
	if !finite(a.Rate, 0, MaxRate) {
		return fmt.Errorf("arrivals: rate %v is not within [0, %d]", a.Rate, MaxRate)
	}
	var last time.Duration
	for i, p := range a.Schedule {
		if p.At < last || !finite(p.Rate, 0, MaxRate) {
			return fmt.Errorf("arrivals: schedule[%d]: at %v, rate %v: points must be in order with a rate within [0, %d]", i, p.At, p.Rate, MaxRate)
		}
		last = p.At
	}
	switch {
	case c.Timeout <= 0:
		return errors.New("timeout_ns must be > 0")
	case c.Deadline < 0:
		return errors.New("deadline_ns must be ≥ 0")
	case c.Processes < 0 || c.Processes > maxProcesses:
		return fmt.Errorf("processes %d is not within [0, %d]", c.Processes, maxProcesses)
	}
	var ts []Window
	for i, w := range c.Triggers {
		if w.Kind != "load" {
			return fmt.Errorf("triggers[%d]: kind %q: the load generator applies load triggers only", i, w.Kind)
		}
		ts = append(ts, w)
	}
	if err := checkWindows(ts); err != nil {
		return err
	}
	if peak := peakOf(c); peak > MaxRate {
		return fmt.Errorf("a peak rate of %.0f/s is more than the lab sends (%d/s)", peak, MaxRate)
	}
	return nil
}

// peakOf is the load generator's highest rate, with its load triggers
// applied as if they all overlapped.
func peakOf(c *LoadgenConfig) float64 {
	r := c.Arrivals.Rate
	for _, p := range c.Arrivals.Schedule {
		r = max(r, p.Rate)
	}
	for _, w := range c.Triggers {
		if w.Factor > 1 {
			r *= w.Factor
		}
	}
	return r
}

func checkProxy(c *ProxyConfig) error {
	if err := checkLoopback(c.Target); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	for i, w := range c.Faults {
		switch {
		case w.Kind == "outage" && (w.Mode == "hold" || w.Mode == "drop"):
		case w.Kind == "latency" && w.Add >= 0:
		default:
			return fmt.Errorf("faults[%d]: kind %q, mode %q, add %v: the proxy injects outages (hold or drop) and latency ≥ 0", i, w.Kind, w.Mode, w.Add)
		}
	}
	return checkWindows(c.Faults)
}

func checkService(role string, c *ServiceConfig) error {
	if (role == RoleApp) != (c.Call != nil) {
		return errors.New("an app has a call and a backend has none")
	}
	switch {
	case c.Workers < 1 || c.Workers > MaxWorkers:
		return fmt.Errorf("workers %d is not within [1, %d]", c.Workers, MaxWorkers)
	case !finite(c.ErrorRate, 0, 1):
		return fmt.Errorf("error_rate %v is not within [0, 1]", c.ErrorRate)
	case c.MinRemaining < 0:
		return errors.New("min_remaining_ns must be ≥ 0")
	case !finite(c.Slowdown.Factor, 0, math.MaxFloat64) || c.Slowdown.Queue < 0:
		return fmt.Errorf("slowdown: factor %v and queue %d must be ≥ 0", c.Slowdown.Factor, c.Slowdown.Queue)
	}
	if err := checkDist(c.ServiceTime); err != nil {
		return fmt.Errorf("service_time: %w", err)
	}
	for i, w := range c.Triggers {
		switch {
		case w.Kind == "capacity" && finite(w.Factor, math.SmallestNonzeroFloat64, math.MaxFloat64):
		case w.Kind == "errors" && finite(w.Factor, 0, 1):
		default:
			return fmt.Errorf("triggers[%d]: kind %q, factor %v: a service applies capacity (factor > 0) and errors (factor in [0, 1]) triggers", i, w.Kind, w.Factor)
		}
	}
	if err := checkWindows(c.Triggers); err != nil {
		return err
	}
	if k := c.Call; k != nil {
		if err := checkLoopback(k.Upstream); err != nil {
			return fmt.Errorf("call: upstream: %w", err)
		}
		if k.Timeout <= 0 {
			return errors.New("call: timeout_ns must be > 0")
		}
		if k.OnFailure != "fail" && k.OnFailure != "fallback" {
			return fmt.Errorf("call: on_failure %q is not fail or fallback", k.OnFailure)
		}
	}
	return nil
}

// checkDist checks a service-time distribution as the simulator does.
func checkDist(d scenario.Dist) error {
	switch d.Kind {
	case "", "constant", "exponential":
		if d.Mean < 0 {
			return fmt.Errorf("mean %v is negative", d.Mean)
		}
	case "uniform":
		if d.Min < 0 || d.Max < d.Min {
			return fmt.Errorf("uniform needs 0 ≤ min ≤ max, got [%v, %v]", d.Min, d.Max)
		}
	case "lognormal":
		if d.Mean <= 0 || !finite(d.Sigma, 0, math.MaxFloat64) {
			return errors.New("lognormal needs mean > 0 and sigma ≥ 0")
		}
	default:
		return fmt.Errorf("kind %q is not one of constant, exponential, uniform, lognormal", d.Kind)
	}
	return nil
}

// checkWindows checks that every window starts at or after the run's
// start and lasts ≥ 0.
func checkWindows(ws []Window) error {
	for i, w := range ws {
		if w.At < 0 || w.Duration < 0 || w.At > math.MaxInt64-w.Duration {
			return fmt.Errorf("window %d (%s): at %v, duration %v: both must be ≥ 0", i, w.Kind, w.At, w.Duration)
		}
	}
	return nil
}

// parseResult parses and checks the result file of role for a run of
// bins bins: the parts the role reports are there (the load generator's
// client series and outcomes, a service's series, the proxy's stats),
// the series have bins bins and the load generator's outcomes add up.
func parseResult(role string, data []byte, bins int) (roleResult, error) {
	var r roleResult
	if err := decodeStrict(data, &r); err != nil {
		return roleResult{}, err
	}
	switch role {
	case RoleLoadgen:
		if r.Client == nil || r.Outcomes == nil {
			return roleResult{}, errors.New("the load generator reported no client series or outcomes")
		}
		if len(r.Client.Bins) != bins {
			return roleResult{}, fmt.Errorf("the client series has %d bins, not %d", len(r.Client.Bins), bins)
		}
		if err := r.Outcomes.Check(); err != nil {
			return roleResult{}, err
		}
		if r.MaxLag < 0 {
			return roleResult{}, errors.New("max_lag_ns is negative")
		}
	case RoleApp, RoleBackend:
		if r.Service == nil {
			return roleResult{}, errors.New("the service reported no series")
		}
		if len(r.Service.Bins) != bins {
			return roleResult{}, fmt.Errorf("the service series has %d bins, not %d", len(r.Service.Bins), bins)
		}
	case RoleProxy:
		if r.Proxy == nil {
			return roleResult{}, errors.New("the proxy reported no stats")
		}
	default:
		return roleResult{}, fmt.Errorf("unknown role %q", role)
	}
	if h := r.Host; h != nil && (h.TimerSamples < 0 || h.TimerLateP50 < 0 || h.TimerLateP99 < 0 || h.TimerLateMax < 0 ||
		h.Works < 0 || h.ServiceNominal < 0 || h.ServiceMeasured < 0) {
		return roleResult{}, errors.New("host: negative figures")
	}
	return r, nil
}
