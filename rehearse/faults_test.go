package rehearse

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim/result"
)

// faultRun: 50 requests a second, evenly spaced, for 3 s; one attempt
// each (what the fault does is what the client sees), 400 ms timeout.
const faultRun = `
name: faults
duration: 3s
seed: 1
clients:
  - name: c
    target: s
    arrivals: {kind: constant, rate: 50}
    timeout: 400ms
    policy: {preset: naive, max_attempts: 1}
services:
  - name: s
    target: %s
%s
triggers:
  - %s
`

// window sums a client's bins that start in [from, to): the demand, the
// goodput and the requests that arrived there and failed (per second,
// averaged), and the median of the bins' median latencies, in seconds.
type window struct {
	demand, goodput, failed, p50 float64
}

func windowOf(c result.ClientSeries, from, to float64) window {
	var w window
	var p50s []float64
	n := 0
	for _, b := range c.Bins {
		if b.T < from-1e-9 || b.T >= to-1e-9 {
			continue
		}
		n++
		w.demand += b.Demand
		w.goodput += b.Goodput
		w.failed += b.ArrivedFailed
		if b.Goodput > 0 {
			p50s = append(p50s, b.LatencyP50)
		}
	}
	if n > 0 {
		w.demand, w.goodput, w.failed = w.demand/float64(n), w.goodput/float64(n), w.failed/float64(n)
	}
	if len(p50s) > 0 {
		for i := range p50s { // insertion sort: a few dozen bins
			for j := i; j > 0 && p50s[j] < p50s[j-1]; j-- {
				p50s[j], p50s[j-1] = p50s[j-1], p50s[j]
			}
		}
		w.p50 = p50s[len(p50s)/2]
	}
	return w
}

func (w window) String() string {
	return fmt.Sprintf("demand %.0f/s, goodput %.0f/s, failed %.0f/s, p50 %.0f ms", w.demand, w.goodput, w.failed, 1000*w.p50)
}

// connErrors counts a client's requests that ended in a connection
// failure (refused, reset, closed).
func connErrors(o map[string]int64) int64 {
	var n int64
	for k, v := range o {
		if strings.HasPrefix(k, "connection") {
			n += v
		}
	}
	return n
}

