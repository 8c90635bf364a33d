package scenario

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// A rehearsal (stormguard rehearse, docs/rehearse.md) runs a scenario's
// clients against real services: a service whose Target is an address
// instead of a model. These keys belong to rehearsals only: [Parse] (and
// so stormguard sim, sweep, analyze and lab) refuses them at their line,
// [ParseRehearsal] reads them, and [Scenario.Validate] refuses a scenario
// built in Go that has them ([Scenario.ValidateRehearsal] accepts it).

// Endpoint makes a service a real one in a rehearsal. Its fields are the
// service's own keys (inlined).
type Endpoint struct {
	// Target is where the real service listens:
	//
	//	http://HOST:PORT/PATH                 an HTTP endpoint the clients call
	//	grpc://HOST:PORT/pkg.Service/Method   a unary gRPC method the clients call
	//	tcp://HOST:PORT                       a dependency of a target, which the
	//	                                      rehearsal does not call: the user
	//	                                      points the target at Listen, where
	//	                                      the fault proxy forwards to HOST:PORT
	Target string `yaml:"target,omitempty" json:"target,omitempty"`
	// Request is what every attempt sends (HTTP and gRPC targets) [GET,
	// no headers, no body].
	Request *Request `yaml:"request,omitempty" json:"request,omitempty"`
	// Listen is where the fault proxy in front of a tcp:// dependency
	// listens, 127.0.0.1:PORT (the target is configured to call it).
	Listen string `yaml:"listen,omitempty" json:"listen,omitempty"`
	// Admin is the service's kill-switch admin endpoint
	// (killswitch.NewAdmin), which the runbook's steps turn.
	Admin *Admin `yaml:"admin,omitempty" json:"admin,omitempty"`
	// FleetDials names the fleet's dials on Redis (package fleet) that the
	// service's processes watch; the runbook's steps set them
	// (rehearse.redis names the server).
	FleetDials string `yaml:"fleet_dials,omitempty" json:"fleet_dials,omitempty"`
	// Metrics, when set, measures the service's side from stormguard's
	// Prometheus metrics, every second of the run.
	Metrics *Metrics `yaml:"metrics,omitempty" json:"metrics,omitempty"`
}

// Request is what an attempt sends.
type Request struct {
	// Method of an HTTP request [GET]; a gRPC call is always a POST.
	Method string `yaml:"method,omitempty" json:"method,omitempty"`
	// Headers, each "Name: value" (gRPC: metadata, lower-cased).
	Headers []string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Body of an HTTP request, as text. For gRPC, Body64 or BodyFile hold
	// the serialized request message (protobuf wire bytes), sent as they
	// are: a rehearsal needs no .proto.
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
	// Body64 is the body in standard base64.
	Body64 string `yaml:"body_base64,omitempty" json:"body_base64,omitempty"`
	// BodyFile is a file holding the body, relative to the scenario file.
	BodyFile string `yaml:"body_file,omitempty" json:"body_file,omitempty"`
	// Template makes Body and the header values Go templates (text/template)
	// executed for every request with .Client (its name), .Seq (the
	// request's number in its client, from 0, the same in every shard) and
	// .Tap (a person's tap, from 1; 1 without humans); every attempt of a
	// request sends the same bytes.
	Template bool `yaml:"template,omitempty" json:"template,omitempty"`
}

// Admin is a kill-switch admin endpoint and its bearer token.
type Admin struct {
	// URL of the endpoint (http://HOST:PORT/PATH).
	URL string `yaml:"url" json:"url"`
	// TokenFile holds the token (its first line), relative to the
	// scenario file; or TokenEnv names the environment variable that holds
	// it. One of the two.
	TokenFile string `yaml:"token_file,omitempty" json:"token_file,omitempty"`
	TokenEnv  string `yaml:"token_env,omitempty" json:"token_env,omitempty"`
}

