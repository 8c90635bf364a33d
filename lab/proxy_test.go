package lab

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
)

// recorder is a TCP server that records the lines it receives, in the
// order they arrive over all connections, and echoes each back.
type recorder struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	got   chan string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, got: make(chan string, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					r.mu.Lock()
					r.lines = append(r.lines, strings.TrimSpace(line))
					r.mu.Unlock()
					r.got <- strings.TrimSpace(line)
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return r
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	ln, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(ln, target)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return p
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func send(t *testing.T, c net.Conn, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func expectNothing(t *testing.T, r *recorder, d time.Duration) {
	t.Helper()
	select {
	case l := <-r.got:
		t.Fatalf("%q went through", l)
	case <-time.After(d):
	}
}

func expect(t *testing.T, r *recorder, want string) {
	t.Helper()
	select {
	case l := <-r.got:
		if l != want {
			t.Fatalf("got %q, want %q", l, want)
		}
	case <-time.After(hostspeed.Scale(2 * time.Second)):
		t.Fatalf("%q did not arrive", want)
	}
}

func TestProxyForwards(t *testing.T) {
	r := newRecorder(t)
	p := startProxy(t, r.ln.Addr().String())
	c, br := dial(t, p.Addr().String())
	send(t, c, "hello")
	expect(t, r, "hello")
	if l, err := br.ReadString('\n'); err != nil || l != "hello\n" {
		t.Fatalf("echo = %q, %v", l, err)
	}
	if st := p.Stats(); st.Accepted != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// TestProxyHold: during a hold nothing goes through, in either direction;
// when it ends, everything held goes (in the order it was sent on each
// connection; across connections the proxy writes in order too, but the
// receiving goroutines may read in any order), and a connection its
// client closed meanwhile delivers its bytes and then closes.
func TestProxyHold(t *testing.T) {
	r := newRecorder(t)
	p := startProxy(t, r.ln.Addr().String())
	a, abr := dial(t, p.Addr().String())
	send(t, a, "warm")
	expect(t, r, "warm")
	abr.ReadString('\n')

	p.SetHold(true)
	send(t, a, "a1")
	b, bbr := dial(t, p.Addr().String()) // a new connection during the hold
	time.Sleep(hostspeed.Scale(20 * time.Millisecond))
	send(t, b, "b1")
	time.Sleep(hostspeed.Scale(20 * time.Millisecond))
	send(t, a, "a2")
	c, _ := dial(t, p.Addr().String())
	time.Sleep(hostspeed.Scale(20 * time.Millisecond))
	send(t, c, "c1")
	time.Sleep(hostspeed.Scale(20 * time.Millisecond))
	c.Close() // its client leaves during the hold
	expectNothing(t, r, 200*time.Millisecond)

	p.SetHold(false)
	seen := map[string]int{}
	for i := range 4 {
		select {
		case l := <-r.got:
			seen[l] = i
		case <-time.After(hostspeed.Scale(2 * time.Second)):
			t.Fatalf("after the hold only %v arrived", seen)
		}
	}
	for _, want := range []string{"a1", "b1", "a2", "c1"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("%s did not arrive (got %v)", want, seen)
		}
	}
	if seen["a1"] > seen["a2"] {
		t.Errorf("a2 arrived before a1 on one connection: %v", seen)
	}
	for _, br := range []*bufio.Reader{abr, bbr} {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("echo after the hold: %v", err)
		}
	}
	// One chunk per connection waits in the proxy; the rest waits in the
	// kernel's buffers.
	if st := p.Stats(); st.Held < 3 {
		t.Errorf("held %d writes, want at least 3", st.Held)
	}
}

// TestProxyCut: during a cut, new connections are reset and open ones go
// silent; when it ends, the silenced ones are reset and new ones work.
func TestProxyCut(t *testing.T) {
	r := newRecorder(t)
	p := startProxy(t, r.ln.Addr().String())
	a, abr := dial(t, p.Addr().String())
	send(t, a, "before")
	expect(t, r, "before")
	abr.ReadString('\n')

	p.SetCut(true)
	send(t, a, "silenced")
	expectNothing(t, r, 100*time.Millisecond)
	a.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := abr.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection during the cut: %v, want silence", err)
	}
	a.SetReadDeadline(time.Time{})
	// The kernel accepts, the proxy resets: connect itself may see the
	// reset, or the first read does.
	if b, err := net.Dial("tcp", p.Addr().String()); err == nil {
		io.WriteString(b, "during\n")
		if _, err := bufio.NewReader(b).ReadString('\n'); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Fatalf("a new connection during the cut: %v, want reset", err)
		}
		b.Close()
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dial during the cut: %v, want reset", err)
	}
	expectNothing(t, r, 100*time.Millisecond)

	p.SetCut(false)
	if _, err := abr.ReadString('\n'); err == nil {
		t.Fatal("a connection silenced by the cut survived it")
	}
	c, cbr := dial(t, p.Addr().String())
	send(t, c, "after")
	expect(t, r, "after")
	cbr.ReadString('\n')
	if st := p.Stats(); st.Reset != 1 || st.Refused != 1 {
		t.Errorf("stats = %+v, want 1 reset and 1 refused", st)
	}
}

// TestProxyLatency: bytes towards the target are delayed, replies not.
func TestProxyLatency(t *testing.T) {
	r := newRecorder(t)
	p := startProxy(t, r.ln.Addr().String())
	a, abr := dial(t, p.Addr().String())
	send(t, a, "warm")
	expect(t, r, "warm")
	abr.ReadString('\n')
	p.SetLatency(150 * time.Millisecond)
	begin := time.Now()
	send(t, a, "slow")
	abr.ReadString('\n')
	if rtt := time.Since(begin); rtt < 150*time.Millisecond || rtt > hostspeed.Scale(time.Second) {
		t.Errorf("round trip %v with 150ms of latency", rtt)
	}
	p.SetLatency(0)
	begin = time.Now()
	send(t, a, "fast")
	abr.ReadString('\n')
	if rtt := time.Since(begin); rtt > hostspeed.Scale(100*time.Millisecond) {
		t.Errorf("round trip %v without latency", rtt)
	}
}

func TestStateAt(t *testing.T) {
	faults := []Window{
		{Kind: "outage", Mode: "hold", At: time.Second, Duration: time.Second},
		{Kind: "outage", Mode: "drop", At: 3 * time.Second, Duration: time.Second},
		{Kind: "latency", Add: 50 * time.Millisecond, At: 0, Duration: 5 * time.Second},
	}
	tests := []struct {
		t    time.Duration
		want faultState
	}{
		{0, faultState{latency: 50 * time.Millisecond}},
		{time.Second, faultState{hold: true, latency: 50 * time.Millisecond}},
		{2 * time.Second, faultState{latency: 50 * time.Millisecond}},
		{3500 * time.Millisecond, faultState{cut: true, latency: 50 * time.Millisecond}},
		{5 * time.Second, faultState{}},
	}
	for _, tt := range tests {
		if got := stateAt(faults, tt.t); got != tt.want {
			t.Errorf("stateAt(%v) = %+v, want %+v", tt.t, got, tt.want)
		}
	}
}
