package httpx_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// sleeper is a handler that works for d (or until its caller leaves).
func sleeper(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			w.Write([]byte("ok"))
		case <-r.Context().Done():
		}
	}
}

// wantInstanceSignal checks a refusal of an overloaded instance.
func wantInstanceSignal(t *testing.T, a answer) {
	t.Helper()
	if a.status != 503 || a.header.Get(wire.HeaderOverload) != "instance" || a.header.Get(wire.HeaderRetryAfter) != "1" {
		t.Errorf("refusal %d, overload %q, Retry-After %q (%v); want 503, instance, 1",
			a.status, a.header.Get(wire.HeaderOverload), a.header.Get(wire.HeaderRetryAfter), a.err)
	}
}

// Under 2× overload with half the requests retries, the server spends its
// capacity on first tries: they succeed far more often than retries, and
// every refusal carries 503, Retry-After and the instance signal.
func TestServerOverloadServesFirstTries(t *testing.T) {
	leakcheck.Check(t)
	// Capacity: 4 handlers of 20 ms, 200 requests/s. Offered: a burst of 4
	// first tries and 4 retries every 20 ms, 400 requests/s, for 800 ms.
	// (The handler time is 20 ms rather than 10 so that the test's own CPU
	// use, under the race detector on a small machine, does not turn 2×
	// overload into much more.)
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(4), Queue: shed.Config{Capacity: 16}}}, sleeper(20*time.Millisecond))
	c := plainClient(t, 128)
	const bursts = 40
	type result struct {
		retry bool
		a     answer
	}
	results := make(chan result, bursts*8)
	var wg sync.WaitGroup
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range bursts {
		for j := range 8 {
			attempt := "1"
			if j%2 == 1 {
				attempt = strconv.Itoa(2 + j%4/2) // 2 or 3
			}
			wg.Go(func() {
				results <- result{attempt != "1", call(c, context.Background(), gs.URL, map[string]string{wire.HeaderAttempt: attempt})}
			})
		}
		<-tick.C
	}
	wg.Wait()
	close(results)
	var ok, n [2]int // first tries, retries
	for r := range results {
		k := 0
		if r.retry {
			k = 1
		}
		n[k]++
		if r.a.status == 200 {
			ok[k]++
			continue
		}
		wantInstanceSignal(t, r.a)
	}
	firstRate, retryRate := float64(ok[0])/float64(n[0]), float64(ok[1])/float64(n[1])
	t.Logf("first tries: %d/%d served (%.0f%%); retries: %d/%d served (%.0f%%)", ok[0], n[0], 100*firstRate, ok[1], n[1], 100*retryRate)
	// The priority is the property: first tries served at least 3 times as
	// often as retries. The absolute share depends on the CPU this wall-clock
	// test gets (under -race, beside other packages' tests, 2× overload can
	// become much more), so its floor is low; the exact figure is asserted
	// in virtual time by shed's and admit's tests (≥ 95 %).
	if firstRate < 0.25 || retryRate > firstRate/3 {
		t.Errorf("first tries served %.0f%%, retries %.0f%%; want ≥ 25%% and at least 3 times the retries' rate", 100*firstRate, 100*retryRate)
	}
	st := gs.sg.Stats()
	t.Logf("stats: goodput %d, shed %v, queue: first tries shed %d, retries shed %d",
		st.Goodput, st.Shed, st.Queue.FirstTries.Shed(), st.Queue.Retries.Shed())
	if st.Arrived != bursts*8 || st.Retries != bursts*4 {
		t.Errorf("arrived %d (retries %d); want %d (%d)", st.Arrived, st.Retries, bursts*8, bursts*4)
	}
	checkBooks(t, st)
}

