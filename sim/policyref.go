package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

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

// resolvePolicyFiles reads the policy files that the clients and calls of
// s reference and puts their policies and breakers in s. tree is the node
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
