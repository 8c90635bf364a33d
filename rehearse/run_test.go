package rehearse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/sim/scenario"
)

// fromClient says whether r is one of a client's requests (not the
// preflight's or a probe's), by the User-Agent a rehearsal sends.
func fromClient(r *http.Request) bool {
	return strings.HasPrefix(r.UserAgent(), "stormguard-rehearse (client ")
}

// Ctrl-C: the load stops at once, the requests in flight end as
// cancelled, and what was measured comes back, cut where the run stopped.
func TestInterrupt(t *testing.T) {
	defer leakcheck.Check(t)
	var arrived atomic.Int64
	var last atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fromClient(r) {
			arrived.Add(1)
			last.Store(time.Now().UnixNano())
		}
		time.Sleep(100 * time.Millisecond)
	}))
	defer srv.Close()
	p := rehearseFile(t, fmt.Sprintf(base, "20s", "100", srv.URL+"/", ""), t.TempDir(), Limits{})[0]
	ctx, cancel := context.WithCancel(t.Context())
	var stopped time.Time
	go func() {
		time.Sleep(2500 * time.Millisecond) // the preflight, then about 2 s of the run
		stopped = time.Now()
		cancel()
	}()
	r, err := Run(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(stopped)
	checkAccounts(t, r)
	if o := r.Clients[0].Outcomes; o.Errors["canceled"] != 0 {
		t.Errorf("%d requests booked as cancelled: the interrupt leaves their fate open (in flight), it does not fail them", o.Errors["canceled"])
	}
	if !r.Interrupted || r.StoppedS <= 0 || r.StoppedS > 4 || r.Result.DurationS != r.StoppedS {
		t.Errorf("interrupted %v at %.1f s, series of %.1f s", r.Interrupted, r.StoppedS, r.Result.DurationS)
	}
	if took > 3*time.Second {
		t.Errorf("Run returned %v after the interrupt", took)
	}
	if d := time.Unix(0, last.Load()).Sub(stopped); d > 200*time.Millisecond {
		t.Errorf("the last attempt arrived %v after the interrupt", d)
	}
	if o := r.Clients[0].Outcomes; o.Sent == 0 || o.Succeeded == 0 || int(o.Sent) >= len(p.Clients[0].Arrivals) {
		t.Errorf("outcomes %s of %d arrivals", o, len(p.Clients[0].Arrivals))
	}
	t.Logf("%s; %d attempts arrived; returned %v after the interrupt", summary(r), arrived.Load(), took)
}

// gRPC without the service's .proto: the request is given as serialized
// bytes (here a grpc.health.v1.HealthCheckRequest) and sent as they are;
// every attempt goes through grpcx's interceptor (the attempt number on
// the wire), and the error front fails half the calls with UNAVAILABLE
// during its window, which the policy retries.
func TestGRPC(t *testing.T) {
	defer leakcheck.Check(t)
	var attempts [4]atomic.Int64
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("stormguard-attempt"); len(v) == 1 && len(v[0]) == 1 && v[0][0] >= '1' && v[0][0] <= '3' {
			attempts[v[0][0]-'0'].Add(1)
		}
		return h(ctx, req)
	}))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	msg, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: ""})
	extra := fmt.Sprintf("    request: {body_base64: %q, headers: [\"x-test: {{.Client}}-{{.Seq}}\"], template: true}\ntriggers: [{kind: errors, target: s, at: 1s, duration: 2s, factor: 0.5}]\n",
		base64.StdEncoding.EncodeToString(msg))
	p := rehearseFile(t, fmt.Sprintf(base, "4s", "50", "grpc://"+ln.Addr().String()+"/grpc.health.v1.Health/Check", extra), t.TempDir(), Limits{})[0]
	r, err := Run(t.Context(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkAccounts(t, r)
	t.Logf("%s; attempts by number %d %d %d; front %+v", summary(r), attempts[1].Load(), attempts[2].Load(), attempts[3].Load(), r.Paths[0])
	o := r.Clients[0].Outcomes
	if o.Succeeded < o.Sent*8/10 || attempts[2].Load() == 0 || r.Paths[0].Injected == 0 {
		t.Errorf("outcomes %s, second attempts %d, injected %d: want retries to carry most calls through the brownout", o, attempts[2].Load(), r.Paths[0].Injected)
	}
	if r.Result.Clients[0].Total.Retries == 0 {
		t.Error("no retries booked")
	}
}

// People tap again: a tap that fails is followed by another, up to Taps;
// the person's intent is what demand counts.
func TestHumans(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fromClient(r) && n.Add(1)%2 == 1 {
			http.Error(w, "odd", http.StatusBadRequest) // never retried by the policy
		}
	}))
	defer srv.Close()
	f := fmt.Sprintf(`
name: h
duration: 3s
clients:
  - name: people
    target: s
    arrivals: {kind: poisson, rate: 40}
    humans: {patience: {kind: constant, mean: 2s}, taps: 3}
services:
  - name: s
    target: %s/
`, srv.URL)
	hp := rehearseFile(t, f, t.TempDir(), Limits{})[0]
	if hp.Clients[0].Taps != 3 || hp.WorstCase != int64(3*hp.Clients[0].Attempts*len(hp.Clients[0].Arrivals)) {
		t.Fatalf("taps %d, worst case %d", hp.Clients[0].Taps, hp.WorstCase)
	}
	r, err := Run(t.Context(), hp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkAccounts(t, r)
	c := r.Clients[0]
	t.Log(summary(r))
	if c.HumanRetries == 0 || c.Outcomes.Succeeded < c.Outcomes.Sent*9/10 {
		t.Errorf("%d taps after the first, %s: want people to tap again past the failures", c.HumanRetries, c.Outcomes)
	}
}

