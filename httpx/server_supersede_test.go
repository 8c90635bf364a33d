package httpx_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/wire"
)

// transfer is the handler of the supersession tests: a "blocker" (no key)
// holds its slot until hold opens; a transfer counts its run, waits for
// slow (if set), and answers 201 with a header and a body of size bytes
// that name the run.
type transfer struct {
	hold, slow *gate
	runs       atomic.Int32
	size       int
}

func (tr *transfer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Name") == "blocker" {
		<-tr.hold.ch
		return
	}
	n := tr.runs.Add(1)
	if tr.slow != nil {
		<-tr.slow.ch
	}
	body := fmt.Sprintf("transfer done by run %d\n", n)
	if tr.size > len(body) {
		body += strings.Repeat("x", tr.size-len(body))
	}
	w.Header().Set("X-Run", fmt.Sprint(n))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, body)
}

func keyHdr(k string) map[string]string { return map[string]string{httpx.HeaderIdempotencyKey: k} }

// Taps of one transfer while the server is full: each newer one takes the
// older's place in the queue, and the older is answered 409 superseded; the
// queue holds one of them at a time, and the transfer runs once.
func TestServerSupersedeQueued(t *testing.T) {
	leakcheck.Check(t)
	tr := &transfer{hold: newGate()}
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(1), Supersede: &admit.SupersedeConfig{}}}, tr.ServeHTTP)
	c := plainClient(t, 8)
	defer tr.hold.open()
	wait := blockSlots(t, gs, c, 1)
	const taps = 4
	var pending []<-chan answer
	for i := range taps {
		pending = append(pending, inBackground(c, context.Background(), gs.URL, keyHdr(`"tap-key"`)))
		waitUntil(t, fmt.Sprintf("tap %d queued", i+1), func() bool {
			st := gs.sg.Stats()
			return st.Queued == 1 && st.Superseded == uint64(i)
		})
	}
	for i, p := range pending[:taps-1] {
		a := <-p
		if a.err != nil || a.status != http.StatusConflict || a.header.Get(httpx.HeaderSuperseded) != "replaced" || !strings.HasPrefix(a.body, "superseded") {
			t.Errorf("tap %d: %d %v %q, %v; want 409, superseded: replaced", i+1, a.status, a.header, a.body, a.err)
		}
	}
	tr.hold.open()
	wait()
	if a := <-pending[taps-1]; a.err != nil || a.status != http.StatusCreated || a.body != "transfer done by run 1\n" {
		t.Errorf("the last tap: %d %q, %v; want 201 from run 1", a.status, a.body, a.err)
	}
	if n := tr.runs.Load(); n != 1 {
		t.Errorf("the transfer ran %d times; want 1", n)
	}
	st := gs.sg.Stats()
	if st.Superseded != taps-1 || st.Goodput != 2 {
		t.Errorf("superseded %d, goodput %d; want %d, 2", st.Superseded, st.Goodput, taps-1)
	}
	checkBooks(t, st)
}

// Taps of a transfer already running wait for it and get its response,
// replayed (status, headers, body); it runs once.
func TestServerSupersedeJoin(t *testing.T) {
	leakcheck.Check(t)
	tr := &transfer{hold: newGate(), slow: newGate()}
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}}, tr.ServeHTTP)
	c := plainClient(t, 8)
	defer tr.slow.open()
	first := inBackground(c, context.Background(), gs.URL, keyHdr("k1"))
	waitUntil(t, "the first tap running", func() bool { return tr.runs.Load() == 1 })
	const joiners = 3
	var pending []<-chan answer
	for range joiners {
		pending = append(pending, inBackground(c, context.Background(), gs.URL, keyHdr("k1")))
	}
	waitUntil(t, "the taps joining", func() bool { return gs.sg.Stats().Joining == joiners })
	tr.slow.open()
	a := <-first
	if a.err != nil || a.status != http.StatusCreated || a.header.Get("X-Run") != "1" || a.header.Get(httpx.HeaderSuperseded) != "" {
		t.Fatalf("first tap: %d %v %q, %v; want 201 from run 1, unmarked", a.status, a.header, a.body, a.err)
	}
	for i, p := range pending {
		j := <-p
		if j.err != nil || j.status != a.status || j.body != a.body || j.header.Get("X-Run") != "1" ||
			j.header.Get("Content-Type") != a.header.Get("Content-Type") || j.header.Get(httpx.HeaderSuperseded) != "joined" {
			t.Errorf("joiner %d: %d %v %q, %v; want the first's response, marked joined", i, j.status, j.header, j.body, j.err)
		}
	}
	if n := tr.runs.Load(); n != 1 {
		t.Errorf("the transfer ran %d times; want 1", n)
	}
	st := gs.sg.Stats()
	if st.Joined != joiners || st.Goodput != 1 {
		t.Errorf("joined %d, goodput %d; want %d, 1", st.Joined, st.Goodput, joiners)
	}
	checkBooks(t, st)
}

