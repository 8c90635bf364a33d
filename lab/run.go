package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Options configures RunScenario. The zero Options is ready to use.
type Options struct {
	// Executable is the stormguard binary the roles run as [the running
	// executable, os.Executable]. Tests set it to a binary they built.
	Executable string
	// Dir receives the roles' configuration and result files [a new
	// directory made by MkdirTemp, removed when the run ends; the
	// directories of dead lab processes are removed first, see
	// RemoveStale].
	Dir string
	// Progress, if not nil, is called with the fraction of the run done,
	// about five times a second.
	Progress func(frac float64)
	// OnStart, if not nil, is called for each role process once it is
	// ready, before the run starts.
	OnStart func(Proc)
}

// Proc is one role process of a run.
type Proc struct {
	// Role is loadgen, app, proxy or backend.
	Role string `json:"role"`
	// Name of the client or service the role plays.
	Name string `json:"name"`
	// PID is the process's id.
	PID int `json:"pid"`
	// Addr is where the role listens (empty for the load generator).
	Addr string `json:"addr,omitempty"`
}

// RunResult is one lab run: the measurements in the simulator's shape,
// judged by its rule, and what only the lab knows.
type RunResult struct {
	// Result holds the time series and the verdict (see result.Judge). The
	// lab has no event queue: its Events counts the requests sent and the
	// attempts that reached the services.
	Result result.Result `json:"result"`
	// Outcomes is the load generator's account of its requests.
	Outcomes Outcomes `json:"outcomes"`
	// Proxy is what the fault proxy did.
	Proxy ProxyStats `json:"proxy"`
	// Procs lists the role processes, all ended when RunScenario returns.
	Procs []Proc `json:"procs"`
	// MaxLagS is how far the load generator's arrivals fell behind their
	// schedule, at most, in seconds: a large value means the machine could
	// not keep up.
	MaxLagS float64 `json:"max_lag_s"`
	// WallS is how long the run took, start-up and drain included.
	WallS float64 `json:"wall_s"`
	// Host is the run's account of its own machine: when Host.Starved,
	// Result.Verdict is VerdictInconclusive.
	Host Host `json:"host"`
}

// Timing of a run.
const (
	// startDelay separates the roles' readiness from the run's start, so
	// that every role has read its start line before the first bin.
	startDelay = 300 * time.Millisecond
	// readyTimeout bounds how long a role may take to listen.
	readyTimeout = 15 * time.Second
	// stopTimeout bounds how long a role may take to stop when asked;
	// then it is killed.
	stopTimeout = 5 * time.Second
	// maxReadyLine bounds the ready line a role prints.
	maxReadyLine = 4096
	// maxDrain bounds how long the load generator may wait for its last
	// requests after the end of the run before it is told to stop.
	maxDrain = 2 * time.Minute
)

// RunScenario runs sc in the lab once, under the name name, and judges
// it: it starts a process per role (see the package documentation) on
// 127.0.0.1, runs the scenario's duration in wall-clock time, collects the
// roles' counts and stops them.
//
// Every role process has ended, and its listening port is closed, when
// RunScenario returns, whether the run succeeded, failed (a role that
// exits early or does not start) or ctx was cancelled (then the error
// wraps ctx's error).
func RunScenario(ctx context.Context, sc scenario.Scenario, name string, opts Options) (RunResult, error) {
	plan, err := NewPlan(sc)
	if err != nil {
		return RunResult{}, err
	}
	exe := opts.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return RunResult{}, fmt.Errorf("lab: finding the stormguard binary: %w", err)
		}
	}
	dir := opts.Dir
	if dir == "" {
		// The directories of lab processes killed before they could
		// remove theirs go first.
		RemoveStale("")
		if dir, err = MkdirTemp(""); err != nil {
			return RunResult{}, err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return RunResult{}, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return RunResult{}, err
	}
	o := &orchestrator{exe: exe, dir: dir, onStart: opts.OnStart}
	defer o.cleanup()
	began := time.Now()
	res, err := o.run(ctx, plan, name, opts.Progress)
	res.Procs = o.procs()
	o.cleanup()
	res.WallS = time.Since(began).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("lab: run %s: %w", name, context.Cause(ctx))
		}
		return res, fmt.Errorf("lab: run %s: %w", name, err)
	}
	return res, nil
}

// orchestrator starts, watches and stops the role processes of one run.
type orchestrator struct {
	exe     string
	dir     string
	onStart func(Proc)

	mu       sync.Mutex
	children []*child
}

// child is a running role process.
type child struct {
	proc   Proc
	cmd    *exec.Cmd
	stdin  *os.File // the write end of the role's stdin
	stderr *tail
	exited chan struct{} // closed once the process has been reaped
	err    error         // Wait's error, once exited is closed
	result string
}

