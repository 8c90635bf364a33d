package httpx_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// reply is one scripted answer of a test server.
type reply struct {
	status int
	header map[string]string
	body   string
	hijack bool                                                                  // close the connection without answering
	hang   bool                                                                  // block until the client goes away or the test ends
	fn     func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) // answers instead
}

// seen is what a test server saw of one request.
type seen struct {
	attempt string // Stormguard-Attempt
	timeout string // Stormguard-Timeout
	body    string
	at      time.Time
}

// server is a real HTTP server on 127.0.0.1 that answers with a script: the
// n-th request gets the n-th reply, and the last reply repeats.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests []seen
	canceled atomic.Int32 // hanging handlers whose request context ended
	release  chan struct{}
}

func newServer(t *testing.T, replies ...reply) *server {
	t.Helper()
	s := &server{replies: replies, release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.release) }) // runs first: frees hanging handlers
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, seen{
		attempt: r.Header.Get(wire.HeaderAttempt),
		timeout: r.Header.Get(wire.HeaderTimeout),
		body:    string(body),
		at:      time.Now(),
	})
	rp := s.replies[min(len(s.requests), len(s.replies))-1]
	s.mu.Unlock()
	switch {
	case rp.fn != nil:
		rp.fn(w, r, s.release)
		return
	case rp.hijack:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case rp.hang:
		select {
		case <-r.Context().Done():
			s.canceled.Add(1)
		case <-s.release:
		}
		return
	}
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rp.status)
	io.WriteString(w, rp.body)
}

// seen returns a copy of what the server saw so far.
func (s *server) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.requests...)
}

// attempts returns the Stormguard-Attempt values the server saw.
func (s *server) attempts() []string {
	var a []string
	for _, r := range s.seen() {
		a = append(a, r.attempt)
	}
	return a
}

// counting is a base transport on its own http.Transport that counts round
// trips, dials and what happens to every response body.
type counting struct {
	tr     *http.Transport
	trips  atomic.Int32
	dials  atomic.Int32
	mu     sync.Mutex
	bodies []*trackedBody
}

func newCounting(t *testing.T) *counting {
	t.Helper()
	c := &counting{tr: http.DefaultTransport.(*http.Transport).Clone()}
	dial := c.tr.DialContext
	c.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		return dial(ctx, network, addr)
	}
	t.Cleanup(c.tr.CloseIdleConnections)
	return c
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.trips.Add(1)
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &trackedBody{rc: resp.Body}
	resp.Body = b
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	return resp, nil
}

func (c *counting) CloseIdleConnections() { c.tr.CloseIdleConnections() }

// closed and drained count the response bodies closed, and those read to
// the end before being closed.
func (c *counting) closed() (closed, drained int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bodies {
		if b.closed.Load() {
			closed++
			if b.eof.Load() {
				drained++
			}
		}
	}
	return closed, drained
}

type trackedBody struct {
	rc     io.ReadCloser
	eof    atomic.Bool
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return b.rc.Close()
}

// trackedReader is a request body that records being closed.
type trackedReader struct {
	io.Reader
	closed atomic.Bool
}

func (r *trackedReader) Close() error { r.closed.Store(true); return nil }

// fast is the test policy: 3 attempts, 1 ms between them (30 ms after
// throttling), server hints clamped to at most 100 ms more than that.
func fast() retry.Policy {
	return retry.Policy{
		MaxAttempts:     3,
		Backoff:         backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond},
		ThrottleBackoff: &backoff.Policy{Kind: backoff.Constant, Base: 30 * time.Millisecond},
		Pushback:        retry.Pushback{MaxExtra: 100 * time.Millisecond},
	}
}

// record collects what a retrier's hooks report; hooks run on the goroutine
// that called RoundTrip, so read it after RoundTrip returns.
type record struct {
	classes []retry.Class
	delays  []time.Duration
	giveUps []error
}

func (rec *record) hooks() retry.Option {
	return retry.WithHooks(retry.Hooks{
		OnAttempt: func(_ int, c retry.Class, _ time.Duration) { rec.classes = append(rec.classes, c) },
		OnRetry:   func(_ int, d time.Duration) { rec.delays = append(rec.delays, d) },
		OnGiveUp:  func(reason error, _ int, _ error) { rec.giveUps = append(rec.giveUps, reason) },
	})
}

// setup starts a test: leak check, a counting base transport and a
// Transport over it with policy p.
func setup(t *testing.T, p retry.Policy, opts ...retry.Option) (*httpx.Transport, *counting, *record) {
	t.Helper()
	leakcheck.Check(t)
	base := newCounting(t)
	rec := new(record)
	// The test's own options come last: its hooks replace the record's.
	tr := httpx.NewTransport(base, retry.MustNew(p, append([]retry.Option{rec.hooks()}, opts...)...))
	t.Cleanup(tr.CloseIdleConnections)
	return tr, base, rec
}

// wantAttempts returns the Stormguard-Attempt values of n attempts: "" (a
// first try carries none), "2", … "n".
func wantAttempts(n int) []string {
	a := make([]string, n)
	for i := 1; i < n; i++ {
		a[i] = strconv.Itoa(i + 1)
	}
	return a
}

// lastResponse turns a give-up on a failure response back into that
// response (the Transport's give-up error carries it), for tests that look at
// the server's answer; other results pass through.
func lastResponse(resp *http.Response, err error) (*http.Response, error) {
	var se *httpx.StatusError
	if err != nil && errors.As(err, &se) && se.Response != nil {
		return se.Response, nil
	}
	return resp, err
}

// readClose reads and closes a response body.
func readClose(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// eventually polls cond for up to two seconds (scaled by the host's
// slowness).
func eventually(cond func() bool) bool {
	for end := time.Now().Add(hostspeed.Scale(2 * time.Second)); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func get(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
