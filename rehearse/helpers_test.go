package rehearse

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// ci reports whether the tests run under CI (.ci/run sets CI=true): a
// missing tool then fails a test instead of skipping it.
var ci = os.Getenv("CI") == "true"

// long reports whether the long measurements run (STORMGUARD_REHEARSE_LONG=1).
var long = os.Getenv("STORMGUARD_REHEARSE_LONG") == "1"

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago (for a server that must be told its port: nginx).
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// slowServer is the slow upstream of the nginx tests: workers handlers at
// once, each for serviceTime, the others waiting; like a database, it
// serves everything it took, whether its caller still waits or not. It
// counts the requests it received.
type slowServer struct {
	URL      string
	Arrived  atomic.Int64
	srv      *http.Server
	inflight sync.WaitGroup
}

func startSlow(t testing.TB, workers int, serviceTime time.Duration) *slowServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowServer{URL: "http://" + ln.Addr().String()}
	slots := make(chan struct{}, workers)
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Arrived.Add(1)
		slots <- struct{}{}
		time.Sleep(serviceTime)
		<-slots
		w.Write([]byte("ok\n"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// startNginx starts Debian's nginx (a server nobody here wrote) on a free
// port of 127.0.0.1, with a generated configuration in a temporary
// directory, in front of upstream: limit_conn and limit_req answer 503
// past their limits (maxConns at once, rate a second with burst). It is
// stopped when the test ends. Without nginx the test skips, or fails under
// CI (.ci/run installs it).
func startNginx(t testing.TB, upstream string, maxConns, rate, burst int) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			if ci {
				t.Fatal("nginx is not installed (.ci/run installs Debian's nginx)")
			}
			t.Skip("nginx is not installed")
		}
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root root;"
	}
	conf := fmt.Sprintf(`%s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  limit_conn_zone $server_addr zone=conns:1m;
  limit_req_zone $server_addr zone=rate:1m rate=%[5]dr/s;
  limit_conn_status 503;
  limit_req_status 503;
  upstream slow { server %[3]s; keepalive 64; }
  server {
    listen %[4]s;
    location / {
      limit_conn conns %[6]d;
      limit_req zone=rate burst=%[7]d nodelay;
      proxy_pass http://slow;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 60s;
      proxy_ignore_client_abort on;
    }
  }
}
`, user, dir, strings.TrimPrefix(upstream, "http://"), addr, rate, maxConns, burst)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // nginx: fast shutdown
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s %s", out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx is not listening on %s after 10 s: %s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rehearseFile parses a rehearsal scenario file's text and returns its
// runs' plans (the file's directory is dir).
func rehearseFile(t testing.TB, text, dir string, lim Limits) []Plan {
	t.Helper()
	f, err := scenario.ParseRehearsal("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var ps []Plan
	for _, r := range f.Runs {
		p, err := NewPlan(r.Scenario, r.Name, dir, Shard{}, lim)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// rehearseConclusive runs p; a run its host starved is run again (up to
// three tries under CI, two otherwise) and, if still starved, the test
// skips its checks, saying so with the figures (the lab's rule: a
// starved run is inconclusive, not failed). before, if not nil, runs
// before each try (a fresh service).
func rehearseConclusive(t *testing.T, p Plan, before func()) Result {
	t.Helper()
	tries := 2
	if ci {
		tries = 3
	}
	var reasons []string
	for i := range tries {
		if before != nil {
			before()
		}
		r, err := Run(t.Context(), p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkAccounts(t, r)
		if !r.Host.Starved {
			return r
		}
		t.Logf("try %d starved: %s", i+1, summary(r))
		reasons = append(reasons, fmt.Sprintf("try %d: %s", i+1, r.Host.Reason))
		if os.Getenv("STORMGUARD_BUSY_HOST") == "1" {
			break
		}
	}
	t.Skipf("WARNING: %s: inconclusive in every try (the host was starved): %s", p.Name, strings.Join(reasons, "; "))
	return Result{}
}

// checkAccounts checks that every request of every client ended in one
// outcome, that the books agree with the outcomes, and that no attempt
// went past the plan.
func checkAccounts(t *testing.T, r Result) {
	t.Helper()
	for i, c := range r.Clients {
		if err := c.Outcomes.Check(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		tot := r.Result.Clients[i].Total
		if tot.Requests != c.Outcomes.Sent || tot.Succeeded != c.Outcomes.Succeeded {
			t.Errorf("%s: books %d requests, %d ok; outcomes %s", c.Name, tot.Requests, tot.Succeeded, c.Outcomes)
		}
	}
	if r.Sent > r.WorstCase || r.Refused != 0 {
		t.Errorf("sent %d attempts, worst case %d, refused %d", r.Sent, r.WorstCase, r.Refused)
	}
}

// after returns goodput / demand of r from t seconds on.
func after(r result.Result, from float64) float64 {
	var g, d float64
	for _, c := range r.Clients {
		for _, b := range c.Bins {
			if b.T >= from-1e-9 {
				g += b.Goodput
				d += b.Demand
			}
		}
	}
	if d == 0 {
		return 0
	}
	return g / d
}

// summary is a run in one line, for the logs.
func summary(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", r.Result.Name, r.Result.Verdict)
	if r.Result.RecoveryS != nil {
		fmt.Fprintf(&b, " in %.1f s", *r.Result.RecoveryS)
	}
	for _, c := range r.Clients {
		fmt.Fprintf(&b, "; %s %s", c.Name, c.Outcomes)
	}
	fmt.Fprintf(&b, "; %d attempts of %d; %s", r.Sent, r.WorstCase, r.Host.Reason)
	return b.String()
}

var _ = lab.DefaultBin
var _ = context.Background