// A response larger than MaxReplayBytes is not kept: the waiter goes
// through the gate again and runs itself, and gets a whole response.
func TestServerSupersedeTooLargeToReplay(t *testing.T) {
	leakcheck.Check(t)
	tr := &transfer{hold: newGate(), slow: newGate(), size: 4096}
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{MaxReplayBytes: 1024}}}, tr.ServeHTTP)
	c := plainClient(t, 8)
	defer tr.slow.open()
	first := inBackground(c, context.Background(), gs.URL, keyHdr("big"))
	waitUntil(t, "the first running", func() bool { return tr.runs.Load() == 1 })
	second := inBackground(c, context.Background(), gs.URL, keyHdr("big"))
	waitUntil(t, "the second joining", func() bool { return gs.sg.Stats().Joining == 1 })
	tr.slow.open()
	for i, p := range []<-chan answer{first, second} {
		a := <-p
		want := fmt.Sprintf("transfer done by run %d\n", i+1)
		if a.err != nil || a.status != http.StatusCreated || len(a.body) != 4096 || !strings.HasPrefix(a.body, want) || a.header.Get(httpx.HeaderSuperseded) != "" {
			t.Errorf("request %d: %d, %d bytes %q…, %v; want 201, 4096 bytes from run %d", i+1, a.status, len(a.body), a.body[:min(len(a.body), 30)], a.err, i+1)
		}
	}
	st := gs.sg.Stats()
	if st.Joined != 0 || st.Goodput != 2 {
		t.Errorf("joined %d, goodput %d; want 0, 2", st.Joined, st.Goodput)
	}
	checkBooks(t, st)
}

// Past MaxWaiters, a request with a busy key is refused with 429 and
// Retry-After (shed, key-busy), not held.
func TestServerSupersedeKeyBusy(t *testing.T) {
	leakcheck.Check(t)
	tr := &transfer{hold: newGate(), slow: newGate()}
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{MaxWaiters: 1}}}, tr.ServeHTTP)
	c := plainClient(t, 8)
	defer tr.slow.open()
	first := inBackground(c, context.Background(), gs.URL, keyHdr("k"))
	waitUntil(t, "the first running", func() bool { return tr.runs.Load() == 1 })
	joiner := inBackground(c, context.Background(), gs.URL, keyHdr("k"))
	waitUntil(t, "a joiner", func() bool { return gs.sg.Stats().Joining == 1 })
	a := call(c, context.Background(), gs.URL, keyHdr("k"))
	if a.err != nil || a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, "Idempotency-Key") {
		t.Errorf("one too many: %d %v %q, %v; want 429 with Retry-After", a.status, a.header, a.body, a.err)
	}
	tr.slow.open()
	<-first
	if j := <-joiner; j.status != http.StatusCreated {
		t.Errorf("joiner: %d; want 201", j.status)
	}
	st := gs.sg.Stats()
	if st.Shed[httpx.ShedKeyBusy] != 1 || st.Joined != 1 {
		t.Errorf("key-busy %d, joined %d; want 1, 1", st.Shed[httpx.ShedKeyBusy], st.Joined)
	}
	checkBooks(t, st)
}

