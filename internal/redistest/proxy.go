package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections from its own address on 127.0.0.1 to a
// target address. Clients that dial the proxy stay on one address while the
// test moves them to another server (a failover behind a fixed address, as a
// virtual IP or a DNS name gives) or cuts them off, while another client
// reaches the servers directly.
//
// A Proxy is safe for concurrent use; it is closed by the cleanup of the test
// that started it.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	target  string
	blocked bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// StartProxy listens on 127.0.0.1 and a free port and forwards every
// connection to target.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget closes every forwarded connection and sends the new ones to
// addr.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
	p.dropAll()
}

// Block closes every forwarded connection and closes each new one at once,
// until [Proxy.Unblock]: the clients behind the proxy are cut off.
func (p *Proxy) Block() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
	p.dropAll()
}

// Unblock forwards new connections again.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

func (p *Proxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		target, blocked := p.target, p.blocked
		p.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c, target)
	}
}

// forward copies between the client c and a new connection to target until
// either side closes.
func (p *Proxy) forward(c net.Conn, target string) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, s) {
		return
	}
	var once sync.Once
	done := func() {
		once.Do(func() {
			c.Close()
			s.Close()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, s)
			p.mu.Unlock()
		})
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(s, c)
		done()
	}()
	_, _ = io.Copy(c, s)
	done()
}

// track records both ends, unless the proxy was blocked or closed
// meanwhile (then it closes them and reports false).
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked || p.conns == nil {
		c.Close()
		s.Close()
		return false
	}
	p.conns[c] = struct{}{}
	p.conns[s] = struct{}{}
	return true
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