// A retrying Transport against an overloaded server does not hammer it:
// it waits out the Retry-After hint (clamped by its policy) and its retry
// budget caps the retries, where a naive client retries at once and
// triples the load.
func TestServerTransportBacksOff(t *testing.T) {
	leakcheck.Check(t)
	naive, err := retry.Preset("naive")
	if err != nil {
		t.Fatal(err)
	}
	polite := retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Constant, Base: 5 * time.Millisecond},
		// Retry-After: 1 is clamped to backoff + 100 ms, to keep the test short.
		Pushback: retry.Pushback{MaxExtra: 100 * time.Millisecond},
		// 10 %: a retry costs 10 tokens of 100, a first-try success earns 1,
		// no refunds: 10 × retries ≤ 100 + first-try successes (≤ 40), so
		// at most 14 retries, whatever the timing.
		Budget: budget.Spec{Kind: budget.KindTokenBucket, Capacity: 100, RetryCost: 10, SuccessReward: 1, NoRefund: true},
	}
	const requests = 40
	tests := []struct {
		name        string
		policy      retry.Policy
		minAttempts int
		maxAttempts int
		minDelay    time.Duration
	}{
		{"naive", naive, 2 * requests, 3 * requests, 0},
		{"stormguard", polite, requests, requests + (100+requests)/10, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(2), Queue: shed.Config{Capacity: 2}}}, sleeper(20*time.Millisecond))
			var mu sync.Mutex
			var delays []time.Duration
			r := retry.MustNew(tt.policy, retry.WithHooks(retry.Hooks{OnRetry: func(_ int, d time.Duration) {
				mu.Lock()
				delays = append(delays, d)
				mu.Unlock()
			}}))
			tr := sgTransport(t, r)
			var served atomic.Int32
			var wg sync.WaitGroup
			for range requests {
				wg.Go(func() {
					resp, err := tr.RoundTrip(get(t, context.Background(), gs.URL))
					if err != nil {
						t.Errorf("RoundTrip: %v", err)
						return
					}
					if resp.StatusCode == 200 {
						served.Add(1)
					}
					readClose(t, resp)
				})
			}
			wg.Wait()
			st := gs.sg.Stats()
			t.Logf("%d requests: %d attempts reached the server, %d served", requests, st.Arrived, served.Load())
			if n := int(st.Arrived); n < tt.minAttempts || n > tt.maxAttempts {
				t.Errorf("%d attempts; want in [%d, %d]", n, tt.minAttempts, tt.maxAttempts)
			}
			for _, d := range delays {
				if d < tt.minDelay {
					t.Errorf("a retry waited %v; want at least %v (the clamped Retry-After)", d, tt.minDelay)
					break
				}
			}
			checkBooks(t, st)
		})
	}
}

// When the whole service is saturated, a refusal says so, without
// Retry-After, and the client Transport makes exactly one attempt.
func TestServerServiceSaturated(t *testing.T) {
	tr, base, rec := setup(t, fast()) // also checks for leaks
	var saturated atomic.Bool
	g, ran := newGate(), new(names)
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(1), Queue: shed.Config{Capacity: 1}, ServiceSaturated: saturated.Load}}, queueHandler(g, ran))
	saturated.Store(true)
	// With room to serve, a saturated service still serves.
	resp, err := tr.RoundTrip(get(t, context.Background(), gs.URL))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("with room: %v %v; want 200", resp, err)
	}
	readClose(t, resp)

	c := plainClient(t, 4)
	defer g.open()
	wait := blockSlots(t, gs, c, 1)
	queued := inBackground(c, context.Background(), gs.URL, map[string]string{"X-Name": "queued"})
	if !eventually(func() bool { return gs.sg.Stats().Queued == 1 }) {
		t.Fatal("not queued")
	}
	trips := base.trips.Load()
	rec.classes = nil
	resp, err = lastResponse(tr.RoundTrip(get(t, context.Background(), gs.URL)))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	readClose(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get(wire.HeaderOverload) != "service" {
		t.Errorf("got %d, overload %q; want 503, service", resp.StatusCode, resp.Header.Get(wire.HeaderOverload))
	}
	if v := resp.Header.Get(wire.HeaderRetryAfter); v != "" {
		t.Errorf("Retry-After %q; want none (no layer should retry)", v)
	}
	if n := base.trips.Load() - trips; n != 1 || len(rec.classes) != 1 {
		t.Errorf("%d attempts sent (retrier saw %v); want exactly 1", n, rec.classes)
	}
	g.open()
	wait()
	<-queued
	checkBooks(t, gs.sg.Stats())
}