// Metrics says where to read a service's stormguard metrics.
type Metrics struct {
	// Scrape is the service's own /metrics URL (Prometheus text format);
	// or Prometheus the base URL of a Prometheus server to query. One of
	// the two.
	Scrape     string `yaml:"scrape,omitempty" json:"scrape,omitempty"`
	Prometheus string `yaml:"prometheus,omitempty" json:"prometheus,omitempty"`
	// Target is the value of the metrics' target label [the service's
	// name]; Selector adds label matchers for a Prometheus query
	// (`job="shop"`).
	Target   string `yaml:"target,omitempty" json:"target,omitempty"`
	Selector string `yaml:"selector,omitempty" json:"selector,omitempty"`
}

// RehearseSpec holds a rehearsal's settings (the scenario's rehearse key).
type RehearseSpec struct {
	// Redis is the address (HOST:PORT) of the Redis that holds the fleet's
	// dials, for fleet_dials; its password, if any, is in
	// $STORMGUARD_REDIS_PASSWORD.
	Redis string `yaml:"redis,omitempty" json:"redis,omitempty"`
	// Calm is the length of the calm phase before the run in which
	// `stormguard rehearse --predict` measures the target for its fitted
	// model [5s].
	Calm time.Duration `yaml:"calm,omitempty" json:"calm_ns,omitempty"`
}

// Endpoint kinds, from a Target's scheme.
const (
	EndpointHTTP = "http"
	EndpointGRPC = "grpc"
	EndpointTCP  = "tcp"
)

// IsEndpoint reports whether the service is a real one (it has a Target).
func (v Service) IsEndpoint() bool { return v.Endpoint.Target != "" }

// HasEndpoints reports whether any service is a real one, or the scenario
// has rehearsal keys: a scenario only stormguard rehearse runs.
func (s Scenario) HasEndpoints() bool { return s.rehearsalKey() != "" }

// rehearsalKey is the path of the scenario's first rehearsal key, or "".
func (s Scenario) rehearsalKey() string {
	if s.Rehearse != nil {
		return "rehearse"
	}
	for i, c := range s.Clients {
		if c.FleetDials != "" {
			return elemPath("clients", c.Name, i) + ".fleet_dials"
		}
	}
	for i, v := range s.Services {
		if !reflect.ValueOf(v.Endpoint).IsZero() {
			return elemPath("services", v.Name, i) + "." + endpointKey(v.Endpoint)
		}
	}
	return ""
}

// endpointKey is the YAML name of e's first key set.
func endpointKey(e Endpoint) string {
	rv, rt := reflect.ValueOf(e), reflect.TypeOf(e)
	for i := range rt.NumField() {
		if !rv.Field(i).IsZero() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ",")
			return name
		}
	}
	return "target"
}

// errEndpoint is the message of a rehearsal key where a model is wanted.
const errEndpoint = "a rehearsal key (a real service to send requests to): stormguard sim, sweep, analyze and lab run models; run this file with stormguard rehearse (see docs/rehearse.md)"

// EndpointAddr parses a Target: its kind (EndpointHTTP, EndpointGRPC or
// EndpointTCP), host:port, and the path (the HTTP path with its query,
// or /pkg.Service/Method).
func EndpointAddr(target string) (kind, hostport, path string, err error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", "", "", fmt.Errorf("%q is not a URL: %v", target, err)
	}
	switch u.Scheme {
	case EndpointHTTP, EndpointGRPC, EndpointTCP:
	case "https", "grpcs":
		return "", "", "", fmt.Errorf("%q: a rehearsal speaks plain text on loopback (http, grpc); TLS is not supported", target)
	default:
		return "", "", "", fmt.Errorf("%q: the scheme must be http, grpc or tcp", target)
	}
	if u.User != nil || u.Fragment != "" {
		return "", "", "", fmt.Errorf("%q: no user or fragment, please", target)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return "", "", "", fmt.Errorf("%q: want HOST:PORT after %s://", target, u.Scheme)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return "", "", "", fmt.Errorf("%q: port %q is not in 1..65535", target, port)
	}
	path = u.EscapedPath()
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	switch u.Scheme {
	case EndpointGRPC:
		parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
		if len(parts) != 2 || parts[0] == "" || parts[1] == "" || u.RawQuery != "" {
			return "", "", "", fmt.Errorf("%q: a gRPC target is grpc://HOST:PORT/package.Service/Method", target)
		}
	case EndpointTCP:
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return "", "", "", fmt.Errorf("%q: a tcp target is tcp://HOST:PORT, without a path", target)
		}
		path = ""
	default:
		if path == "" {
			path = "/"
		}
	}
	return u.Scheme, u.Host, path, nil
}

