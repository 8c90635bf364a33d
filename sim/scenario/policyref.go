package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/policyfile"
)

// PolicyRef takes a client's (or a call's) retry policy and circuit
// breaker from a policy file, the file production loads with package
// policyfile (docs/policy.md), instead of from the scenario:
//
//	clients:
//	  - name: checkout
//	    target: db
//	    policy_file: policy/checkout.yaml   # relative to this file
//	    dependency: db                      # the file's client block [target]
//
// The simulated client then runs exactly that policy: the file's
// retry.Policy (preset and overrides, budget, pushback, hedging) and
// breaker.Spec, read by the same loader and applied by the same retry core
// as policyfile's Client.NewRetrier builds in production. A client that
// references a file gives no policy or breaker of its own (a run that
// compares sets policy_file to "" and a policy). Its timeout, when the
// scenario gives none, is the policy's attempt_timeout; when both are
// given they must agree. A policy without attempt_timeout is bounded in
// production by the caller's deadline only, which the scenario models with
// the client's deadline; its timeout keeps the simulator's default.
//
// [Load] and [Parse] read the files; a Scenario built in Go sets Policy
// and Breaker itself (policyfile's File.Client gives them), since
// Validate and Run do not read files.
type PolicyRef struct {
	// PolicyFile is the policy file's path, relative to the scenario
	// file's directory (to the working directory for standard input).
	PolicyFile string `yaml:"policy_file,omitempty" json:"policy_file,omitempty"`
	// Dependency names the client block of PolicyFile to use [the
	// client's target; a call's service].
	Dependency string `yaml:"dependency,omitempty" json:"dependency,omitempty"`
}

// ServerRef takes a service's admission from the server block of a policy
// file, the block production loads into admit.Config (httpx.ServerConfig,
// grpcx.ServerConfig):
//
//	services:
//	  - name: db
//	    workers: 8
//	    policy_file: policy/db.yaml   # relative to this file
//
// Each replica of the service then admits through an admit.Core built from
// that block, the core under the production gate: the deadline bound
// (max_timeout, min_remaining), the concurrency limit (limit) and the
// queue where requests wait for a slot (queue: capacity, order, priority),
// the criticality cap and, with a supersede block, request supersession
// with the block's bounds. An admitted attempt then takes a worker, or
// waits in a FIFO run queue for one (workers model the CPU; production
// runs every admitted request at once). A policy file has one server
// block: there is no block name to give.
//
// The block replaces the scenario's own admission: a service that
// references a file gives no limiter, reject_at_limit, queue, expired_drop,
// min_remaining, supersede or capacity of its own; defenses: stormguard
// then only adds the overload signal to refusals.
//
// [Load] and [Parse] read the file; a Scenario built in Go sets Server
// itself (policyfile's File.Server gives it), and Supersede from its
// supersede block when it has one (Max: max_keys, TTL: ttl, MaxWaiters:
// max_waiters); the service's Limiter, Queue, ExpiredDrop and
// MinRemaining are then not used.
type ServerRef struct {
	// PolicyFile is the policy file's path, relative to the scenario
	// file's directory (to the working directory for standard input).
	PolicyFile string `yaml:"policy_file,omitempty" json:"policy_file,omitempty"`
	// Server is the server block, filled from PolicyFile when the scenario
	// is loaded; nil: the scenario's own admission.
	Server *admit.Config `yaml:"-" json:"server,omitempty"`
}

// resolveServer applies the server reference of service v at path at.
func (r *refResolver) resolveServer(at string, v *Service) {
	if v.PolicyFile == "" {
		return
	}
	for _, c := range []struct {
		field string
		set   bool
	}{
		{"limiter", v.Limiter != nil},
		{"reject_at_limit", v.RejectAtLimit != nil},
		{"queue", v.Queue != (QueueSpec{})},
		{"expired_drop", v.ExpiredDrop},
		{"min_remaining", v.MinRemaining != 0},
		{"supersede", v.Supersede != nil},
		{"capacity", v.Capacity != nil},
	} {
		if c.set {
			r.bad(at+"."+c.field, "admission comes from the server block of policy_file %s: remove %s", v.PolicyFile, c.field)
			return
		}
	}
	f, err := r.load(v.PolicyFile)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			r.bad(at+".policy_file", "%s", line)
		}
		return
	}
	if f.Server == nil {
		r.bad(at+".policy_file", "%s has no server block", v.PolicyFile)
		return
	}
	cfg := *f.Server
	v.Server = &cfg
	if s := cfg.Supersede; s != nil {
		v.Supersede = &Supersede{Max: s.MaxKeys, TTL: s.TTL, MaxWaiters: s.MaxWaiters}
	}
}

