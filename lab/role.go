package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/sim/result"
)

// The roles of a lab run, as the hidden subcommands name them.
const (
	RoleLoadgen = "loadgen"
	RoleApp     = "app"
	RoleProxy   = "proxy"
	RoleBackend = "backend"
)

// Roles returns the role names RoleMain accepts.
func Roles() []string { return []string{RoleBackend, RoleProxy, RoleApp, RoleLoadgen} }

// IsRole reports whether name is a role.
func IsRole(name string) bool {
	for _, r := range Roles() {
		if r == name {
			return true
		}
	}
	return false
}

// roleResult is what a role writes to its result file when it stops.
type roleResult struct {
	Service  *result.ServiceSeries `json:"service,omitempty"`
	Client   *result.ClientSeries  `json:"client,omitempty"`
	Outcomes *Outcomes             `json:"outcomes,omitempty"`
	Proxy    *ProxyStats           `json:"proxy,omitempty"`
	// MaxLag is how far the load generator's arrivals fell behind their
	// schedule, at most.
	MaxLag time.Duration `json:"max_lag_ns,omitempty"`
	// Host is what the role measured of its own scheduling.
	Host *HostStats `json:"host,omitempty"`
}

// readyLine is the first line a role prints on its standard output.
type readyLine struct {
	Addr string `json:"addr"`
}

// RoleMain runs one role of a lab run in this process: it is what the
// hidden subcommand `stormguard lab ROLE --config FILE` does, and the
// orchestrator (RunScenario) starts one process per role.
//
// The protocol with the orchestrator:
//
//  1. The role reads its configuration (JSON, strictly: LoadgenConfig,
//     ServiceConfig or ProxyConfig) from the --config file, listens on
//     127.0.0.1 on a port of the system's choice (the load generator
//     does not listen) and prints one line on stdout: {"addr": "HOST:PORT"}.
//  2. It waits for the line "start NANOS" on stdin: the run's start, in
//     Unix nanoseconds. Its bins and trigger windows count from there.
//  3. The load generator sends its requests, waits for every one to end,
//     writes its result file and returns. The other roles serve until the
//     line "stop", the end of stdin or the end of ctx; then they close
//     their listener and connections and write their result file.
//
// The end of stdin means that the orchestrator is gone: a role never
// outlives it. Every message is parsed strictly (see protocol.go): a
// configuration the role cannot run safely is refused before it listens,
// and a control line it does not understand stops it with an error.
// Beside its work, a role measures how late its timers fire (HostStats in
// its result file). Errors are returned, not printed.
func RoleMain(ctx context.Context, role string, args []string, stdin io.Reader, stdout io.Writer) error {
	if !IsRole(role) {
		return fmt.Errorf("lab: unknown role %q (roles: %s)", role, strings.Join(Roles(), ", "))
	}
	fs := flag.NewFlagSet("lab "+role, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "the role's configuration `FILE` (JSON)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	if *path == "" || fs.NArg() > 0 {
		return fmt.Errorf("lab %s: usage: stormguard lab %s --config FILE", role, role)
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := make(chan time.Time, 1)
	go control(stdin, start, cancel)

	r, err := newRole(role, data)
	if err != nil {
		return fmt.Errorf("lab %s: %s: %w", role, *path, err)
	}
	defer r.close()
	if _, err := stdout.Write(formatReady(r.addr())); err != nil {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	var t0 time.Time
	select {
	case t0 = <-start:
	case <-ctx.Done():
		return protocolError(role, ctx)
	}
	stopProbe := probeHost(ctx, t0, r.common().Duration)
	res := r.run(ctx, t0)
	h := stopProbe()
	if res.Host != nil { // a service's work times
		h.Works, h.ServiceNominal, h.ServiceMeasured = res.Host.Works, res.Host.ServiceNominal, res.Host.ServiceMeasured
	}
	res.Host = &h
	out, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	dst := r.resultPath()
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	return protocolError(role, ctx)
}

// errBadControl marks a control line the role did not understand.
var errBadControl = errors.New("bad control line")

// protocolError is the error of a role stopped by a control line it did
// not understand, or nil.
func protocolError(role string, ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, errBadControl) {
		return fmt.Errorf("lab %s: %w", role, err)
	}
	return nil
}

// control reads the orchestrator's lines from stdin (see parseControl):
// "start NANOS" is sent on start; "stop", the end of stdin or a line it
// does not understand (cause errBadControl) cancels.
func control(stdin io.Reader, start chan<- time.Time, cancel context.CancelCauseFunc) {
	defer cancel(nil)
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		c, err := parseControl(sc.Text())
		switch {
		case err != nil:
			cancel(fmt.Errorf("%w: %w", errBadControl, err))
			return
		case c.stop:
			return
		default:
			select {
			case start <- c.start:
			default: // a second start changes nothing
			}
		}
	}
}