// Shards: two parts of one rehearsal, started together, merge into the
// whole run's requests, with every part's JSON read back strictly.
func TestMerge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	text := fmt.Sprintf(base, "3s", "60", srv.URL+"/", "")
	whole := rehearseFile(t, text, t.TempDir(), Limits{})[0]
	f := rehearseFileShards(t, text, 2)
	start := time.Now().Add(time.Second)
	outs := make([]Output, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			r, err := Run(t.Context(), f[i], Options{Start: start})
			if err != nil {
				t.Error(err)
				return
			}
			var o Output
			o.Add(f[i], r)
			data, _ := json.Marshal(o)
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&outs[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	m, err := Merge(outs[1], outs[0])
	if err != nil {
		t.Fatal(err)
	}
	tot := m.Runs[0].Clients[0].Total
	if int(tot.Requests) != len(whole.Clients[0].Arrivals) || m.Rehearsals[0].Clients[0].Outcomes.Sent != tot.Requests {
		t.Errorf("merged %d requests (%s), the whole run has %d", tot.Requests, m.Rehearsals[0].Clients[0].Outcomes, len(whole.Clients[0].Arrivals))
	}
	if v := m.Runs[0].Verdict; v != "stable" && v != "inconclusive" {
		t.Errorf("merged verdict %s: %s", v, m.Runs[0].Why)
	}
	if m.Runs[0].Clients[0].Bins[15].LatencyP50 <= 0 {
		t.Error("no merged latency")
	}
	if _, err := Merge(outs[0]); err == nil {
		t.Error("one shard of two merged")
	}
	if _, err := Merge(outs[0], outs[0]); err == nil {
		t.Error("a shard given twice merged")
	}
}

// rehearseFileShards plans the first run of text as n shards.
func rehearseFileShards(t *testing.T, text string, n int) []Plan {
	t.Helper()
	f, err := scenario.ParseRehearsal("t.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var ps []Plan
	for i := range n {
		p, err := NewPlan(f.Runs[0].Scenario, f.Runs[0].Name, ".", Shard{i, n}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// Many clients in one run, each with its own policy — a preset, and the
// payments policy of a policy file (examples/policy/checkout.yaml, as
// production loads it) — against one service that fails every other
// attempt: each client's books are its own, and each retries as its
// policy says.
func TestManyClients(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fromClient(r) && n.Add(1)%2 == 0 {
			http.Error(w, "every other", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	text := fmt.Sprintf(`
name: many
duration: 3s
clients:
  - {name: naive, target: s, arrivals: {kind: poisson, rate: 40}, policy: {preset: naive, max_attempts: 3}}
  - {name: none, target: s, arrivals: {kind: constant, rate: 30}, policy: {preset: naive, max_attempts: 1}}
  - {name: payments, target: s, arrivals: {kind: poisson, rate: 20}, policy_file: %q, dependency: payments}
services:
  - name: s
    target: %s/
`, must(filepath.Abs("../examples/policy/checkout.yaml")), srv.URL)
	f, err := scenario.LoadRehearsal(writeFile(t, dir, "many.yaml", text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(f.Runs[0].Scenario, "many", dir, Shard{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Clients[2].Policy.Budget.Kind == "" || p.Clients[2].Attempts != 3 {
		t.Fatalf("the policy file's payments policy was not read: %+v", p.Clients[2].Policy)
	}
	r, err := Run(t.Context(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkAccounts(t, r)
	t.Log(summary(r))
	tot := func(i int) int64 { return r.Result.Clients[i].Total.Retries }
	if tot(0) == 0 || tot(1) != 0 || tot(2) == 0 {
		t.Errorf("retries: naive %d, one attempt %d, payments %d; want naive and payments to retry, the one-attempt client never", tot(0), tot(1), tot(2))
	}
	if got := r.Result.Clients[1].Total.Requests; got != int64(len(p.Clients[1].Arrivals)) {
		t.Errorf("the one-attempt client sent %d of its %d arrivals", got, len(p.Clients[1].Arrivals))
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := dir + "/" + name
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
