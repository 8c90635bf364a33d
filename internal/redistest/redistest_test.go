package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeTB records what requireBinary says instead of stopping the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                       {}
func (f *fakeTB) Skipf(format string, a ...any) { f.skipped = format }
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.failed = format
}

func TestMissingBinary(t *testing.T) {
	missing := func(string) (string, error) { return "", errors.New("not found") }
	var skip fakeTB
	if _, ok := requireBinary(&skip, false, missing); ok || skip.skipped == "" || skip.failed != "" {
		t.Errorf("without CI: ok %t, skipped %q, failed %q", ok, skip.skipped, skip.failed)
	}
	var fail fakeTB
	if _, ok := requireBinary(&fail, true, missing); ok || fail.failed == "" || fail.skipped != "" {
		t.Errorf("with CI=true: ok %t, skipped %q, failed %q", ok, fail.skipped, fail.failed)
	}
	if !strings.Contains(fail.failed, "CI=true") {
		t.Errorf("the failure does not say why: %q", fail.failed)
	}
}

func TestStartKillRestartPause(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("address %s", s.Addr())
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr()); err == nil {
		t.Error("a paused server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	s.Kill()
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("a killed server accepts connections")
	}
	if err := s.Pause(); err == nil {
		t.Error("Pause of a killed server succeeded")
	}
	s.Kill() // twice is fine
	s.Restart()
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
}

func TestStartWithPassword(t *testing.T) {
	s := Start(t, "--requirepass", "secret")
	if err := ping(s.Addr()); err != nil {
		t.Fatal(err)
	}
}

func TestDoAndReplica(t *testing.T) {
	p := Start(t, "--requirepass", "pw")
	if got := p.MustDo("SET", "k", "v1"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	r := StartReplica(t, p)
	waitValue := func(s *Server, want string) {
		t.Helper()
		for range 1000 {
			if got, _ := s.Do("GET", "k"); got == want {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("GET k on %s never gave %q", s.Addr(), want)
	}
	waitValue(r, "v1")
	if _, err := r.Do("SET", "k", "x"); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Errorf("SET on a replica: %v, want READONLY", err)
	}
	r.Promote()
	p.MustDo("SET", "k", "v2") // no longer replicated
	if got := r.MustDo("GET", "k"); got != "v1" {
		t.Errorf("promoted replica holds %q, want the value it had, v1", got)
	}
	if got := r.MustDo("SET", "k", "v3"); got != "OK" {
		t.Errorf("SET on the promoted replica: %q", got)
	}
	if got, err := r.Do("GET", "nothing"); err != nil || got != "" {
		t.Errorf("GET of a missing key: %q %v", got, err)
	}
	if got := r.MustDo("RPUSH", "l", "a", "b"); got != "2" {
		t.Errorf("RPUSH: %q", got)
	}
	if got := r.MustDo("LRANGE", "l", "0", "-1"); got != "a\nb" {
		t.Errorf("LRANGE: %q", got)
	}
}

func TestProxy(t *testing.T) {
	a, b := Start(t), Start(t)
	a.MustDo("SET", "who", "a")
	b.MustDo("SET", "who", "b")
	p := StartProxy(t, a.Addr())
	via := &Server{tb: t, port: portOf(t, p.Addr())}
	if got := via.MustDo("GET", "who"); got != "a" {
		t.Fatalf("through the proxy: %q, want a", got)
	}
	// A connection held open across SetTarget is closed.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, bufio.NewReader(c), "PING"); err != nil {
		t.Fatal(err)
	}
	p.SetTarget(b.Addr())
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := roundTrip(c, bufio.NewReader(c), "PING"); err == nil {
		t.Error("a connection survived SetTarget")
	}
	if got := via.MustDo("GET", "who"); got != "b" {
		t.Errorf("after SetTarget: %q, want b", got)
	}
	p.Block()
	if _, err := via.Do("GET", "who"); err == nil {
		t.Error("a blocked proxy forwarded a command")
	}
	p.Unblock()
	if got := via.MustDo("GET", "who"); got != "b" {
		t.Errorf("after Unblock: %q, want b", got)
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestClusterNodes(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("%d nodes", len(c.Addrs()))
	}
	m := c.MasterOf("{k}x")
	if got := m.MustDo("SET", "{k}x", "1"); got != "OK" {
		t.Fatalf("SET on the slot's master: %q", got)
	}
	for _, n := range c.Nodes {
		if n != m {
			if _, err := n.Do("GET", "{k}x"); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
				t.Errorf("another master answered %v, want MOVED", err)
			}
		}
	}
	r := c.AddReplica(m)
	if role := r.MustDo("ROLE"); !strings.HasPrefix(role, "slave") {
		t.Errorf("the replica's role: %q", role)
	}
}

func TestSentinelFailover(t *testing.T) {
	set := StartSentinel(t)
	if a, err := set.MasterAddr(); err != nil || a != set.Master.Addr() {
		t.Fatalf("master %s %v, want %s", a, err, set.Master.Addr())
	}
	set.Master.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if a, _ := set.MasterAddr(); a == set.Replica.Addr() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sentinels did not promote the replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartTLS(t *testing.T) {
	certs := NewCerts(t)
	s := StartTLS(t, certs, true)
	c, err := tls.Dial("tcp", s.TLSAddr(), certs.ClientTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, bufio.NewReader(c), "PING"); err != nil || got != "PONG" {
		t.Errorf("PING over TLS: %q %v", got, err)
	}
	// Without a client certificate the server refuses.
	cfg := certs.ClientTLS(t)
	cfg.Certificates = nil
	if c2, err := tls.Dial("tcp", s.TLSAddr(), cfg); err == nil {
		_, err = roundTrip(c2, bufio.NewReader(c2), "PING")
		c2.Close()
		if err == nil {
			t.Error("a client without a certificate was served")
		}
	}
}