// The kill switch's shed fraction, turned through the admin endpoint:
// without the token nothing changes; with it, every request is shed with
// the service signal, the handler never runs and a retrying client makes
// one attempt each; turned back, requests are served again.
func TestServerKillSwitch(t *testing.T) {
	tr, base, _ := setup(t, fast()) // also checks for leaks
	dials := new(killswitch.Dials)
	adminH, err := killswitch.NewAdmin(dials, "tok")
	if err != nil {
		t.Fatal(err)
	}
	admin := httptest.NewServer(adminH)
	t.Cleanup(admin.Close)
	var ran atomic.Int32
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Dials: dials}}, func(w http.ResponseWriter, r *http.Request) { ran.Add(1) })
	ac := plainClient(t, 1)
	turn := func(auth, body string) int {
		req, err := http.NewRequest(http.MethodPost, admin.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := ac.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readClose(t, resp)
		return resp.StatusCode
	}
	sendAll := func(n int) (ok, shed int) {
		for range n {
			resp, err := lastResponse(tr.RoundTrip(get(t, context.Background(), gs.URL)))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readClose(t, resp)
			switch {
			case resp.StatusCode == 200:
				ok++
			case resp.StatusCode == 503 && resp.Header.Get(wire.HeaderOverload) == "service" && resp.Header.Get(wire.HeaderRetryAfter) == "":
				shed++
			default:
				t.Errorf("got %d, overload %q, Retry-After %q", resp.StatusCode, resp.Header.Get(wire.HeaderOverload), resp.Header.Get(wire.HeaderRetryAfter))
			}
		}
		return ok, shed
	}

	if code := turn("", `{"shed_fraction": 1}`); code != 401 {
		t.Errorf("admin without token: %d; want 401", code)
	}
	if code := turn("Bearer nope", `{"shed_fraction": 1}`); code != 401 {
		t.Errorf("admin with a wrong token: %d; want 401", code)
	}
	if ok, _ := sendAll(5); ok != 5 {
		t.Errorf("after refused admin calls: %d of 5 served; want all", ok)
	}
	if code := turn("Bearer tok", `{"shed_fraction": 1}`); code != 200 {
		t.Fatalf("admin with token: %d; want 200", code)
	}
	trips, before := base.trips.Load(), ran.Load()
	if _, shed := sendAll(20); shed != 20 {
		t.Errorf("shed fraction 1: %d of 20 shed; want all", shed)
	}
	if n := base.trips.Load() - trips; n != 20 {
		t.Errorf("%d attempts for 20 requests; want 20 (no retries)", n)
	}
	if n := ran.Load() - before; n != 0 {
		t.Errorf("handler ran %d times while shedding everything", n)
	}
	if code := turn("Bearer tok", `{"shed_fraction": 0, "limit_override": 7}`); code != 200 {
		t.Fatalf("admin reset: %d", code)
	}
	if ok, _ := sendAll(5); ok != 5 {
		t.Errorf("after reset: %d of 5 served; want all", ok)
	}
	st := gs.sg.Stats()
	if st.Shed[httpx.ShedKillSwitch] != 20 || st.Limit != 7 {
		t.Errorf("shed by kill switch %d, limit %d; want 20 and the override 7", st.Shed[httpx.ShedKillSwitch], st.Limit)
	}
	checkBooks(t, st)
}

// ThrottleClient refuses a client with 429 and Retry-After.
func TestServerThrottleClient(t *testing.T) {
	leakcheck.Check(t)
	gs := startGuarded(t, httpx.ServerConfig{
		Config: admit.Config{
			RetryAfter: 1500 * time.Millisecond,
		},
		// sent rounded up: 2
		ThrottleClient: func(r *http.Request) bool { return r.Header.Get("X-Client") == "greedy" },
	}, func(w http.ResponseWriter, r *http.Request) {})
	c := plainClient(t, 1)
	if a := call(c, context.Background(), gs.URL, map[string]string{"X-Client": "greedy"}); a.status != 429 || a.header.Get(wire.HeaderRetryAfter) != "2" || a.header.Get(wire.HeaderOverload) != "" {
		t.Errorf("greedy: %d, Retry-After %q, overload %q; want 429, 2, none", a.status, a.header.Get(wire.HeaderRetryAfter), a.header.Get(wire.HeaderOverload))
	}
	if a := call(c, context.Background(), gs.URL, map[string]string{"X-Client": "modest"}); a.status != 200 {
		t.Errorf("modest: %d; want 200", a.status)
	}
	st := gs.sg.Stats()
	if st.Shed[httpx.ShedThrottled] != 1 || st.Goodput != 1 {
		t.Errorf("throttled %d, goodput %d; want 1, 1", st.Shed[httpx.ShedThrottled], st.Goodput)
	}
	checkBooks(t, st)
}