// run is RunScenario's work; o.cleanup stops whatever it started.
func (o *orchestrator) run(ctx context.Context, plan Plan, name string, progress func(float64)) (RunResult, error) {
	back, err := o.start(ctx, RoleBackend, &plan.Backend, &plan.Backend.Common)
	if err != nil {
		return RunResult{}, err
	}
	plan.Proxy.Target = back.proc.Addr
	proxy, err := o.start(ctx, RoleProxy, &plan.Proxy, &plan.Proxy.Common)
	if err != nil {
		return RunResult{}, err
	}
	front := proxy
	var app *child
	if plan.App != nil {
		plan.App.Call.Upstream = proxy.proc.Addr
		if app, err = o.start(ctx, RoleApp, plan.App, &plan.App.Common); err != nil {
			return RunResult{}, err
		}
		front = app
	}
	plan.Loadgen.Target = front.proc.Addr
	gen, err := o.start(ctx, RoleLoadgen, &plan.Loadgen, &plan.Loadgen.Common)
	if err != nil {
		return RunResult{}, err
	}

	t0 := time.Now().Add(startDelay)
	for _, c := range o.children {
		if _, err := fmt.Fprintf(c.stdin, "start %d\n", t0.UnixNano()); err != nil {
			return RunResult{}, fmt.Errorf("%s: starting: %w", c.proc.Role, err)
		}
	}
	dur := plan.Scenario.Duration
	drain := min(maxDrain, requestBound(plan.Loadgen))
	stopGen := time.NewTimer(time.Until(t0.Add(dur + drain)))
	defer stopGen.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	servers := []*child{back, proxy}
	if app != nil {
		servers = append(servers, app)
	}
	early := make(chan *child, len(servers))
	for _, c := range servers {
		go func() {
			<-c.exited
			early <- c
		}()
	}
	told := false
wait:
	for {
		select {
		case <-gen.exited:
			if gen.err != nil {
				return RunResult{}, fmt.Errorf("%s exited: %v%s", RoleLoadgen, gen.err, gen.stderr.suffix())
			}
			break wait
		case c := <-early:
			return RunResult{}, fmt.Errorf("%s exited during the run: %v%s", c.proc.Role, c.err, c.stderr.suffix())
		case <-ctx.Done():
			return RunResult{}, ctx.Err()
		case <-stopGen.C:
			if !told { // the last requests take too long: end them
				told = true
				gen.stop()
				stopGen.Reset(stopTimeout)
				continue
			}
			return RunResult{}, fmt.Errorf("%s did not stop%s", RoleLoadgen, gen.stderr.suffix())
		case <-tick.C:
			if progress != nil {
				progress(min(0.99, float64(time.Since(t0))/float64(dur+time.Second)))
			}
		}
	}
	for _, c := range servers {
		c.stop()
	}
	for _, c := range servers {
		if !c.waitFor(stopTimeout) {
			return RunResult{}, fmt.Errorf("%s did not stop%s", c.proc.Role, c.stderr.suffix())
		}
	}
	if progress != nil {
		progress(1)
	}
	return o.collect(plan, name)
}

// requestBound is the longest a request of the load generator can last.
func requestBound(c LoadgenConfig) time.Duration {
	if c.Deadline > 0 {
		return c.Deadline + 5*time.Second
	}
	p := c.Policy.WithDefaults()
	waits := p.Backoff.WithDefaults().Cap
	if p.ThrottleBackoff != nil {
		waits = max(waits, p.ThrottleBackoff.WithDefaults().Cap)
	}
	if !p.Pushback.Ignore {
		waits += p.Pushback.MaxExtra
	}
	return time.Duration(p.MaxAttempts)*c.Timeout + time.Duration(p.MaxAttempts-1)*waits + 5*time.Second
}

// collect reads the roles' result files and builds the run's result.
func (o *orchestrator) collect(plan Plan, name string) (RunResult, error) {
	bins := newClock(time.Time{}, plan.Scenario.Bin, plan.Scenario.Duration).n
	var outs []roleOutput
	for _, c := range o.children {
		data, err := os.ReadFile(c.result)
		if err != nil {
			return RunResult{}, fmt.Errorf("%s wrote no result: %w%s", c.proc.Role, err, c.stderr.suffix())
		}
		r, err := parseResult(c.proc.Role, data, bins)
		if err != nil {
			return RunResult{}, fmt.Errorf("%s: result %s: %w", c.proc.Role, c.result, err)
		}
		outs = append(outs, roleOutput{role: c.proc.Role, name: c.proc.Name, res: r})
	}
	return assemble(plan, name, outs)
}

// roleOutput is the result file of one role of a run, parsed.
type roleOutput struct {
	role, name string
	res        roleResult
}

