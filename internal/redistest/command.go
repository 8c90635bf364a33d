package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Do sends one command to the server over a fresh connection (after AUTH,
// if the server was started with --requirepass) and returns its reply as
// text: a status or a bulk string as is, an integer in decimal, an array as
// its elements one a line, a nil as "". A Redis error reply is returned as
// an error. It is for a test's own administration (REPLICAOF, FLUSHALL,
// DEBUG …), not for the code under test, which has its own client.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(startTimeout))
	r := bufio.NewReader(c)
	if pw := s.password(); pw != "" {
		if _, err := roundTrip(c, r, "AUTH", pw); err != nil {
			return "", fmt.Errorf("redistest: AUTH: %w", err)
		}
	}
	return roundTrip(c, r, args...)
}

// MustDo is [Server.Do] that fails the test on an error.
func (s *Server) MustDo(args ...string) string {
	s.tb.Helper()
	out, err := s.Do(args...)
	if err != nil {
		s.tb.Fatalf("redistest: %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// password returns the value of --requirepass in the server's arguments.
func (s *Server) password() string {
	for i, a := range s.extra {
		if a == "--requirepass" && i+1 < len(s.extra) {
			return s.extra[i+1]
		}
	}
	return ""
}

func roundTrip(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	return readReply(r, 0)
}

// errReply is a Redis error reply.
type errReply string

func (e errReply) Error() string { return string(e) }

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader, depth int) (string, error) {
	if depth > 8 {
		return "", errors.New("redistest: reply nested too deep")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errReply(body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 1<<24 {
			return "", fmt.Errorf("redistest: bad bulk length %q", body)
		}
		if n == -1 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 1<<20 {
			return "", fmt.Errorf("redistest: bad array length %q", body)
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(r, depth+1)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

// StartReplica starts a redis-server that replicates primary (--replicaof),
// and waits until its link to the primary is up and the first sync is done.
// args are passed on to redis-server, as for [Start].
func StartReplica(tb testing.TB, primary *Server, args ...string) *Server {
	tb.Helper()
	host, port, _ := net.SplitHostPort(primary.Addr())
	if pw := primary.password(); pw != "" {
		args = append([]string{"--masterauth", pw}, args...)
	}
	s := Start(tb, append([]string{"--replicaof", host, port}, args...)...)
	s.WaitReplicating()
	return s
}

// WaitReplicating waits until a replica's link to its primary is up and its
// sync is done, failing the test after a while.
func (s *Server) WaitReplicating() {
	s.tb.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := s.Do("INFO", "replication")
		if err == nil && strings.Contains(info, "master_link_status:up") && !strings.Contains(info, "master_sync_in_progress:1") {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redistest: replica on %s did not sync within %v: %v\n%s", s.Addr(), startTimeout, err, info)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Promote makes a replica a primary (REPLICAOF NO ONE), keeping the data it
// holds, as a failover does.
func (s *Server) Promote() {
	s.tb.Helper()
	s.MustDo("REPLICAOF", "NO", "ONE")
}