// resolvePolicyFiles reads the policy files that the clients, calls and
// services of s reference and puts their policies, breakers and server
// blocks in s. tree is the node
// tree s was decoded from (for the lines of problems) and file the
// scenario's name, whose directory relative paths start from.
func resolvePolicyFiles(s *Scenario, tree *yaml.Node, file string) []problem {
	r := refResolver{tree: tree, dir: filepath.Dir(file), files: map[string]*policyfile.File{}}
	for i := range s.Clients {
		c := &s.Clients[i]
		at := elemPath("clients", c.Name, i)
		r.resolve(at, c.PolicyRef, c.Target, &c.Policy, &c.Breaker, &c.Timeout)
	}
	for i := range s.Services {
		v := &s.Services[i]
		at := elemPath("services", v.Name, i)
		r.resolveServer(at, v)
		for j := range v.Calls {
			c := &v.Calls[j]
			cat := elemPath(at+".calls", c.Service, j)
			r.resolve(cat, c.PolicyRef, c.Service, &c.Policy, &c.Breaker, &c.Timeout)
		}
	}
	return r.probs
}

type refResolver struct {
	tree  *yaml.Node
	dir   string
	files map[string]*policyfile.File // by path, read once per scenario
	probs []problem
}

func (r *refResolver) bad(path, format string, a ...any) {
	r.probs = append(r.probs, problem{line: lineOf(r.tree, path), msg: path + ": " + fmt.Sprintf(format, a...)})
}

// resolve applies the reference ref of the client or call at path, whose
// target is target, to its policy, breaker and timeout.
func (r *refResolver) resolve(at string, ref PolicyRef, target string, pol *PolicySpec, brk **BreakerSpec, timeout *time.Duration) {
	if ref.PolicyFile == "" {
		if ref.Dependency != "" {
			r.bad(at+".dependency", "names a client block of a policy file: give policy_file too")
		}
		return
	}
	if *pol != (PolicySpec{}) {
		r.bad(at+".policy", "the policy comes from policy_file %s: remove policy (or set policy_file to \"\")", ref.PolicyFile)
		return
	}
	if *brk != nil {
		r.bad(at+".breaker", "the breaker comes from policy_file %s: remove breaker (the file's client block has one or none)", ref.PolicyFile)
		return
	}
	f, err := r.load(ref.PolicyFile)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			r.bad(at+".policy_file", "%s", line)
		}
		return
	}
	dep := ref.Dependency
	if dep == "" {
		dep = target
	}
	c, err := f.Client(dep)
	if err != nil {
		path := at + ".dependency"
		if ref.Dependency == "" {
			path = at + ".policy_file"
		}
		r.bad(path, "%v", err)
		return
	}
	// WithDefaults: a policy that is all defaults is not the zero
	// PolicySpec, which the simulator would read as its naive default.
	*pol = PolicySpec{Preset: c.Preset, Policy: c.Policy.WithDefaults()}
	if c.Breaker != nil {
		*brk = &BreakerSpec{Preset: c.BreakerPreset, Spec: *c.Breaker}
	}
	if t := c.Policy.AttemptTimeout; t > 0 {
		switch {
		case *timeout == 0:
			*timeout = t
		case *timeout != t:
			r.bad(at+".timeout", "%v is not the attempt_timeout %v of dependency %s in %s: leave timeout out to use it", *timeout, t, dep, ref.PolicyFile)
		}
	}
}

// load reads the policy file at path (relative to the scenario's
// directory), once. Only regular files are read: a scenario names a file,
// not a device or a pipe.
func (r *refResolver) load(path string) (*policyfile.File, error) {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(r.dir, full)
	}
	if f, ok := r.files[full]; ok {
		return f, nil
	}
	st, err := os.Stat(full)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", full)
	}
	f, err := policyfile.Load(full)
	if err != nil {
		return nil, err
	}
	r.files[full] = f
	return f, nil
}