// Requests are collapsed only with supersession on, with one well-formed
// key, and within the key's scope: method, host and path, and the caller
// IdempotencyScope tells.
func TestServerSupersedeScope(t *testing.T) {
	user := func(r *http.Request) string { return r.Header.Get("X-User") }
	tests := []struct {
		name       string
		sup        *admit.SupersedeConfig
		scope      func(*http.Request) string
		path       string            // of the second request
		a, b       map[string]string // headers
		wantJoined bool
	}{
		{"same key", &admit.SupersedeConfig{}, nil, "/", keyHdr("k"), keyHdr("k"), true},
		{"off by default", nil, nil, "/", keyHdr("k"), keyHdr("k"), false},
		{"another path", &admit.SupersedeConfig{}, nil, "/other", keyHdr("k"), keyHdr("k"), false},
		{"another key", &admit.SupersedeConfig{}, nil, "/", keyHdr("k"), keyHdr("k2"), false},
		{"a malformed key is no key", &admit.SupersedeConfig{}, nil, "/", keyHdr(strings.Repeat("k", 256)), keyHdr(strings.Repeat("k", 256)), false},
		{"same user", &admit.SupersedeConfig{}, user, "/",
			map[string]string{"Idempotency-Key": "k", "X-User": "ann"}, map[string]string{"Idempotency-Key": "k", "X-User": "ann"}, true},
		{"another user", &admit.SupersedeConfig{}, user, "/",
			map[string]string{"Idempotency-Key": "k", "X-User": "ann"}, map[string]string{"Idempotency-Key": "k", "X-User": "bob"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			tr := &transfer{hold: newGate(), slow: newGate()}
			gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: tt.sup}, IdempotencyScope: tt.scope}, tr.ServeHTTP)
			c := plainClient(t, 4)
			defer tr.slow.open()
			first := inBackground(c, context.Background(), gs.URL, tt.a)
			waitUntil(t, "the first running", func() bool { return tr.runs.Load() == 1 })
			second := inBackground(c, context.Background(), gs.URL+tt.path, tt.b)
			waitUntil(t, "the second joining or running", func() bool {
				return gs.sg.Stats().Joining == 1 || tr.runs.Load() == 2
			})
			tr.slow.open()
			<-first
			b := <-second
			if joined := b.header.Get(httpx.HeaderSuperseded) == "joined"; joined != tt.wantJoined || b.status != http.StatusCreated {
				t.Errorf("second: %d, joined %v; want 201, joined %v", b.status, joined, tt.wantJoined)
			}
			checkBooks(t, gs.sg.Stats())
		})
	}
}

// Whatever way a handler writes its response, a waiter gets the same bytes
// replayed; a response that declares trailers is not replayed (the waiter
// runs itself).
func TestServerSupersedeReplayWriters(t *testing.T) {
	tests := []struct {
		name     string
		write    func(w http.ResponseWriter)
		wantRuns int32
	}{
		{"Write", func(w http.ResponseWriter) { w.Write([]byte("body")) }, 1},
		{"WriteString", func(w http.ResponseWriter) { io.WriteString(w, "body") }, 1},
		{"ReadFrom", func(w http.ResponseWriter) { io.Copy(w, strings.NewReader("body")) }, 1},
		{"Flush, then Write", func(w http.ResponseWriter) {
			w.Header().Set("X-Early", "1")
			w.(http.Flusher).Flush()
			w.Header().Set("X-Late", "not sent")
			w.Write([]byte("body"))
		}, 1},
		{"nothing", func(http.ResponseWriter) {}, 1},
		{"an error status", func(w http.ResponseWriter) { http.Error(w, "body", http.StatusInternalServerError) }, 1},
		{"trailers", func(w http.ResponseWriter) {
			w.Header().Set("Trailer", "X-Sum")
			w.Write([]byte("body"))
			w.Header().Set("X-Sum", "1")
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			var runs atomic.Int32
			slow := newGate()
			defer slow.open()
			gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(4), Supersede: &admit.SupersedeConfig{}}}, func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					<-slow.ch
				}
				tt.write(w)
			})
			c := plainClient(t, 4)
			first := inBackground(c, context.Background(), gs.URL, keyHdr("k"))
			waitUntil(t, "the first running", func() bool { return runs.Load() == 1 })
			second := inBackground(c, context.Background(), gs.URL, keyHdr("k"))
			waitUntil(t, "the second joining", func() bool { return gs.sg.Stats().Joining == 1 })
			slow.open()
			a, b := <-first, <-second
			if a.err != nil || b.err != nil || a.status != b.status || a.body != b.body {
				t.Errorf("first %d %q, %v; second %d %q, %v; want the same response", a.status, a.body, a.err, b.status, b.body, b.err)
			}
			for _, h := range []string{"Content-Type", "X-Early", "X-Late"} {
				if a.header.Get(h) != b.header.Get(h) {
					t.Errorf("%s: first %q, second %q", h, a.header.Get(h), b.header.Get(h))
				}
			}
			if n := runs.Load(); n != tt.wantRuns {
				t.Errorf("the handler ran %d times; want %d", n, tt.wantRuns)
			}
			checkBooks(t, gs.sg.Stats())
		})
	}
}

