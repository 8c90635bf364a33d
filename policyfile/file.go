package policyfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/yamlnode"
	"github.com/stormguard/stormguard/retry"
)

// MaxFileSize is the largest policy file read, in bytes.
const MaxFileSize = 1 << 20

// ErrFileTooLarge is wrapped by the error of a file larger than
// [MaxFileSize].
var ErrFileTooLarge = fmt.Errorf("policy file larger than %d bytes", MaxFileSize)

// File is a policy file: the client policy of each dependency of one
// service, and its server's defenses. Build one with [Load], [Read] or
// [Parse]; every value in it has been validated as [retry.New],
// [breaker.New] and [httpx.NewServer] validate.
type File struct {
	// Name is the file's name as given (used in errors).
	Name string
	// Service names the service whose policies these are, if the file
	// says.
	Service string
	// Description is free text, if the file gives it.
	Description string
	// Clients are the client policies, one per dependency, in the order
	// of the file.
	Clients []Client
	// Server is the server's defenses, or nil when the file has no server
	// block. It has the plain-data fields of httpx.ServerConfig and
	// grpcx.ServerConfig, which share them with admit.Config.
	Server *admit.Config

	written map[string]bool // key paths the file gives, for Effective
}

// Client is the policy a service applies to its calls to one dependency:
// retries (attempts, backoff, budget, pushback, deadline awareness,
// hedging) and, optionally, a circuit breaker.
type Client struct {
	// Dependency is the name of the service called: the key of the
	// client's block.
	Dependency string
	// Preset is the retry preset the block starts from (retry.Preset), or
	// "" when it starts from the zero Policy.
	Preset string
	// Policy is the retry policy: the preset's, with the fields the block
	// gives in its place. Its zero fields take retry's defaults when
	// [retry.New] builds it.
	Policy retry.Policy
	// BreakerPreset is the breaker preset the breaker block starts from
	// (breaker.Preset), or "".
	BreakerPreset string
	// Breaker is the circuit breaker, or nil for none.
	Breaker *breaker.Spec
}

// NewRetrier builds the retrier of c's policy, as [retry.New] does, with a
// circuit breaker built from c's breaker (see [Client.NewBreaker]) when
// there is one. opts are applied after it: a retry.WithBreaker among them
// replaces the file's breaker (a breaker shared by several retriers, one
// with its own random source). Build one retrier per dependency and share
// it between the goroutines that call the dependency: its budget and
// breaker count all of them.
func (c *Client) NewRetrier(opts ...retry.Option) (*retry.Retrier, error) {
	var all []retry.Option
	if c.Breaker != nil {
		b, err := c.NewBreaker()
		if err != nil {
			return nil, err
		}
		all = append(all, retry.WithBreaker(b))
	}
	r, err := retry.New(c.Policy, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("policyfile: dependency %s: %w", c.Dependency, err)
	}
	return r, nil
}

// NewBreaker builds c's circuit breaker with opts (breaker.New), or
// returns nil, nil when c has none.
func (c *Client) NewBreaker(opts ...breaker.Option) (*breaker.Breaker, error) {
	if c.Breaker == nil {
		return nil, nil
	}
	b, err := breaker.New(*c.Breaker, opts...)
	if err != nil {
		return nil, fmt.Errorf("policyfile: dependency %s: %w", c.Dependency, err)
	}
	return b, nil
}

// Client returns the policy of the dependency named dep. The error lists
// the dependencies the file has.
func (f *File) Client(dep string) (*Client, error) {
	for i := range f.Clients {
		if f.Clients[i].Dependency == dep {
			return &f.Clients[i], nil
		}
	}
	have := make([]string, len(f.Clients))
	for i, c := range f.Clients {
		have[i] = c.Dependency
	}
	list := "it has no clients"
	if len(have) > 0 {
		list = "have " + strings.Join(have, ", ")
	}
	return nil, fmt.Errorf("%s: no client policy for dependency %q (%s)", f.Name, dep, list)
}

// HTTPServer returns the server block as an httpx.ServerConfig, which
// embeds admit.Config, the block's type; the runtime fields (Limiter,
// Dials, the hooks) are for the caller to set. Without a server block it is
// the zero ServerConfig: every default. For gRPC, policyfile/grpcpolicy
// gives the grpcx.ServerConfig.
func (f *File) HTTPServer() httpx.ServerConfig {
	var c httpx.ServerConfig
	if f.Server != nil {
		c.Config = *f.Server
	}
	return c
}

// LineError is one problem with a policy file, at a line (0 when the
// problem has none, such as an empty file) and a dotted path of
// configuration names ("clients.db.backoff.base"; "" for the whole file).
// The error of Parse joins one LineError per problem, in the order of the
// lines; each prints as "FILE:LINE: PATH: message".
type LineError struct {
	File string
	Line int
	Path string
	Msg  string
}