// Retry at one layer: C fails; B's Transport retries it, gives up and B
// relays the signal with RelayExhausted; A's Transport then does not retry
// B, so C sees 3 attempts, not 9.
func TestRelayExhaustedAcrossHops(t *testing.T) {
	leakcheck.Check(t)
	var atC atomic.Int32
	c := startGuarded(t, httpx.ServerConfig{}, func(w http.ResponseWriter, r *http.Request) {
		atC.Add(1)
		w.WriteHeader(http.StatusInternalServerError + 3) // 503, plain: retryable
	})
	trB := sgTransport(t, retry.MustNew(fast()))
	var atB atomic.Int32
	b := startGuarded(t, httpx.ServerConfig{}, func(w http.ResponseWriter, r *http.Request) {
		atB.Add(1)
		resp, err := trB.RoundTrip(get(t, r.Context(), c.URL))
		if err != nil {
			httpx.RelayExhaustedError(w, err)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		httpx.RelayExhausted(w, resp)
		w.WriteHeader(http.StatusBadGateway)
	})
	resp, err := sgTransport(t, retry.MustNew(fast())).RoundTrip(get(t, context.Background(), b.URL))
	if err != nil {
		t.Fatal(err)
	}
	readClose(t, resp)
	if resp.StatusCode != 502 || !wire.ParseExhausted(resp.Header.Get(wire.HeaderRetriesExhausted)) {
		t.Errorf("got %d, exhausted %q; want 502 and the exhausted signal", resp.StatusCode, resp.Header.Get(wire.HeaderRetriesExhausted))
	}
	if nb, nc := atB.Load(), atC.Load(); nb != 1 || nc != 3 {
		t.Errorf("B saw %d attempts, C %d; want 1 and 3", nb, nc)
	}
}

func TestRelayExhausted(t *testing.T) {
	tests := []struct {
		name string
		resp *http.Response
		want bool
	}{
		{"nil", nil, false},
		{"success", &http.Response{StatusCode: 200, Header: http.Header{wire.HeaderRetriesExhausted: {"1"}}}, false},
		{"plain failure", &http.Response{StatusCode: 503, Header: http.Header{}}, false},
		{"exhausted", &http.Response{StatusCode: 503, Header: http.Header{wire.HeaderRetriesExhausted: {"1"}}}, true},
		{"exhausted true", &http.Response{StatusCode: 500, Header: http.Header{wire.HeaderRetriesExhausted: {"true"}}}, true},
		{"service overloaded", &http.Response{StatusCode: 503, Header: http.Header{wire.HeaderOverload: {"service"}}}, true},
		{"instance overloaded", &http.Response{StatusCode: 503, Header: http.Header{wire.HeaderOverload: {"instance"}}}, false},
		{"nil header", &http.Response{StatusCode: 503}, false},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		if got := httpx.RelayExhausted(w, tt.resp); got != tt.want || (w.Header().Get(wire.HeaderRetriesExhausted) == "1") != tt.want {
			t.Errorf("%s: RelayExhausted = %v, header %q; want %v", tt.name, got, w.Header().Get(wire.HeaderRetriesExhausted), tt.want)
		}
	}
	errs := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"after retries", &retry.GiveUpError{Reason: retry.ErrAttemptsExhausted, Last: context.DeadlineExceeded, Attempts: 3}, true},
		{"budget", &retry.GiveUpError{Reason: retry.ErrBudgetExhausted, Last: context.DeadlineExceeded, Attempts: 1}, true},
		{"server said stop", &retry.GiveUpError{Reason: retry.ErrServerSaidStop, Last: context.DeadlineExceeded, Attempts: 1}, true},
		{"not retryable, once", &retry.GiveUpError{Reason: retry.ErrNotRetryable, Last: &httpx.StatusError{StatusCode: 404}, Attempts: 1}, false},
		{"plain error", context.Canceled, false},
	}
	for _, tt := range errs {
		w := httptest.NewRecorder()
		if got := httpx.RelayExhaustedError(w, tt.err); got != tt.want || (w.Header().Get(wire.HeaderRetriesExhausted) == "1") != tt.want {
			t.Errorf("%s: RelayExhaustedError = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// The Transport passes the criticality its context carries (as the
// Server puts it there) on to the next hop, unless the request says.
func TestTransportPropagatesCriticality(t *testing.T) {
	leakcheck.Check(t)
	got := make(chan string, 1)
	c := startGuarded(t, httpx.ServerConfig{}, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(wire.HeaderCriticality)
	})
	tr := sgTransport(t, nil)
	relay := func(w http.ResponseWriter, r *http.Request) {
		req := get(t, r.Context(), c.URL)
		if v := r.Header.Get("X-Override"); v != "" {
			req.Header.Set(wire.HeaderCriticality, v)
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	// b believes its callers up to critical-plus; bu, with the default
	// MaxCriticality, does not believe more than critical, and propagates
	// what it believed.
	b := startGuarded(t, httpx.ServerConfig{Config: admit.Config{MaxCriticality: wire.CriticalPlus}}, relay)
	bu := startGuarded(t, httpx.ServerConfig{}, relay)
	cl := plainClient(t, 1)
	tests := []struct {
		untrusted          bool
		in, override, want string
	}{
		{false, "", "", ""},                            // the default is not sent
		{false, "critical", "", ""},                    // idem
		{false, "sheddable", "", "sheddable"},          // propagated
		{false, "Critical-Plus", "", "critical-plus"},  // normalised
		{false, "sheddable", "critical", "critical"},   // the request's own header wins
		{false, "bogus", "", ""},                       // malformed: the default
		{true, "critical-plus", "", ""},                // capped at critical, the default
		{true, "sheddable-plus", "", "sheddable-plus"}, // lower claims are taken
	}
	for _, tt := range tests {
		url := b.URL
		if tt.untrusted {
			url = bu.URL
		}
		call(cl, context.Background(), url, map[string]string{wire.HeaderCriticality: tt.in, "X-Override": tt.override})
		if g := <-got; g != tt.want {
			t.Errorf("B (untrusting %v) got %q (override %q): C saw %q; want %q", tt.untrusted, tt.in, tt.override, g, tt.want)
		}
	}
}