// validateEndpoint reports the problems of a real service's keys.
func (v Service) validateEndpoint(f *fieldErrs, at string) {
	e := v.Endpoint
	if e.Target == "" {
		f.add("the rehearsal keys (request, listen, admin, fleet_dials, metrics) belong to a real service: give its target", at, endpointKey(e))
		return
	}
	kind, _, _, err := EndpointAddr(e.Target)
	if err != nil {
		f.add(err.Error(), at, "target")
		return
	}
	model := v
	model.Name, model.Endpoint = "", Endpoint{}
	if !reflect.ValueOf(model).IsZero() {
		f.add("a real service has no model keys (workers, service_time, queue, calls, defenses …): it is measured, and --predict fits its model", at)
	}
	if kind == EndpointTCP {
		if e.Listen == "" {
			f.add("a tcp dependency needs listen: 127.0.0.1:PORT, where the fault proxy listens and the target is configured to call", at, "listen")
		} else if err := loopbackListen(e.Listen); err != nil {
			f.add(err.Error(), at, "listen")
		}
		if e.Request != nil || e.Metrics != nil {
			f.add("a tcp dependency is not called by the rehearsal: no request, no metrics", at)
		}
	} else if e.Listen != "" {
		f.add("listen is for a tcp dependency; the proxy in front of an http or grpc target listens where the rehearsal chooses", at, "listen")
	}
	if r := e.Request; r != nil {
		r.validate(f, at+".request", kind)
	}
	if a := e.Admin; a != nil {
		if k, _, _, err := EndpointAddr(a.URL); err != nil || k != EndpointHTTP {
			f.add(fmt.Sprintf("%q is not an http:// URL", a.URL), at, "admin.url")
		}
		if (a.TokenFile == "") == (a.TokenEnv == "") {
			f.add("give the token in token_file or token_env (one of the two): the endpoint refuses requests without it", at, "admin")
		}
	}
	if e.FleetDials != "" && strings.ContainsAny(e.FleetDials, "{}") {
		f.add(fmt.Sprintf("%q: a dials name has no '{' or '}'", e.FleetDials), at, "fleet_dials")
	}
	if m := e.Metrics; m != nil {
		if (m.Scrape == "") == (m.Prometheus == "") {
			f.add("give scrape (the service's /metrics URL) or prometheus (a Prometheus server's URL), one of the two", at, "metrics")
		}
		for key, u := range map[string]string{"scrape": m.Scrape, "prometheus": m.Prometheus} {
			if u == "" {
				continue
			}
			if k, _, _, err := EndpointAddr(u); err != nil || k != EndpointHTTP {
				f.add(fmt.Sprintf("%q is not an http:// URL", u), at, "metrics."+key)
			}
		}
		if m.Selector != "" && m.Prometheus == "" {
			f.add("a selector is for a Prometheus query", at, "metrics.selector")
		}
	}
}

