// Package redistest starts a real redis-server for tests, on 127.0.0.1 and
// a free port, and stops it when the test ends.
//
//	srv := redistest.Start(t)
//	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
//
// The server runs without persistence (--save ” --appendonly no), so a
// [Server.Restart] comes back empty, as a crashed cache does. When
// redis-server is not on PATH, Start skips the test with a message that says
// so, unless the environment variable CI is "true": then it fails it, so that
// CI cannot pass by skipping (.ci/run installs the Debian package).
//
// For failover tests, [StartReplica] starts a replica of a server and
// [Server.Promote] makes it a primary (REPLICAOF NO ONE); a [Proxy] keeps the
// clients on one address while the test moves them from one server to
// another or cuts them off; [Server.Do] sends a test's own administrative
// commands (FLUSHALL, REPLICAOF …). [StartCluster] starts a Redis Cluster
// (redis-server --cluster-enabled yes, redis-cli --cluster create),
// [StartSentinel] a master, a replica and three sentinels, [StartTLS] a
// server that also listens for TLS with certificates [NewCerts] generates.
//
// The helpers are safe for concurrent use; each Server and Proxy is stopped
// by the cleanup of the test that started it.
package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long Start and Restart wait for the server to
// answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process that a test owns.
type Server struct {
	tb    testing.TB
	bin   string
	port  int
	dir   string
	extra []string // more redis-server arguments
	conf  string   // a sentinel's configuration file ("" for a server)

	tlsPort int // with StartTLS
	busPort int // a cluster node's bus

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	paused bool
	stderr *bytes.Buffer
}

// Binary returns the path of redis-server, or "" and the reason it is
// missing.
func Binary() (string, error) { return binary(exec.LookPath) }

func binary(look func(string) (string, error)) (string, error) {
	p, err := look("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server is not installed (apt-get install redis-server): %w", err)
	}
	return p, nil
}

// requireBinary finds redis-server, or skips the test (fails it when ci).
func requireBinary(tb testing.TB, ci bool, look func(string) (string, error)) (string, bool) {
	tb.Helper()
	bin, err := binary(look)
	if err == nil {
		return bin, true
	}
	if ci {
		tb.Fatalf("redistest: %v (CI=true: the tests against Redis must run, not skip)", err)
	} else {
		tb.Skipf("redistest: %v; skipping a test that needs a real Redis (set CI=true to fail instead)", err)
	}
	return "", false
}

// Start starts a redis-server on 127.0.0.1 and a free port, waits until it
// answers PING, and registers a cleanup that kills it. Without redis-server
// it skips the test, or fails it when CI=true. args are passed on to
// redis-server, e.g. "--requirepass", "secret" (PING then answers an
// error, which also counts as up).
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin, ok := requireBinary(tb, os.Getenv("CI") == "true", exec.LookPath)
	if !ok {
		return nil // not reached: the test was skipped or failed
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), extra: args}
	s.launch()
	return s
}

// launch starts s on a free port and registers the cleanup that kills it.
func (s *Server) launch() {
	s.tb.Helper()
	s.tb.Cleanup(s.stop)
	// Another process may take the port between the probe and the start:
	// try a few ports.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			s.tb.Fatalf("redistest: %v", err)
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			return
		}
	}
	s.tb.Fatalf("redistest: %v", lastErr)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start launches the process and waits for PING. s.mu must not be held.
func (s *Server) start() error {
	var args []string
	if s.conf != "" {
		args = []string{s.conf, "--sentinel",
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
			"--daemonize", "no", "--loglevel", "warning"}
	} else {
		args = append([]string{
			"--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", s.dir,
			"--daemonize", "no",
			"--loglevel", "warning",
			// A replica's first sync starts at once, not after the default 5s
			// wait for more replicas.
			"--repl-diskless-sync-delay", "0",
		}, s.extra...)
	}
	cmd := exec.Command(s.bin, args...)
	dieWithParent(cmd)
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.stderr, s.paused = cmd, exited, &stderr, false
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, strings.TrimSpace(stderr.String()))
		default:
		}
		if err := ping(s.Addr()); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d did not answer PING within %v: %v", s.port, startTimeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ping sends PING over a fresh connection and expects +PONG, or the error
// of a server that wants a password.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if l := strings.TrimSpace(line); l != "+PONG" && !strings.HasPrefix(l, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// running reports whether the server's process runs.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Kill stops the server at once (SIGKILL), as a crash would, and waits for
// the process to end. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts the server again on the same port after [Server.Kill]
// (killing it first if it runs). It comes back empty. It fails the test if
// the server does not come back.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	var err error
	// The old socket may linger for a moment.
	for range 20 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// Pause freezes the server (SIGSTOP): connections still open, but nothing
// answers, as with a Redis stuck or a network that drops packets. The data
// is kept. [Server.Resume] thaws it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume thaws a server that [Server.Pause] froze.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.paused = paused
	return nil
}

// stop is the test cleanup: thaw and kill the server.
func (s *Server) stop() {
	s.mu.Lock()
	cmd, paused := s.cmd, s.paused
	s.mu.Unlock()
	if cmd != nil && paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	s.Kill()
}