// A twin's response is replayed only when the twin completed for a client
// that was still waiting; otherwise the request that joined it runs itself
// (issue 25): an empty 200 (a handler that returns when its context ends),
// a 499 written when the client left, a 408 written when the twin's own
// short deadline passed are not for a caller who waits.
func TestServerSupersedeNoReplayForCallerGone(t *testing.T) {
	tests := []struct {
		name string
		// short: the first request's deadline (Stormguard-Timeout); else
		// its client leaves.
		short  time.Duration
		answer func(w http.ResponseWriter, ctx context.Context) // the first run, once its context ended
	}{
		{"an empty 200 after its client left", 0, func(http.ResponseWriter, context.Context) {}},
		{"a 499 after its client left", 0, func(w http.ResponseWriter, _ context.Context) { w.WriteHeader(499) }},
		{"a 408 after its deadline", 50 * time.Millisecond, func(w http.ResponseWriter, ctx context.Context) {
			if ctx.Err() == context.DeadlineExceeded {
				w.WriteHeader(http.StatusRequestTimeout)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			var runs atomic.Int32
			gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(4), Supersede: &admit.SupersedeConfig{}}}, func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				if n == 1 {
					<-r.Context().Done()
					tt.answer(w, r.Context())
					return
				}
				w.Header().Set("X-Run", fmt.Sprint(n))
				w.WriteHeader(http.StatusCreated)
			})
			c := plainClient(t, 4)
			ctx, leave := context.WithCancel(context.Background())
			defer leave()
			hdr := keyHdr("k")
			if tt.short > 0 {
				v, _ := wire.FormatTimeout(tt.short)
				hdr[wire.HeaderTimeout] = v
			}
			first := inBackground(c, ctx, gs.URL, hdr)
			waitUntil(t, "the first running", func() bool { return runs.Load() == 1 })
			second := inBackground(c, context.Background(), gs.URL, keyHdr("k"))
			waitUntil(t, "the second joining", func() bool { return gs.sg.Stats().Joining == 1 })
			if tt.short == 0 {
				leave()
			}
			b := <-second
			if b.err != nil || b.status != http.StatusCreated || b.header.Get("X-Run") != "2" || b.header.Get(httpx.HeaderSuperseded) != "" {
				t.Errorf("the request that joined: %d %v, %v; want 201 from its own run (2), not a replay", b.status, b.header, b.err)
			}
			leave()
			<-first
			if st := gs.sg.Stats(); st.Joined != 0 {
				t.Errorf("joined %d; want 0", st.Joined)
			}
			checkBooks(t, gs.sg.Stats())
		})
	}
}

