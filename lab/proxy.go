package lab

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy that injects network faults between a client and
// its target:
//
//   - hold: connections are accepted and kept, but no byte goes through in
//     either direction until the hold ends; then everything held is
//     delivered, in order, as a network that buffered it would (a
//     connection its client closed meanwhile delivers its bytes, then
//     closes);
//   - cut: new connections are accepted and reset at once (the client
//     sees its connection refused or reset); open connections go silent
//     (what either side sends is dropped, so their callers time out, as in
//     the simulator's drop mode) and are reset when the cut ends;
//   - latency: bytes towards the target are delayed by the given time.
//
// A connection is closed as a whole when either side closes it or fails.
// Build one with NewProxy, run it with Serve. A Proxy is safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	dialer net.Dialer

	mu       sync.Mutex
	holding  bool
	draining bool         // the held bytes are being delivered
	held     []*heldWrite // writes waiting for the hold to end, in the order they were read
	cut      bool
	latency  time.Duration
	conns    map[*proxyConn]struct{}
	closed   bool

	wg    sync.WaitGroup
	stats proxyCounters
}

// ProxyStats counts what a Proxy did.
type ProxyStats struct {
	// Accepted counts connections accepted and forwarded; Refused those
	// reset at once during a cut; Reset open connections a cut silenced
	// and reset.
	Accepted uint64 `json:"accepted"`
	Refused  uint64 `json:"refused"`
	Reset    uint64 `json:"reset"`
	// DialFailed counts connections closed because the target refused.
	DialFailed uint64 `json:"dial_failed"`
	// MaxOpen is the most connections open at once.
	MaxOpen int64 `json:"max_open"`
	// Held counts the writes a hold delayed; DrainS is the longest time,
	// in seconds, the proxy took to deliver what a hold had held.
	Held   uint64  `json:"held"`
	DrainS float64 `json:"drain_s"`
}

type proxyCounters struct {
	accepted, refused, reset, dialFailed, held atomic.Uint64
	open, maxOpen, drainNS                     atomic.Int64
}

// heldWrite is a write waiting for a hold to end: the proxy closes its
// turn channel when the write may go, and the writer closes done once it
// has written (or given up).
type heldWrite struct {
	turn, done chan struct{}
}

// proxyConn is one proxied connection: its two sides.
type proxyConn struct {
	client, target net.Conn
	once           sync.Once
	done           chan struct{}
	// silenced: a cut started while the connection was open; it drops
	// what it reads until the cut ends and it is reset.
	silenced atomic.Bool
}

// close closes both sides, resetting them when reset is set.
func (c *proxyConn) close(reset bool) {
	c.once.Do(func() {
		if reset {
			setLinger0(c.client)
			setLinger0(c.target)
		}
		c.client.Close()
		c.target.Close()
		close(c.done)
	})
}

func setLinger0(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

// NewProxy returns a Proxy that accepts on ln and forwards to target.
func NewProxy(ln net.Listener, target string) *Proxy {
	return &Proxy{ln: ln, target: target, dialer: net.Dialer{Timeout: 5 * time.Second}, conns: map[*proxyConn]struct{}{}}
}

// SetDialer makes the proxy connect to its target with d instead of a
// plain dialer with a 5 s timeout: a dialer whose Control refuses some
// addresses, say (stormguard rehearse's, which allows only loopback and
// the hosts the user named). Call it before Serve.
func (p *Proxy) SetDialer(d *net.Dialer) { p.dialer = *d }

// Addr returns the address the proxy accepts on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Serve accepts connections until Close is called or ctx is done; then it
// closes every connection and returns once they are all gone.
func (p *Proxy) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.Close()
			p.wg.Wait()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(ctx, c)
		}()
	}
}

// Close stops accepting and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.takeConns()
	p.holding = false
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close(true)
	}
	return err
}

// takeConns empties the connection set and returns what it held. p.mu
// must be held.
func (p *Proxy) takeConns() []*proxyConn {
	cs := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	clear(p.conns)
	return cs
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Accepted: p.stats.accepted.Load(), Refused: p.stats.refused.Load(), Reset: p.stats.reset.Load(),
		DialFailed: p.stats.dialFailed.Load(), MaxOpen: p.stats.maxOpen.Load(), Held: p.stats.held.Load(),
		DrainS: time.Duration(p.stats.drainNS.Load()).Seconds()}
}

// SetHold starts (true) or ends (false) a hold. When a hold ends, the
// bytes it held are written one chunk at a time, in the order they were
// read, whichever connection they belong to (as a network delivers what it
// buffered); bytes read meanwhile queue behind them.
func (p *Proxy) SetHold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && !p.holding && !p.closed:
		p.holding = true
	case !on && p.holding:
		p.holding = false
		if !p.draining {
			p.draining = true
			go p.drain()
		}
	}
}

// Delivery of held bytes: at most drainWindow writes go at once, in
// order (a write starts only when the one drainWindow places before it has
// finished), and a write that takes longer than drainStep no longer holds
// the others back.
const (
	drainWindow = 32
	drainStep   = 100 * time.Millisecond
)