func (e *LineError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	// A message may quote values that span lines: keep it on one.
	b.WriteString(strings.ReplaceAll(e.Msg, "\n", `\n`))
	return b.String()
}

// Load reads and parses the policy file at path (see [Parse]); path "-"
// reads standard input, named "stdin" in errors.
func Load(path string) (*File, error) {
	if path == "-" {
		return Read("stdin", os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(path, f)
}

// Read reads a policy file from r, at most [MaxFileSize] bytes, and parses
// it (see [Parse]); name is used in errors.
func Read(name string, r io.Reader) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w", name, ErrFileTooLarge)
	}
	return Parse(name, data)
}

// Parse decodes a policy file strictly and validates it. The format, YAML
// or JSON (JSON is read as the YAML it is), is described in docs/policy.md:
//
//	service: checkout
//	clients:
//	  db:                       # one block per dependency
//	    preset: stormguard      # optional: start from a retry preset
//	    max_attempts: 2         # fields of retry.Policy by their YAML names
//	    breaker: stormguard     # optional: a breaker preset or mapping
//	  payments: aws-2026        # a preset name alone
//	server:                     # optional: httpx/grpcx.ServerConfig fields
//	  max_timeout: 5s
//
// Every problem is reported, one [LineError] per line of the error, with
// the file's name and the line: a syntax error, an unknown field, a value
// of the wrong type (durations are strings such as "1s"), an unknown
// preset, an explicit zero or empty value where the field would silently
// take its default instead, and a value the package that uses it refuses
// (retry.Policy.Validate, breaker.Spec.Validate, admit.Config.Validate).
func Parse(name string, data []byte) (*File, error) {
	d := &decoder{written: map[string]bool{}}
	f := &File{Name: name, written: d.written}
	root := parseRoot(d, data)
	if root != nil {
		d.file(f, root)
	}
	if len(d.probs) == 0 {
		return f, nil
	}
	sortProblems(d.probs)
	errs := make([]error, len(d.probs))
	for i, p := range d.probs {
		errs[i] = &LineError{File: name, Line: p.line, Path: p.path, Msg: p.msg}
	}
	return nil, errors.Join(errs...)
}

// parseRoot parses data into a node tree with its aliases expanded and
// returns its top-level mapping, or nil after reporting why there is none.
func parseRoot(d *decoder, data []byte) *yaml.Node {
	root, err := yamlnode.OneDocument(data)
	var de *yamlnode.DocError
	switch {
	case errors.Is(err, yamlnode.ErrEmpty):
		d.add(nil, "", "the file is empty: a policy file has clients, a server block or both (see docs/policy.md)")
		return nil
	case errors.As(err, &de) && de.Second:
		d.probs = append(d.probs, problem{line: de.Line, msg: de.Msg + "; a policy file holds one"})
		return nil
	case errors.As(err, &de):
		d.probs = append(d.probs, problem{line: de.Line, msg: de.Msg})
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.add(root, "", "a policy file is a mapping (service: …, clients: …, server: …), not %s", kindName(root))
		return nil
	}
	return root
}

// fileKeys are the keys of the top-level mapping.
var fileKeys = []string{"service", "description", "clients", "server"}

// file reads the top-level mapping root into f.
func (d *decoder) file(f *File, root *yaml.Node) {
	var clients, server *yaml.Node
	for _, p := range d.pairs(root, "") {
		switch key := p.k.Value; key {
		case "service", "description":
			s := reflect.ValueOf(&f.Service).Elem()
			if key == "description" {
				s = reflect.ValueOf(&f.Description).Elem()
			}
			d.into(p.v, s, key, false)
		case "clients":
			clients = p.v
		case "server":
			server = p.v
		default:
			d.add(p.k, key, "unknown field (want one of %s)", strings.Join(fileKeys, ", "))
		}
	}
	if clients == nil && server == nil && len(d.probs) == 0 {
		d.add(root, "", "the file configures nothing: give clients, a server block or both (see docs/policy.md)")
	}
	if clients != nil {
		d.clients(f, clients)
	}
	if server != nil {
		d.server(f, server)
	}
}

// clients reads the clients mapping: dependency name → policy.
func (d *decoder) clients(f *File, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		d.add(n, "clients", "want a mapping of dependency name to policy (db: stormguard), not %s", kindName(n))
		return
	}
	ps := d.pairs(n, "clients")
	if len(ps) == 0 {
		d.add(n, "clients", "is empty: name at least one dependency, or leave clients out")
	}
	for _, p := range ps {
		name := p.k.Value
		path := "clients." + name
		switch {
		case name == "":
			d.add(p.k, "clients", "a dependency's name is empty")
			continue
		case strings.ContainsAny(name, ". \t"):
			d.add(p.k, path, "a dependency's name has no dots or spaces (it is a part of the paths in errors)")
			continue
		}
		before := len(d.probs)
		c := d.client(name, p.v, path)
		if len(d.probs) > before {
			continue
		}
		// Validate as retry.New and breaker.New will.
		if err := c.Policy.Validate(); err != nil {
			d.invalid(p.v, p.k.Line, path, err)
		}
		if c.Breaker != nil {
			bn := p.v
			for _, q := range d.quiet(p.v) {
				if q.k.Value == "breaker" {
					bn = q.v
				}
			}
			if err := c.Breaker.Validate(); err != nil {
				d.invalid(bn, bn.Line, path+".breaker", err)
			}
		}
		f.Clients = append(f.Clients, c)
	}
}