// assemble builds a run's result from its roles' results (checked by
// parseResult), judges it, and marks it inconclusive when its host was
// starved.
func assemble(plan Plan, name string, outs []roleOutput) (RunResult, error) {
	results := map[string]roleResult{}
	var hosts []RoleHost
	for _, o := range outs {
		results[o.name+"/"+o.role] = o.res
		if o.res.Host != nil {
			hosts = append(hosts, RoleHost{Role: o.role, HostStats: *o.res.Host})
		}
	}
	sc := plan.Scenario
	res := result.Result{Name: name, Seed: sc.Seed, BinS: sc.Bin.Seconds(), DurationS: sc.Duration.Seconds(), TriggerS: [][2]float64{}}
	for _, t := range sc.Triggers {
		res.TriggerS = append(res.TriggerS, [2]float64{t.At.Seconds(), (t.At + t.Duration).Seconds()})
	}
	gen := results[plan.Loadgen.Name+"/"+RoleLoadgen]
	if gen.Client == nil || gen.Outcomes == nil {
		return RunResult{}, errors.New("the load generator reported nothing")
	}
	res.Clients = []result.ClientSeries{*gen.Client}
	res.Events = uint64(gen.Outcomes.Sent)
	for _, v := range plan.Services {
		r, ok := results[v+"/"+RoleBackend]
		if !ok {
			r = results[v+"/"+RoleApp]
		}
		if r.Service == nil {
			return RunResult{}, fmt.Errorf("service %s reported nothing", v)
		}
		res.Services = append(res.Services, *r.Service)
		res.Events += uint64(r.Service.Total.Arrived)
	}
	result.Judge(&res, sc)
	out := RunResult{Result: res, Outcomes: *gen.Outcomes, MaxLagS: gen.MaxLag.Seconds(), Host: judgeHost(hosts)}
	if p := results[plan.Proxy.Name+"/"+RoleProxy].Proxy; p != nil {
		out.Proxy = *p
	}
	out.MarkInconclusive()
	return out, nil
}

// start writes a role's configuration, starts its process and waits until
// it listens. common is the configuration's Common part, where start puts
// the result file.
func (o *orchestrator) start(ctx context.Context, role string, cfg any, common *Common) (*child, error) {
	common.Result = filepath.Join(o.dir, role+".result.json")
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(o.dir, role+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(o.exe, "lab", role, "--config", path)
	cmd.Stdin, cmd.Stdout = inR, outW
	c := &child{proc: Proc{Role: role, Name: common.Name}, cmd: cmd, stdin: inW, stderr: &tail{max: 4096},
		exited: make(chan struct{}), result: common.Result}
	cmd.Stderr = c.stderr
	setProcAttr(cmd)
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s: %w", role, err)
	}
	c.proc.PID = cmd.Process.Pid
	o.mu.Lock()
	o.children = append(o.children, c)
	o.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()

	ready := make(chan string, 1)
	bad := make(chan error, 1)
	go func() {
		defer outR.Close()
		br := bufio.NewReader(io.LimitReader(outR, maxReadyLine))
		line, err := br.ReadBytes('\n')
		if err != nil && len(line) >= maxReadyLine {
			bad <- fmt.Errorf("no ready line in the first %d bytes of its output", maxReadyLine)
		}
		if err == nil {
			var addr string
			if addr, err = parseReady(role, line); err == nil {
				ready <- addr
			} else {
				bad <- err
			}
		}
		io.Copy(io.Discard, outR)
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case addr := <-ready:
		c.proc.Addr = addr
	case err := <-bad:
		return nil, fmt.Errorf("%s: %w%s", role, err, c.stderr.suffix())
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before it was ready: %v%s", role, c.err, c.stderr.suffix())
	case <-timer.C:
		return nil, fmt.Errorf("%s was not ready after %v%s", role, readyTimeout, c.stderr.suffix())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if o.onStart != nil {
		o.onStart(c.proc)
	}
	return c, nil
}

// stop asks the role to stop: the line "stop", then the end of its stdin.
func (c *child) stop() {
	fmt.Fprintln(c.stdin, "stop")
	c.stdin.Close()
}

// waitFor waits up to d for the process to end and reports whether it did.
func (c *child) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// cleanup ends every role process: asked to stop, then killed with its
// process group, and always reaped. It is safe to call more than once.
func (o *orchestrator) cleanup() {
	o.mu.Lock()
	cs := o.children
	o.mu.Unlock()
	for _, c := range cs {
		select {
		case <-c.exited:
		default:
			c.stop()
		}
	}
	deadline := time.Now().Add(stopTimeout)
	for _, c := range cs {
		if !c.waitFor(time.Until(deadline)) {
			// Still running, so not reaped: its pid is still its own.
			killGroup(c.proc.PID)
			<-c.exited
		}
	}
}

// procs lists the role processes started.
func (o *orchestrator) procs() []Proc {
	o.mu.Lock()
	defer o.mu.Unlock()
	ps := make([]Proc, len(o.children))
	for i, c := range o.children {
		ps[i] = c.proc
	}
	return ps
}

// tail keeps the last max bytes written to it. It is safe for concurrent
// use.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// suffix is ": " and the last lines written, or "" when nothing was.
func (t *tail) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return ": " + strconv.Quote(s)
}