// validate reports the problems of a request.
func (r *Request) validate(f *fieldErrs, at, kind string) {
	bodies := 0
	for _, b := range []string{r.Body, r.Body64, r.BodyFile} {
		if b != "" {
			bodies++
		}
	}
	if bodies > 1 {
		f.add("give at most one of body, body_base64 and body_file", at)
	}
	if r.Body64 != "" {
		if _, err := base64.StdEncoding.DecodeString(r.Body64); err != nil {
			f.add("is not standard base64: "+err.Error(), at, "body_base64")
		}
	}
	switch {
	case kind == EndpointGRPC && r.Method != "" && r.Method != "POST":
		f.add("a gRPC call is a POST; leave method out", at, "method")
	case kind == EndpointGRPC && r.Body != "":
		f.add("a gRPC request is a serialized protobuf message: give it in body_base64 or body_file", at, "body")
	case r.Method != "" && !validToken(r.Method):
		f.add(fmt.Sprintf("%q is not an HTTP method", r.Method), at, "method")
	}
	for i, h := range r.Headers {
		name, val, ok := strings.Cut(h, ":")
		if !ok || !validToken(strings.TrimSpace(name)) || strings.TrimSpace(name) != name || strings.ContainsAny(val, "\r\n") {
			f.add(fmt.Sprintf("%q is not \"Name: value\"", h), at, "headers", strconv.Itoa(i))
		}
	}
	if r.Template {
		if kind == EndpointGRPC && (r.Body64 != "" || r.BodyFile != "") {
			f.add("a gRPC body is bytes, not a template (headers may be)", at, "template")
		}
		texts := append([]string{r.Body}, r.Headers...)
		for _, s := range texts {
			if _, err := template.New("").Option("missingkey=error").Parse(s); err != nil {
				f.add("not a template: "+err.Error(), at, "template")
			}
		}
	}
}

// validToken reports whether s is an HTTP token (RFC 9110 section 5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 127 || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// loopbackListen checks a listen address: 127.0.0.1:PORT or [::1]:PORT.
func loopbackListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		ip := net.ParseIP(host)
		if p, perr := strconv.ParseUint(port, 10, 16); perr == nil && p > 0 && ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q: the fault proxy listens on a loopback address, 127.0.0.1:PORT", addr)
}

// validateRehearsal reports the problems of the rehearsal keys; rehearsal
// says whether they are allowed at all.
func (s Scenario) validateRehearsal(f *fieldErrs, rehearsal bool) {
	if !rehearsal {
		if key := s.rehearsalKey(); key != "" {
			f.add(errEndpoint, key)
		}
		return
	}
	for i, v := range s.Services {
		at := elemPath("services", v.Name, i)
		if reflect.ValueOf(v.Endpoint).IsZero() {
			f.add("a rehearsal sends to real services only: give this one a target (http://, grpc:// or tcp://)", at)
			continue
		}
		v.validateEndpoint(f, at)
	}
	for i, c := range s.Clients {
		for _, v := range s.Services {
			if v.Name == c.Target && v.IsEndpoint() {
				if k, _, _, err := EndpointAddr(v.Endpoint.Target); err == nil && k == EndpointTCP {
					f.add(fmt.Sprintf("%q is a tcp dependency, which the rehearsal does not call: target an http:// or grpc:// service", c.Target), elemPath("clients", c.Name, i), "target")
				}
			}
		}
		if c.FleetDials != "" && strings.ContainsAny(c.FleetDials, "{}") {
			f.add(fmt.Sprintf("%q: a dials name has no '{' or '}'", c.FleetDials), elemPath("clients", c.Name, i), "fleet_dials")
		}
	}
	needRedis := false
	for _, c := range s.Clients {
		needRedis = needRedis || c.FleetDials != ""
	}
	for _, v := range s.Services {
		needRedis = needRedis || v.Endpoint.FleetDials != ""
	}
	r := s.Rehearse
	if needRedis && (r == nil || r.Redis == "") {
		f.add("fleet_dials needs the Redis that holds them: rehearse.redis: HOST:PORT", "rehearse")
	}
	if r != nil {
		if r.Redis != "" {
			if _, port, err := net.SplitHostPort(r.Redis); err != nil || port == "" {
				f.add(fmt.Sprintf("%q is not HOST:PORT", r.Redis), "rehearse", "redis")
			}
		}
		if r.Calm < 0 {
			f.add("must not be negative", "rehearse", "calm")
		}
	}
}
