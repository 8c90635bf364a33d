package rehearse

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrPlanExhausted is the error of an attempt beyond the plan's worst
// case: Guard refused it and it was not sent. A rehearsal that sees it has
// a bug in its plan; the counter is there so that such a bug cannot send
// more than the plan said.
var ErrPlanExhausted = errors.New("rehearse: the plan's worst case of attempts is spent; attempt not sent")

// Guard holds a rehearsal to its plan: a hard counter of the attempts it
// may still send, and the only addresses it may connect to (loopback, and
// the hosts the caller allowed, resolved when the Guard is made). It is
// safe for concurrent use.
type Guard struct {
	left    atomic.Int64
	sent    atomic.Int64
	refused atomic.Int64
	remote  map[string]bool // allowed IP or IP:PORT beyond loopback
}

// NewGuard returns a Guard that lets limit attempts through and allows
// connections to loopback and to the hosts of allow (HOST or HOST:PORT,
// resolved now).
func NewGuard(limit int64, allow []string) (*Guard, error) {
	g := &Guard{remote: map[string]bool{}}
	g.left.Store(limit)
	for _, a := range allow {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = a, ""
		}
		ips, err := net.LookupHost(host)
		if err != nil {
			return nil, fmt.Errorf("rehearse: --allow-remote %s: %w", a, err)
		}
		for _, ip := range ips {
			if port == "" {
				g.remote[ip] = true
			} else {
				g.remote[net.JoinHostPort(ip, port)] = true
			}
		}
	}
	return g, nil
}

// Take spends one attempt of the plan, and reports false, spending
// nothing, when none is left.
func (g *Guard) Take() bool {
	if g.left.Add(-1) < 0 {
		g.left.Add(1)
		g.refused.Add(1)
		return false
	}
	g.sent.Add(1)
	return true
}

// Sent counts the attempts let through; Refused those refused.
func (g *Guard) Sent() int64    { return g.sent.Load() }
func (g *Guard) Refused() int64 { return g.refused.Load() }

// control refuses a connection to anything but loopback or an allowed
// address: the check that holds whatever a name resolved to.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if g.remote[address] || g.remote[host] {
		return nil
	}
	return fmt.Errorf("rehearse: refusing to connect to %s: not a loopback address, and not allowed by --allow-remote", address)
}

// Dialer returns a dialer whose connections the Guard checks.
func (g *Guard) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, Control: g.control}
}

// transport is the HTTP transport of a rehearsal's clients and tools:
// connections checked by the Guard, many per host (an open-loop
// generator has many requests in flight), no compression.
func (g *Guard) transport() *http.Transport {
	return &http.Transport{
		DialContext:         g.Dialer().DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// attemptKey is the context key of a request's attempt counter.
type attemptKey struct{}

// withAttempts returns ctx carrying n, which counts the request's
// attempts as they are sent.
func withAttempts(ctx context.Context, n *atomic.Int32) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

// countAttempt counts an attempt in ctx's counter, if any.
func countAttempt(ctx context.Context) {
	if n, ok := ctx.Value(attemptKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
}

// capped is the base RoundTripper under httpx.Transport: every attempt
// takes its place in the Guard first, and is counted.
type capped struct {
	g    *Guard
	base http.RoundTripper
}

func (c capped) RoundTrip(req *http.Request) (*http.Response, error) {
	if !c.g.Take() {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, ErrPlanExhausted
	}
	countAttempt(req.Context())
	return c.base.RoundTrip(req)
}

// hostOf returns the host of a URL's HOST:PORT part, for messages.
func hostOf(hostport string) string {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return strings.Trim(h, "[]")
}