// drain delivers the held writes in order until none is left or a new
// hold starts.
func (p *Proxy) drain() {
	began := time.Now()
	var window []*heldWrite
	wait := func(w *heldWrite) {
		t := time.NewTimer(drainStep)
		select {
		case <-w.done:
		case <-t.C:
		}
		t.Stop()
	}
	defer func() {
		for _, w := range window {
			wait(w)
		}
		d := int64(time.Since(began))
		for m := p.stats.drainNS.Load(); d > m && !p.stats.drainNS.CompareAndSwap(m, d); m = p.stats.drainNS.Load() {
		}
	}()
	for {
		p.mu.Lock()
		if p.holding || len(p.held) == 0 {
			p.draining = false
			p.mu.Unlock()
			return
		}
		w := p.held[0]
		p.held[0] = nil
		p.held = p.held[1:]
		p.mu.Unlock()
		if len(window) == drainWindow {
			wait(window[0])
			window = window[1:]
		}
		close(w.turn)
		window = append(window, w)
	}
}

// SetCut starts (true) or ends (false) a cut. The connections open when
// a cut starts drop every byte until it ends; then they are reset.
func (p *Proxy) SetCut(on bool) {
	p.mu.Lock()
	was := p.cut
	p.cut = on
	var conns []*proxyConn
	switch {
	case on && !was:
		for c := range p.conns {
			c.silenced.Store(true)
		}
	case !on && was:
		for c := range p.conns {
			if c.silenced.Load() {
				conns = append(conns, c)
				delete(p.conns, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range conns {
		p.stats.reset.Add(1)
		c.close(true)
	}
}

// SetLatency sets the delay added to bytes towards the target.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// handle forwards one accepted connection.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	p.mu.Lock()
	cut := p.cut || p.closed
	p.mu.Unlock()
	if cut {
		p.stats.refused.Add(1)
		setLinger0(c)
		c.Close()
		return
	}
	t, err := p.dialer.DialContext(ctx, "tcp", p.target)
	if err != nil {
		p.stats.dialFailed.Add(1)
		setLinger0(c)
		c.Close()
		return
	}
	pc := &proxyConn{client: c, target: t, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		p.stats.refused.Add(1)
		pc.close(true)
		return
	}
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	p.stats.accepted.Add(1)
	n := p.stats.open.Add(1)
	for m := p.stats.maxOpen.Load(); n > m && !p.stats.maxOpen.CompareAndSwap(m, n); m = p.stats.maxOpen.Load() {
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(pc, t, c, true) })
	p.pipe(pc, c, t, false)
	wg.Wait()
	p.stats.open.Add(-1)
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// pipe copies src to dst through the faults until either side ends, then
// closes the connection. forward is the direction towards the target.
func (p *Proxy) pipe(pc *proxyConn, dst, src net.Conn, forward bool) {
	defer pc.close(false)
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.forward(pc, dst, buf[:n], forward, time.Now()) {
			return
		}
		if err != nil {
			return
		}
	}
}

// forward writes b, read at readAt, to dst: after the latency towards the
// target, or, during a hold, in its turn once the hold is over; a
// connection silenced by a cut drops it. It returns false when the
// connection is to end: a failed write, or the connection closed
// meanwhile.
func (p *Proxy) forward(pc *proxyConn, dst net.Conn, b []byte, toTarget bool, readAt time.Time) bool {
	if pc.silenced.Load() {
		return true
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return false
	case p.holding || p.draining:
		w := &heldWrite{turn: make(chan struct{}), done: make(chan struct{})}
		p.held = append(p.held, w)
		p.mu.Unlock()
		p.stats.held.Add(1)
		defer close(w.done)
		select {
		case <-w.turn:
		case <-pc.done:
			return false
		}
		if pc.silenced.Load() {
			return true
		}
		_, err := dst.Write(b)
		return err == nil
	}
	lat := p.latency
	p.mu.Unlock()
	if toTarget && lat > 0 {
		if d := time.Until(readAt.Add(lat)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-pc.done:
				t.Stop()
				return false
			}
		}
	}
	_, err := dst.Write(b)
	return err == nil
}

// faultState is what the proxy does at one instant of a run.
type faultState struct {
	hold, cut bool
	latency   time.Duration
}

// stateAt is the proxy's state at offset t of the run, from its windows.
func stateAt(faults []Window, t time.Duration) faultState {
	var s faultState
	for _, w := range faults {
		if !w.active(t) {
			continue
		}
		switch w.Kind {
		case "outage":
			if w.Mode == "drop" {
				s.cut = true
			} else {
				s.hold = true
			}
		case "latency":
			s.latency += w.Add
		}
	}
	return s
}

// apply puts the proxy in state s.
func (p *Proxy) apply(s faultState) {
	p.SetLatency(s.latency)
	p.SetCut(s.cut)
	p.SetHold(s.hold)
}

// RunFaults applies the fault windows, relative to start, until they are
// all over or ctx is done.
func (p *Proxy) RunFaults(ctx context.Context, start time.Time, faults []Window) {
	var edges []time.Duration
	for _, w := range faults {
		edges = append(edges, w.At, w.At+w.Duration)
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	p.apply(stateAt(faults, time.Since(start)))
	for _, e := range edges {
		d := time.Until(start.Add(e))
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		p.apply(stateAt(faults, e))
	}
}
