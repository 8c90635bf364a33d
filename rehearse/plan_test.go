package rehearse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// base is a valid rehearsal with a placeholder for the target.
const base = `
name: t
duration: %s
clients:
  - name: c
    target: s
    arrivals: {kind: poisson, rate: %s}
    policy: {preset: naive, max_attempts: 3}
services:
  - name: s
    target: %s
%s`

func TestPlanRefuses(t *testing.T) {
	for _, c := range []struct {
		name, dur, rate, target, extra string
		lim                            Limits
		want                           string
	}{
		{"remote", "5s", "10", "http://192.0.2.1:80/", "", Limits{}, "is not on loopback"},
		{"remote name", "5s", "10", "http://example.com:80/", "", Limits{}, "--allow-remote example.com"},
		{"too fast", "5s", "600", "http://127.0.0.1:1/", "", Limits{}, "more than the limit (500/s"},
		{"too long", "3m", "10", "http://127.0.0.1:1/", "", Limits{}, "longer than the limit (2m0s"},
		{"beyond the ceiling", "5s", "10", "http://127.0.0.1:1/", "", Limits{MaxRate: 5000}, "not within (0, 3000]"},
		{"pause", "5s", "10", "http://127.0.0.1:1/", "triggers: [{kind: pause, target: s, at: 1s, duration: 1s}]", Limits{}, "no lever on a real service"},
		{"replicas", "5s", "10", "http://127.0.0.1:1/", "actions: [{kind: replicas, target: s, at: 1s, value: 2}]", Limits{}, "no lever for this"},
		{"no kill switch", "5s", "10", "http://127.0.0.1:1/", "actions: [{kind: shed, target: s, at: 1s, value: 0.5}]", Limits{}, "no kill switch to turn"},
		{"load trigger peak", "5s", "300", "http://127.0.0.1:1/", "triggers: [{kind: load, at: 1s, duration: 1s, factor: 2}]", Limits{}, "add up to 600/s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := scenario.ParseRehearsal("t.yaml", []byte(fmt.Sprintf(base, c.dur, c.rate, c.target, c.extra)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewPlan(f.Runs[0].Scenario, "t", ".", Shard{}, c.lim)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewPlan: %v; want an error with %q", err, c.want)
			}
		})
	}
	// Allowed by name, it plans.
	f, _ := scenario.ParseRehearsal("t.yaml", []byte(fmt.Sprintf(base, "5s", "10", "http://example.com:80/", "")))
	if _, err := NewPlan(f.Runs[0].Scenario, "t", ".", Shard{}, Limits{AllowRemote: []string{"example.com"}}); err != nil {
		t.Errorf("allowed: %v", err)
	}
}