// The faults of a rehearsal during a run, each seen from the clients'
// side in the measured series: the fault proxy's latency (in front of the
// service, and in front of a tcp:// dependency the service calls through
// the proxy's listen address) and drop outage, and a load trigger of the
// generator. The service is in the test's process; it counts the clients'
// requests by the time they reached it.
func TestFaultsDuringRun(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearsals of real time (four of 3 s): not in -short")
	}
	defer leakcheck.Check(t)
	// db is a dependency the service calls over TCP for each request: one
	// byte there and back.
	db, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dbConns sync.WaitGroup
	defer func() { db.Close(); dbConns.Wait() }()
	go func() {
		for {
			c, err := db.Accept()
			if err != nil {
				return
			}
			dbConns.Go(func() {
				defer c.Close()
				b := make([]byte, 1)
				for {
					if _, err := io.ReadFull(c, b); err != nil {
						return
					}
					if _, err := c.Write(b); err != nil {
						return
					}
				}
			})
		}
	}()
	dbListen := freeAddr(t) // where the rehearsal's proxy for db listens

	var mu sync.Mutex
	var arrived []time.Time
	var useDB bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromClient(r) {
			return
		}
		mu.Lock()
		arrived = append(arrived, time.Now())
		viaDB := useDB
		mu.Unlock()
		if viaDB {
			c, err := net.DialTimeout("tcp", dbListen, time.Second)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer c.Close()
			b := []byte{'x'}
			if _, err := c.Write(b); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			if _, err := io.ReadFull(c, b); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	dbService := fmt.Sprintf("  - name: db\n    target: tcp://%s\n    listen: %s", db.Addr(), dbListen)

	for _, c := range []struct {
		name, services, trigger string
		viaDB                   bool
		check                   func(t *testing.T, r Result, arrivedIn func(from, to float64) int)
	}{
		{name: "latency", trigger: "{kind: latency, target: s, at: 1s, duration: 1s, add: 200ms}",
			check: func(t *testing.T, r Result, _ func(from, to float64) int) {
				before, during, later := windowOf(r.Result.Clients[0], 0.3, 1), windowOf(r.Result.Clients[0], 1.3, 2), windowOf(r.Result.Clients[0], 2.5, 3)
				t.Logf("before: %s; during: %s; after: %s", before, during, later)
				if during.p50 < 0.2 || during.p50 > 0.35 || before.p50 > 0.1 || later.p50 > 0.1 {
					t.Errorf("median latency %.0f ms before, %.0f ms during, %.0f ms after the 200 ms; want ≥ 200 ms (and < 350) during only",
						1000*before.p50, 1000*during.p50, 1000*later.p50)
				}
				if o := r.Clients[0].Outcomes; o.Succeeded != o.Sent {
					t.Errorf("outcomes %s: a 200 ms delay within a 400 ms timeout fails nothing", o)
				}
			}},
		{name: "latency of a tcp dependency", services: dbService, viaDB: true,
			trigger: "{kind: latency, target: db, at: 1s, duration: 1s, add: 150ms}",
			check: func(t *testing.T, r Result, _ func(from, to float64) int) {
				before, during, later := windowOf(r.Result.Clients[0], 0.3, 1), windowOf(r.Result.Clients[0], 1.3, 2), windowOf(r.Result.Clients[0], 2.5, 3)
				t.Logf("before: %s; during: %s; after: %s; db's proxy %+v", before, during, later, r.Paths[1].Proxy)
				if during.p50 < 0.15 || during.p50 > 0.3 || before.p50 > 0.1 || later.p50 > 0.1 {
					t.Errorf("median latency %.0f ms before, %.0f ms during, %.0f ms after the 150 ms on db; want ≥ 150 ms (and < 300) during only",
						1000*before.p50, 1000*during.p50, 1000*later.p50)
				}
				if px := r.Paths[1].Proxy; px == nil || px.Accepted < uint64(r.Clients[0].Outcomes.Sent) {
					t.Errorf("db's proxy %+v: the service's calls to db did not all go through it (%d requests)", px, r.Clients[0].Outcomes.Sent)
				}
			}},
		{name: "drop", trigger: "{kind: outage, target: s, at: 1s, duration: 1s, mode: drop}",
			check: func(t *testing.T, r Result, arrivedIn func(from, to float64) int) {
				before, during, later := windowOf(r.Result.Clients[0], 0.3, 1), windowOf(r.Result.Clients[0], 1.1, 2), windowOf(r.Result.Clients[0], 2.4, 3)
				o := r.Clients[0].Outcomes
				t.Logf("before: %s; during: %s; after: %s; %s; proxy %+v", before, during, later, o, r.Paths[0].Proxy)
				if during.goodput > 0.05*during.demand || during.failed < 0.9*during.demand {
					t.Errorf("during the drop: %s; want (nearly) every request that arrived to fail", during)
				}
				if before.goodput < 0.9*before.demand || later.goodput < 0.9*later.demand {
					t.Errorf("before: %s; after: %s; want ≥ 90%% goodput outside the drop", before, later)
				}
				if connErrors(o.Errors) == 0 || r.Paths[0].Proxy == nil || r.Paths[0].Proxy.Refused == 0 {
					t.Errorf("outcomes %s, proxy %+v: want new connections reset by the proxy, seen by the clients as connection failures", o, r.Paths[0].Proxy)
				}
				if n := arrivedIn(1.1, 2); n > 0 {
					t.Errorf("%d requests reached the service during the drop", n)
				}
			}},
		{name: "load", trigger: "{kind: load, at: 1s, duration: 1s, factor: 3}",
			check: func(t *testing.T, r Result, arrivedIn func(from, to float64) int) {
				before, during, later := windowOf(r.Result.Clients[0], 0, 1), windowOf(r.Result.Clients[0], 1, 2), windowOf(r.Result.Clients[0], 2, 3)
				got := arrivedIn(1, 2)
				t.Logf("before: %s; during: %s; after: %s; %d requests reached the service in [1 s, 2 s)", before, during, later, got)
				for _, x := range []struct {
					name      string
					got, want float64
				}{{"demand before", before.demand, 50}, {"demand during", during.demand, 150}, {"demand after", later.demand, 50},
					{"arrived at the service during", float64(got), 150}} {
					if x.got < 0.85*x.want || x.got > 1.15*x.want {
						t.Errorf("%s: %.0f, want %.0f ± 15%%", x.name, x.got, x.want)
					}
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := fmt.Sprintf(faultRun, srv.URL+"/", c.services, c.trigger)
			p := rehearseFile(t, text, t.TempDir(), Limits{})[0]
			r := rehearseConclusive(t, p, func() {
				mu.Lock()
				arrived, useDB = nil, c.viaDB
				mu.Unlock()
			})
			t.Log(summary(r))
			start := time.Unix(0, r.StartUnixNano)
			arrivedIn := func(from, to float64) int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, a := range arrived {
					if s := a.Sub(start).Seconds(); s >= from && s < to {
						n++
					}
				}
				return n
			}
			c.check(t, r, arrivedIn)
		})
	}
}