// runner is a role ready to run.
type runner interface {
	common() Common
	addr() string
	run(ctx context.Context, start time.Time) roleResult
	resultPath() string
	close()
}

func newRole(role string, data []byte) (runner, error) {
	cfg, err := parseConfig(role, data)
	if err != nil {
		return nil, err
	}
	switch c := cfg.(type) {
	case *LoadgenConfig:
		if _, err := newLoadgen(*c, newClock(time.Now(), c.Bin, c.Duration)); err != nil {
			return nil, err
		}
		return &loadgenRole{cfg: *c}, nil
	case *ProxyConfig:
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		return &proxyRole{cfg: *c, p: NewProxy(ln, c.Target)}, nil
	default:
		sc := cfg.(*ServiceConfig)
		if _, err := newService(*sc, newClock(time.Now(), sc.Bin, sc.Duration)); err != nil {
			return nil, err
		}
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		return &serviceRole{cfg: *sc, ln: ln}, nil
	}
}

// listen listens on a port of the system's choice on the loopback
// interface, never elsewhere.
func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// loadgenRole runs the load generator.
type loadgenRole struct{ cfg LoadgenConfig }

func (r *loadgenRole) common() Common     { return r.cfg.Common }
func (r *loadgenRole) addr() string       { return "" }
func (r *loadgenRole) resultPath() string { return r.cfg.Result }
func (r *loadgenRole) close()             {}

func (r *loadgenRole) run(ctx context.Context, start time.Time) roleResult {
	g, err := newLoadgen(r.cfg, newClock(start, r.cfg.Bin, r.cfg.Duration))
	if err != nil { // checked in newRole
		return roleResult{}
	}
	g.run(ctx)
	cs, o := g.result()
	return roleResult{Client: &cs, Outcomes: &o, MaxLag: g.lag}
}

// proxyRole runs the fault proxy.
type proxyRole struct {
	cfg ProxyConfig
	p   *Proxy
}

func (r *proxyRole) common() Common     { return r.cfg.Common }
func (r *proxyRole) addr() string       { return r.p.Addr().String() }
func (r *proxyRole) resultPath() string { return r.cfg.Result }
func (r *proxyRole) close()             { r.p.Close() }

func (r *proxyRole) run(ctx context.Context, start time.Time) roleResult {
	var wg sync.WaitGroup
	wg.Go(func() { r.p.RunFaults(ctx, start, r.cfg.Faults) })
	r.p.Serve(ctx)
	wg.Wait()
	st := r.p.Stats()
	return roleResult{Proxy: &st}
}

// serviceRole runs an app or a backend.
type serviceRole struct {
	cfg ServiceConfig
	ln  net.Listener
	srv *http.Server
}

func (r *serviceRole) common() Common     { return r.cfg.Common }
func (r *serviceRole) addr() string       { return r.ln.Addr().String() }
func (r *serviceRole) resultPath() string { return r.cfg.Result }

func (r *serviceRole) close() {
	if r.srv != nil {
		r.srv.Close()
	}
	r.ln.Close()
}

func (r *serviceRole) run(ctx context.Context, start time.Time) roleResult {
	s, err := newService(r.cfg, newClock(start, r.cfg.Bin, r.cfg.Duration))
	if err != nil { // checked in newRole
		return roleResult{}
	}
	r.srv = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute, ErrorLog: discardLog()}
	var wg sync.WaitGroup
	wg.Go(func() { s.sampleGauges(ctx) })
	go r.srv.Serve(r.ln)
	<-ctx.Done()
	r.srv.Close()
	wg.Wait()
	ss := s.counts.series(r.cfg.Name, s.inSystem.Load())
	var h HostStats
	s.svc.stats(&h)
	return roleResult{Service: &ss, Host: &h}
}

// discardLog swallows net/http's own log lines (connections reset by the
// fault proxy are expected in the lab).
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