// The format: the model's commands refuse a rehearsal's keys at their
// line; a rehearsal reads them and checks them.
func TestFormat(t *testing.T) {
	text := fmt.Sprintf(base, "5s", "10", "http://127.0.0.1:8080/x", "")
	_, err := scenario.Parse("t.yaml", []byte(text))
	if err == nil || !strings.Contains(err.Error(), "t.yaml:11:") || !strings.Contains(err.Error(), "stormguard rehearse") {
		t.Errorf("Parse: %v; want the target's line and a pointer to stormguard rehearse", err)
	}
	for _, c := range []struct{ target, extra, want string }{
		{"https://127.0.0.1:1/", "", "TLS is not supported"},
		{"grpc://127.0.0.1:1/Svc", "", "grpc://HOST:PORT/package.Service/Method"},
		{"tcp://127.0.0.1:1", "", "needs listen"},
		{"http://127.0.0.1:1/", "    workers: 3\n", "no model keys"},
		{"http://127.0.0.1:1/", "    request: {headers: [\"bad header\"]}\n", `"bad header" is not "Name: value"`},
		{"grpc://127.0.0.1:1/a.B/C", "    request: {body: hi}\n", "body_base64 or body_file"},
		{"http://127.0.0.1:1/", "    admin: {url: \"http://127.0.0.1:2/\"}\n", "token_file or token_env"},
		{"http://127.0.0.1:1/", "    metrics: {}\n", "one of the two"},
		{"http://127.0.0.1:1/", "    fleet_dials: x\n", "rehearse.redis"},
	} {
		_, err := scenario.ParseRehearsal("t.yaml", []byte(fmt.Sprintf(base, "5s", "10", c.target, c.extra)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v; want %q", c.target, c.extra, err, c.want)
		}
	}
}

// The hard counter: a plan whose worst case is cut to 40 attempts sends
// 40 to a server that fails every one, however many its clients would
// retry, and refuses the rest unsent.
func TestGuardCapsAttempts(t *testing.T) {
	var arrived, preflights, strangers atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() == UserAgent("preflight") {
			preflights.Add(1)
			return // the preflight's probes: ok
		}
		if !fromClient(r) {
			strangers.Add(1)
			return
		}
		arrived.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	p := rehearseFile(t, fmt.Sprintf(base, "2s", "50", srv.URL+"/", ""), t.TempDir(), Limits{})[0]
	if p.WorstCase < 200 {
		t.Fatalf("worst case %d: the plan is too small for the test", p.WorstCase)
	}
	p.WorstCase = 40
	r, err := Run(t.Context(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := arrived.Load(); got != 40 || r.Sent != 40 || r.Refused == 0 {
		t.Errorf("the server saw %d attempts, the guard let %d through and refused %d; want 40 through and the rest refused", got, r.Sent, r.Refused)
	}
	if preflights.Load() == 0 || strangers.Load() != 0 {
		t.Errorf("%d requests as the preflight, %d with neither the preflight's nor a client's User-Agent; want some, none", preflights.Load(), strangers.Load())
	}
	if e := r.Clients[0].Outcomes.Errors["plan exhausted"]; e == 0 {
		t.Errorf("no request ended on the counter: %s", r.Clients[0].Outcomes)
	}
}

// The guard refuses a connection to anything but loopback before it is
// made, whatever a name resolved to.
func TestGuardRefusesRemote(t *testing.T) {
	g, err := NewGuard(10, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = g.Dialer().DialContext(ctx, "tcp", "192.0.2.1:80")
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("dial 192.0.2.1:80: %v; want it refused", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	c, err := g.Dialer().DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Errorf("dial loopback: %v", err)
	} else {
		c.Close()
	}
}

func TestShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		ok   bool
	}{{"1/1", Shard{0, 1}, true}, {"2/3", Shard{1, 3}, true}, {"0/3", Shard{}, false}, {"4/3", Shard{}, false}, {"x", Shard{}, false}, {"1/1001", Shard{}, false}} {
		got, err := ParseShard(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v", c.in, got, err)
		}
	}
	// The shards' arrivals are a partition of the whole run's.
	f, _ := scenario.ParseRehearsal("t.yaml", []byte(fmt.Sprintf(base, "10s", "100", "http://127.0.0.1:1/", "")))
	whole, _ := NewPlan(f.Runs[0].Scenario, "t", ".", Shard{}, Limits{})
	seen := map[time.Duration]int{}
	n := 0
	for i := range 3 {
		p, err := NewPlan(f.Runs[0].Scenario, "t", ".", Shard{i, 3}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range p.Clients[0].Arrivals {
			seen[a]++
		}
		n += len(p.Clients[0].Arrivals)
	}
	if n != len(whole.Clients[0].Arrivals) {
		t.Errorf("the shards hold %d arrivals, the whole run %d", n, len(whole.Clients[0].Arrivals))
	}
	for _, a := range whole.Clients[0].Arrivals {
		if seen[a] != 1 {
			t.Fatalf("arrival %v is in %d shards", a, seen[a])
		}
	}
}

var _ = errors.New