// offLoopback returns an IPv4 address of this machine that is not on
// loopback, or "" when it has none.
func offLoopback() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// The fault proxy connects onward through the Guard's dialer: a target
// that is not on loopback when the connection is made (a name the plan
// let through that resolves elsewhere by then; here the plan's address
// replaced after the plan was checked) is refused before anything is
// sent, unless --allow-remote named it. The target is a server on this
// machine's own address off loopback, so that a refusal is the Guard's
// and not the network's: allowed, the same path reaches it.
func TestProxyDialsThroughGuard(t *testing.T) {
	defer leakcheck.Check(t)
	ip := offLoopback()
	if ip == "" {
		t.Skip("this machine has no address off loopback to serve on")
	}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	var mu sync.Mutex
	served := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		w.Write([]byte("ok\n"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	for _, c := range []struct {
		name       string
		allow      []string
		wantServed int
		wantFailed uint64
	}{
		{"not allowed", nil, 0, 1},
		{"allowed", []string{ip}, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			served = 0
			mu.Unlock()
			g, err := NewGuard(10, c.allow)
			if err != nil {
				t.Fatal(err)
			}
			e := EndpointPlan{Name: "s", Kind: "http", Addr: ln.Addr().String(), Path: "/",
				Faults: []lab.Window{{Kind: "latency", At: 0, Duration: time.Minute, Add: time.Millisecond}}}
			pa, err := openPath(e, g, 1)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			var running sync.WaitGroup
			running.Go(func() { pa.run(ctx, time.Now(), e) })
			defer func() { cancel(); running.Wait(); pa.close() }()
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
			began := time.Now()
			resp, err := client.Get("http://" + pa.entry + "/")
			took := time.Since(began)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			st := pa.stats("s").Proxy
			mu.Lock()
			gotServed := served
			mu.Unlock()
			t.Logf("through the proxy to %s: %v in %v; proxy %+v", ln.Addr(), err, took.Round(time.Millisecond), st)
			if gotServed != c.wantServed || st.DialFailed != c.wantFailed || (err == nil) != (c.wantServed == 1) {
				t.Errorf("served %d, the proxy's dials failed %d, the client's error %v; want served %d, failed %d", gotServed, st.DialFailed, err, c.wantServed, c.wantFailed)
			}
			if took > time.Second {
				t.Errorf("took %v: a refusal is at once, before the connection is made", took)
			}
		})
	}
}
