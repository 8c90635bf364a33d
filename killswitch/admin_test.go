package killswitch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
)

const testToken = "s3cret-token-of-24-bytes"

// adminServer serves the admin handler of d on a real loopback server.
func adminServer(t *testing.T, d *killswitch.Dials, opts ...killswitch.AdminOption) (*httptest.Server, *http.Client) {
	t.Helper()
	quiet := killswitch.AdminLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	h, err := killswitch.NewAdmin(d, testToken, append([]killswitch.AdminOption{quiet}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return srv, &http.Client{Transport: tr}
}

// do sends method with body and the Authorization header auth (none if
// empty), and returns the status and the body.
func do(t *testing.T, c *http.Client, url, method, auth, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestNewAdminEmptyToken(t *testing.T) {
	if _, err := killswitch.NewAdmin(new(killswitch.Dials), ""); !errors.Is(err, killswitch.ErrEmptyToken) {
		t.Errorf("NewAdmin with an empty token: err = %v; want ErrEmptyToken", err)
	}
	if _, err := killswitch.NewAdmin(nil, "x"); err == nil {
		t.Error("NewAdmin with nil dials: no error")
	}
}

func TestAdminAuth(t *testing.T) {
	leakcheck.Check(t)
	d := new(killswitch.Dials)
	srv, c := adminServer(t, d, killswitch.AuthFailureLimit(100, time.Hour)) // every failure here is deliberate
	tests := []struct {
		name   string
		method string
		auth   string
		want   int
	}{
		{"no token GET", http.MethodGet, "", http.StatusUnauthorized},
		{"no token POST", http.MethodPost, "", http.StatusUnauthorized},
		{"wrong token", http.MethodPost, "Bearer wrong", http.StatusUnauthorized},
		{"token prefix", http.MethodPost, "Bearer " + testToken[:5], http.StatusUnauthorized},
		{"token longer", http.MethodPost, "Bearer " + testToken + "x", http.StatusUnauthorized},
		{"no scheme", http.MethodPost, testToken, http.StatusUnauthorized},
		{"basic scheme", http.MethodPost, "Basic " + testToken, http.StatusUnauthorized},
		{"good token", http.MethodPost, "Bearer " + testToken, http.StatusOK},
		// RFC 9110 section 11.1: the scheme is case-insensitive.
		{"lower-case scheme", http.MethodPost, "bearer " + testToken, http.StatusOK},
		{"upper-case scheme", http.MethodPost, "BEARER " + testToken, http.StatusOK},
		{"mixed-case scheme", http.MethodPost, "bEaReR " + testToken, http.StatusOK},
		{"two spaces", http.MethodPost, "Bearer  " + testToken, http.StatusOK},
		{"token's case matters", http.MethodPost, "Bearer " + strings.ToUpper(testToken), http.StatusUnauthorized},
		{"tab for space", http.MethodPost, "Bearer\t" + testToken, http.StatusUnauthorized},
		{"no space", http.MethodPost, "Bearer" + testToken, http.StatusUnauthorized},
		{"scheme only", http.MethodPost, "Bearer", http.StatusUnauthorized},
		{"trailing junk", http.MethodPost, "Bearer " + testToken + " x", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.SetRetriesDisabled(false)
			got, body := do(t, c, srv.URL, tt.method, tt.auth, `{"retries_off": true}`)
			if got != tt.want {
				t.Errorf("status %d (%q); want %d", got, body, tt.want)
			}
			if changed := d.RetriesDisabled(); changed != (tt.want == http.StatusOK) {
				t.Errorf("retries off = %v after status %d", changed, got)
			}
		})
	}
}

func TestAdminChanges(t *testing.T) {
	leakcheck.Check(t)
	d := new(killswitch.Dials)
	srv, c := adminServer(t, d)
	auth := "Bearer " + testToken
	tests := []struct {
		name     string
		method   string
		body     string
		want     int
		wantMsg  string // in the body of a 400
		wantDial killswitch.State
	}{
		{"shed half", http.MethodPost, `{"shed_fraction": 0.5}`, 200, "", killswitch.State{ShedFraction: 0.5}},
		{"all three", http.MethodPut, `{"retries_off": true, "shed_fraction": 1, "limit_override": 8}`, 200, "",
			killswitch.State{RetriesOff: true, ShedFraction: 1, LimitOverride: 8}},
		{"only the present fields", http.MethodPost, `{"limit_override": 0}`, 200, "",
			killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"fraction too big", http.MethodPost, `{"shed_fraction": 1.5, "retries_off": false}`, 400, "shed_fraction must be in [0, 1]",
			killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"fraction negative", http.MethodPost, `{"shed_fraction": -0.1}`, 400, "shed_fraction", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"negative limit", http.MethodPost, `{"limit_override": -3}`, 400, "limit_override must be", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"fractional limit", http.MethodPost, `{"limit_override": 2.5}`, 400, "not a whole number", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"huge limit", http.MethodPost, `{"limit_override": 99999999999999999999}`, 400, "not a whole number", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"unknown field", http.MethodPost, `{"shed_fraction": 0, "retry_off": false}`, 400, `unknown field "retry_off"`, killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"wrong type", http.MethodPost, `{"retries_off": "no"}`, 400, "not a boolean", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		// Strict keys: encoding/json alone would take each of these.
		{"duplicate key", http.MethodPost, `{"shed_fraction": 0.1, "shed_fraction": 0.2}`, 400, `"shed_fraction" given twice`, killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"duplicate key, other fields", http.MethodPost, `{"retries_off": false, "limit_override": 3, "retries_off": false}`, 400, "given twice", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"upper-case key", http.MethodPost, `{"SHED_FRACTION": 0.25}`, 400, `unknown field "SHED_FRACTION" (field names are lower case: shed_fraction)`, killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"mixed-case key", http.MethodPost, `{"Retries_Off": false}`, 400, "field names are lower case", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"null", http.MethodPost, `{"shed_fraction": null}`, 400, "is null", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"not an object", http.MethodPost, `[{"shed_fraction": 0}]`, 400, "want a JSON object", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"a nested object", http.MethodPost, `{"shed_fraction": {"x": 1}}`, 400, "not a number", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"not JSON", http.MethodPost, `shed=1`, 400, "invalid JSON", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"trailing data", http.MethodPost, `{"shed_fraction": 0} {}`, 400, "data after the object", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"empty object", http.MethodPost, `{}`, 400, "no field to change", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"empty body", http.MethodPost, ``, 400, "empty body", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"too large", http.MethodPost, `{"shed_fraction": 0` + strings.Repeat(" ", 5000) + `}`, 400, "larger than", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"delete not allowed", http.MethodDelete, ``, 405, "", killswitch.State{RetriesOff: true, ShedFraction: 1}},
		{"reset", http.MethodPost, `{"retries_off": false, "shed_fraction": 0, "limit_override": 0}`, 200, "", killswitch.State{}},
	}
	for _, tt := range tests { // in order: each row starts from the previous one's state
		got, body := do(t, c, srv.URL, tt.method, auth, tt.body)
		if got != tt.want {
			t.Errorf("%s: status %d (%q); want %d", tt.name, got, body, tt.want)
		}
		if tt.wantMsg != "" && !strings.Contains(body, tt.wantMsg) {
			t.Errorf("%s: body %q; want it to contain %q", tt.name, body, tt.wantMsg)
		}
		if s := d.Snapshot(); s != tt.wantDial {
			t.Errorf("%s: dials %+v; want %+v", tt.name, s, tt.wantDial)
		}
		if got == 200 {
			var st killswitch.State
			if err := json.Unmarshal([]byte(body), &st); err != nil || st != tt.wantDial {
				t.Errorf("%s: answered %q (%v); want the state %+v", tt.name, body, err, tt.wantDial)
			}
		}
	}
	// GET shows the state without changing it.
	d.SetShedFraction(0.25)
	got, body := do(t, c, srv.URL, http.MethodGet, auth, "")
	var st killswitch.State
	if err := json.Unmarshal([]byte(body), &st); got != 200 || err != nil || st != (killswitch.State{ShedFraction: 0.25}) {
		t.Errorf("GET: %d %q (%v); want 200 and shed_fraction 0.25", got, body, err)
	}
}

func TestListenAdmin(t *testing.T) {
	leakcheck.Check(t)
	allow := []killswitch.ListenOption{killswitch.AllowNonLoopback()}
	tests := []struct {
		addr    string
		opts    []killswitch.ListenOption
		wantErr error // nil: want a listener
		wantAll bool  // on every interface (else loopback)
	}{
		{"127.0.0.1:0", nil, nil, false},
		{":0", nil, nil, false}, // no host: loopback, not every interface
		{"localhost:0", nil, nil, false},
		{"0.0.0.0:0", nil, killswitch.ErrNotLoopback, false},
		{"[::]:0", nil, killswitch.ErrNotLoopback, false},
		{"192.0.2.1:0", nil, killswitch.ErrNotLoopback, false},
		{"example.com:0", nil, killswitch.ErrNotLoopback, false},
		{"0.0.0.0:0", allow, nil, true},
		// No host means 127.0.0.1 with AllowNonLoopback too: every
		// interface must be asked for by name (issue 15, point 8).
		{":0", allow, nil, false},
		{"127.0.0.1:0", allow, nil, false},
	}
	for _, tt := range tests {
		var logged bytes.Buffer
		opts := append(tt.opts, killswitch.ListenLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		ln, err := killswitch.ListenAdmin(tt.addr, opts...)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("ListenAdmin(%q): err = %v; want %v", tt.addr, err, tt.wantErr)
			}
			if ln != nil {
				ln.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("ListenAdmin(%q): %v", tt.addr, err)
			continue
		}
		ta := ln.Addr().(*net.TCPAddr)
		if ta.IP.IsLoopback() == tt.wantAll {
			t.Errorf("ListenAdmin(%q) listens on %v; want every interface %v", tt.addr, ta, tt.wantAll)
		}
		// A non-loopback listener is announced with a warning, a loopback
		// one is not.
		warned := strings.Contains(logged.String(), "level=WARN") && strings.Contains(logged.String(), "non-loopback")
		if warned != tt.wantAll {
			t.Errorf("ListenAdmin(%q): logged %q; want a warning %v", tt.addr, logged.String(), tt.wantAll)
		}
		ln.Close()
	}
	if _, err := killswitch.ListenAdmin("no-port"); err == nil {
		t.Error(`ListenAdmin("no-port"): no error`)
	}
}

// The admin endpoint served on a listener from ListenAdmin.
func TestListenAdminServes(t *testing.T) {
	leakcheck.Check(t)
	d := new(killswitch.Dials)
	h, err := killswitch.NewAdmin(d, testToken)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := killswitch.ListenAdmin("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	got, body := do(t, &http.Client{Transport: tr}, "http://"+ln.Addr().String(), http.MethodPost, "Bearer "+testToken, `{"limit_override": 3}`)
	if o, ok := d.LimitOverride(); got != 200 || !ok || o != 3 {
		t.Errorf("POST: %d %q, override %d %v; want 200 and 3", got, body, o, ok)
	}
}

// Failed attempts are rate-limited per client, through a real server: past
// the burst a wrong token gets 429 with Retry-After, and a warning is
// logged; a right token is served all along, before and after, since only
// failures are charged; the dials never change for a refused request.
func TestAdminAuthRateLimit(t *testing.T) {
	leakcheck.Check(t)
	d := new(killswitch.Dials)
	var logged syncBuffer
	srv, c := adminServer(t, d, killswitch.AuthFailureLimit(3, time.Hour),
		killswitch.AdminLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	good, bad := "Bearer "+testToken, "Bearer guess"
	// Right tokens cost nothing: any number of them.
	for i := range 10 {
		if got, body := do(t, c, srv.URL, http.MethodGet, good, ""); got != 200 {
			t.Fatalf("good request %d: %d %q; want 200", i, got, body)
		}
	}
	for i := range 3 {
		if got, _ := do(t, c, srv.URL, http.MethodPost, bad, `{"retries_off": true}`); got != 401 {
			t.Fatalf("failure %d of the burst of 3: %d; want 401", i+1, got)
		}
	}
	for _, auth := range []string{bad, ""} {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"retries_off": true}`))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "3600" {
			t.Errorf("past the burst, auth %q: %d, Retry-After %q; want 429, 3600", auth, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if d.RetriesDisabled() {
		t.Error("a refused request turned retries off")
	}
	// The operator, from the same address, is served.
	if got, body := do(t, c, srv.URL, http.MethodPost, good, `{"shed_fraction": 0.5}`); got != 200 || d.ShedFraction() != 0.5 {
		t.Errorf("the right token past the burst: %d %q, shed %v; want 200 and 0.5", got, body, d.ShedFraction())
	}
	if n := strings.Count(logged.String(), "level=WARN"); n != 1 || !strings.Contains(logged.String(), "too many requests") {
		t.Errorf("logged %q; want one warning about too many requests", logged.String())
	}
}

// Issue 25: a local client without the token sent one request every
// 100 ms and locked the operator out (1 success, 39 × 429 in 20 s). Here a
// client on the same loopback address hammers the endpoint with wrong
// tokens as fast as one connection allows while the operator reads and
// turns the dials every 20 ms: every one of the operator's requests is
// served, and the hammering client is refused (401, then 429).
func TestAdminOperatorServedWhileHammered(t *testing.T) {
	leakcheck.Check(t)
	d := new(killswitch.Dials)
	srv, c := adminServer(t, d, killswitch.AuthFailureLimit(10, 6*time.Second),
		killswitch.AdminLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		codes = map[int]int{}
	)
	wg.Add(1)
	go func() { // the hammering client: its own connections, the same address
		defer wg.Done()
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		deadline := time.Now().Add(10 * time.Second) // bounded, whatever happens
		for n := 0; n < 5000 && time.Now().Before(deadline); n++ {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"retries_off": true}`))
			req.Header.Set("Authorization", "Bearer guess-"+strconv.Itoa(n))
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
		}
	}()
	served := 0
	for i := range 40 {
		frac := float64(i%4) / 4
		got, body := do(t, c, srv.URL, http.MethodPost, "Bearer "+testToken, fmt.Sprintf(`{"shed_fraction": %v}`, frac))
		if got != 200 {
			t.Errorf("operator request %d: %d %q; want 200", i, got, body)
			continue
		}
		served++
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("operator: %d of 40 served; the other client: %v", served, codes)
	if codes[401] != 10 || codes[429] == 0 || len(codes) != 2 {
		t.Errorf("the other client got %v; want 10 × 401 (the burst), then 429 only", codes)
	}
	if d.RetriesDisabled() {
		t.Error("the other client turned retries off")
	}
	if ch := d.LastChange(); ch.Origin != killswitch.OriginLocal || !strings.HasPrefix(ch.By, "admin 127.0.0.1:") {
		t.Errorf("last change %+v; want a local change by the admin endpoint's client", ch)
	}
}

// More than one Authorization header is refused, even if one is right.
func TestAdminAuthTwoHeaders(t *testing.T) {
	h, err := killswitch.NewAdmin(new(killswitch.Dials), testToken)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Add("Authorization", "Bearer "+testToken)
	req.Header.Add("Authorization", "Bearer "+testToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("two Authorization headers: %d; want 401", w.Code)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