// The default scope tells requests apart by their query string and their
// caller's credentials: a key reused with another query string, another
// Authorization or another Cookie is not joined to the first (issue 25:
// another caller received the first caller's body and Set-Cookie).
func TestServerSupersedeDefaultScope(t *testing.T) {
	k := func(more map[string]string) map[string]string {
		h := keyHdr("k")
		for n, v := range more {
			h[n] = v
		}
		return h
	}
	tests := []struct {
		name       string
		query      string // of the second request
		a, b       map[string]string
		wantJoined bool
	}{
		{"the same request", "?to=ann", k(map[string]string{"Authorization": "Bearer ann", "Cookie": "s=1"}), k(map[string]string{"Authorization": "Bearer ann", "Cookie": "s=1"}), true},
		{"another query string", "?to=bob", k(nil), k(nil), false},
		{"another Authorization", "?to=ann", k(map[string]string{"Authorization": "Bearer ann"}), k(map[string]string{"Authorization": "Bearer bob"}), false},
		{"an Authorization and none", "?to=ann", k(map[string]string{"Authorization": "Bearer ann"}), k(nil), false},
		{"another Cookie", "?to=ann", k(map[string]string{"Cookie": "session=ann"}), k(map[string]string{"Cookie": "session=bob"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			tr := &transfer{hold: newGate(), slow: newGate()}
			gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}}, func(w http.ResponseWriter, r *http.Request) {
				http.SetCookie(w, &http.Cookie{Name: "for", Value: r.URL.Query().Get("to") + "-" + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
				tr.ServeHTTP(w, r)
			})
			c := plainClient(t, 4)
			defer tr.slow.open()
			first := inBackground(c, context.Background(), gs.URL+"/pay?to=ann", tt.a)
			waitUntil(t, "the first running", func() bool { return tr.runs.Load() == 1 })
			second := inBackground(c, context.Background(), gs.URL+"/pay"+tt.query, tt.b)
			waitUntil(t, "the second joining or running", func() bool {
				return gs.sg.Stats().Joining == 1 || tr.runs.Load() == 2
			})
			tr.slow.open()
			a, b := <-first, <-second
			joined := b.header.Get(httpx.HeaderSuperseded) == "joined"
			if joined != tt.wantJoined || b.status != http.StatusCreated {
				t.Errorf("second: %d, joined %v; want 201, joined %v", b.status, joined, tt.wantJoined)
			}
			if !tt.wantJoined && b.header.Get("Set-Cookie") == a.header.Get("Set-Cookie") && b.header.Get("X-Run") == a.header.Get("X-Run") {
				t.Errorf("second got the first's response: %v", b.header)
			}
			checkBooks(t, gs.sg.Stats())
		})
	}
}

// Over TLS, the default scope tells callers apart by their client
// certificate: the same key from another certificate is not joined to the
// first; from the same certificate it is.
func TestServerSupersedeClientCertificate(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same certificate %v", same), func(t *testing.T) {
			leakcheck.Check(t)
			tr := &transfer{hold: newGate(), slow: newGate()}
			sg, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{Limit: fixed(8), Supersede: &admit.SupersedeConfig{}}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(sg.Wrap(tr))
			srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
			srv.StartTLS()
			t.Cleanup(srv.Close)
			client := func(cert tls.Certificate) *http.Client {
				base := srv.Client().Transport.(*http.Transport).Clone()
				base.TLSClientConfig.Certificates = []tls.Certificate{cert}
				t.Cleanup(base.CloseIdleConnections)
				return &http.Client{Transport: base}
			}
			ann := selfSigned(t, "ann")
			ca, cb := client(ann), client(ann)
			if !same {
				cb = client(selfSigned(t, "bob"))
			}
			defer tr.slow.open()
			first := inBackground(ca, context.Background(), srv.URL, keyHdr("k"))
			waitUntil(t, "the first running", func() bool { return tr.runs.Load() == 1 })
			second := inBackground(cb, context.Background(), srv.URL, keyHdr("k"))
			waitUntil(t, "the second joining or running", func() bool {
				return sg.Stats().Joining == 1 || tr.runs.Load() == 2
			})
			tr.slow.open()
			a, b := <-first, <-second
			if a.err != nil || b.err != nil || b.status != http.StatusCreated {
				t.Fatalf("first %d, %v; second %d, %v", a.status, a.err, b.status, b.err)
			}
			if joined := b.header.Get(httpx.HeaderSuperseded) == "joined"; joined != same {
				t.Errorf("second joined %v; want %v", joined, same)
			}
			checkBooks(t, sg.Stats())
		})
	}
}

// selfSigned returns a client certificate for name, signed by its own key.
func selfSigned(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