// quiet is pairs without reporting (the problems were reported once).
func (d *decoder) quiet(n *yaml.Node) []pair {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	q := &decoder{written: map[string]bool{}}
	return q.pairs(n, "")
}

// invalid reports each part of a validator's error (errors.Join puts one
// per line) at the line of the field it names in the block n (see locate).
func (d *decoder) invalid(n *yaml.Node, def int, path string, err error) {
	for _, msg := range strings.Split(err.Error(), "\n") {
		d.probs = append(d.probs, problem{line: locate(n, def, msg), path: path, msg: tidy(msg)})
	}
}

// clientKeys are the keys of a client block besides retry.Policy's.
var clientKeys = []string{"preset", "breaker"}

// client reads one dependency's block: a retry preset name, or a mapping
// with an optional preset, an optional breaker and retry.Policy fields.
func (d *decoder) client(name string, n *yaml.Node, path string) Client {
	c := Client{Dependency: name}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			d.add(n, path, "has no policy: give a preset name (%s) or a mapping", strings.Join(retry.Presets(), ", "))
			return c
		}
		c.Preset, c.Policy = d.retryPreset(n, path)
		return c
	case yaml.MappingNode:
	default:
		d.add(n, path, "a client policy is a preset name or a mapping {preset: NAME, field: value, …}, not %s", kindName(n))
		return c
	}
	var rest []pair
	var brk *yaml.Node
	ps := d.pairs(n, path)
	for _, p := range ps {
		switch p.k.Value {
		case "preset":
			d.written[path+".preset"] = true
			c.Preset, c.Policy = d.retryPreset(p.v, path+".preset")
		case "breaker":
			brk = p.v
		default:
			rest = append(rest, p)
		}
	}
	d.structFrom(rest, reflect.ValueOf(&c.Policy).Elem(), path, clientKeys...)
	if brk != nil {
		d.written[path+".breaker"] = true
		c.BreakerPreset, c.Breaker = d.breaker(brk, path+".breaker")
	}
	return c
}

// retryPreset reads a retry preset's name.
func (d *decoder) retryPreset(n *yaml.Node, path string) (string, retry.Policy) {
	msg := fmt.Sprintf("a retry preset is a name, one of %s", strings.Join(retry.Presets(), ", "))
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.add(n, path, "%s", msg)
		return "", retry.Policy{}
	}
	p, err := retry.Preset(n.Value)
	if err != nil {
		d.add(n, path, "unknown retry preset %q (%s)", n.Value, msg)
		return "", retry.Policy{}
	}
	return n.Value, p
}

// breaker reads a breaker: a preset name, or a mapping with an optional
// preset and breaker.Spec fields.
func (d *decoder) breaker(n *yaml.Node, path string) (string, *breaker.Spec) {
	msg := fmt.Sprintf("a breaker is a preset name (%s) or a mapping {preset: NAME, field: value, …}", strings.Join(breaker.Presets(), ", "))
	var preset string
	var s breaker.Spec
	readPreset := func(n *yaml.Node, path string) {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.add(n, path, "%s", msg)
			return
		}
		p, err := breaker.Preset(n.Value)
		if err != nil {
			d.add(n, path, "unknown breaker preset %q (%s)", n.Value, msg)
			return
		}
		preset, s = n.Value, p
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			d.add(n, path, "has no value: %s; leave it out for no breaker", msg)
			return "", nil
		}
		readPreset(n, path)
	case yaml.MappingNode:
		var rest []pair
		for _, p := range d.pairs(n, path) {
			if p.k.Value == "preset" {
				d.written[path+".preset"] = true
				readPreset(p.v, path+".preset")
				continue
			}
			rest = append(rest, p)
		}
		d.structFrom(rest, reflect.ValueOf(&s).Elem(), path, "preset")
	default:
		d.add(n, path, "%s, not %s", msg, kindName(n))
	}
	return preset, &s
}

// server reads the server block into an admit.Config and validates it as
// httpx.NewServer and grpcx.NewServer do.
func (d *decoder) server(f *File, n *yaml.Node) {
	var c admit.Config
	before := len(d.probs)
	d.into(n, reflect.ValueOf(&c).Elem(), "server", false)
	if len(d.probs) > before {
		return
	}
	if err := c.Validate(); err != nil {
		d.invalid(n, n.Line, "server", err)
		return
	}
	f.Server = &c
}
