package httpx_test

import (
	"context"
	"errors"
	"math"

	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

var tt0 = time.Unix(1_700_000_000, 0)

func newThrottle(t *testing.T, c httpx.ThrottleConfig, opts ...httpx.ThrottleOption) *httpx.AdaptiveThrottle {
	t.Helper()
	th, err := httpx.NewAdaptiveThrottle(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// fill counts requests attempts and accepts accepts at now. The sample 1
// (never below p) lets every attempt through: a refused one would count
// the same.
func fill(th *httpx.AdaptiveThrottle, now time.Time, requests, accepts int) {
	for range requests {
		th.AllowAt(now, 1)
	}
	for range accepts {
		th.AcceptAt(now)
	}
}

// REFERENCES.md §1.4: reject with probability
// max(0, (requests − K·accepts) / (requests + 1)), K = 2.
func TestThrottleFormula(t *testing.T) {
	tests := []struct {
		k                 float64
		requests, accepts int
		want              float64
	}{
		{0, 0, 0, 0}, // K defaults to 2
		{0, 100, 100, 0},
		{0, 100, 50, 0},
		{0, 100, 25, 50.0 / 101},   // ≈ 0.495
		{0, 100, 10, 80.0 / 101},   // ≈ 0.792
		{0, 100, 0, 100.0 / 101},   // ≈ 0.990
		{0, 1, 0, 0.5},             // one refused request: 1/2
		{1.1, 100, 50, 45.0 / 101}, // the SRE book's aggressive K
		{1, 100, 100, 0},
	}
	for _, tc := range tests {
		th := newThrottle(t, httpx.ThrottleConfig{K: tc.k})
		fill(th, tt0, tc.requests, tc.accepts)
		if got := th.ProbabilityAt(tt0); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("K %v, requests %d, accepts %d: p = %.6f; want %.6f", tc.k, tc.requests, tc.accepts, got, tc.want)
		}
		if r, a := th.CountsAt(tt0); r != int64(tc.requests) || a != int64(tc.accepts) {
			t.Errorf("CountsAt = %d, %d; want %d, %d", r, a, tc.requests, tc.accepts)
		}
	}
}

func TestThrottleAllowAt(t *testing.T) {
	// p ≈ 0.495 at requests 100, accepts 25: a sample below p refuses.
	tests := []struct {
		u    float64
		want bool
	}{
		{0, false},
		{0.3, false},
		{0.49, false},
		{0.5, true},
		{0.99, true},
	}
	for _, tc := range tests {
		th := newThrottle(t, httpx.ThrottleConfig{})
		fill(th, tt0, 100, 25)
		if got := th.AllowAt(tt0, tc.u); got != tc.want {
			t.Errorf("u = %v at p ≈ 0.495: AllowAt = %v; want %v", tc.u, got, tc.want)
		}
		// Refused or not, the attempt counts as a request, never as an accept.
		if r, a := th.CountsAt(tt0); r != 101 || a != 25 {
			t.Errorf("counts after AllowAt = %d, %d; want 101, 25", r, a)
		}
	}
	// With nothing refused there is nothing to throttle, whatever the sample.
	th := newThrottle(t, httpx.ThrottleConfig{})
	if !th.AllowAt(tt0, 0) {
		t.Error("a fresh throttle refused an attempt")
	}
}

// A backend that refuses everything is soon left alone: the refusal
// probability climbs to requests/(requests+1), and it falls back once the
// backend accepts again.
func TestThrottleRecovers(t *testing.T) {
	th := newThrottle(t, httpx.ThrottleConfig{})
	fill(th, tt0, 1000, 0)
	if p := th.ProbabilityAt(tt0); p < 0.99 {
		t.Errorf("after 1000 refusals p = %v; want ≥ 0.99", p)
	}
	// The backend heals: every attempt that goes through is accepted. The
	// accepts outweigh the requests (K = 2) after about 500 of them.
	now := tt0.Add(time.Second)
	fill(th, now, 0, 600)
	if p := th.ProbabilityAt(now); p != 0 {
		t.Errorf("after 600 accepts p = %v; want 0", p)
	}
}

func TestThrottleWindow(t *testing.T) {
	th := newThrottle(t, httpx.ThrottleConfig{}) // 2 min, 12 slots of 10 s
	fill(th, tt0, 100, 0)
	tests := []struct {
		at           time.Duration
		wantRequests int64
	}{
		{0, 100},
		{59 * time.Second, 100},
		{110 * time.Second, 100}, // slot 11: the first slot is still in the ring
		{119 * time.Second, 100},
		{120 * time.Second, 0}, // slot 12 replaces slot 0
		{10 * time.Second, 0},  // time going backwards counts in the newest slot
	}
	for _, tc := range tests {
		if r, _ := th.CountsAt(tt0.Add(tc.at)); r != tc.wantRequests {
			t.Errorf("at +%v: %d requests; want %d", tc.at, r, tc.wantRequests)
		}
	}
	// Events spread over time leave the window slot by slot.
	th = newThrottle(t, httpx.ThrottleConfig{Window: 12 * time.Second})
	for i := range 12 {
		fill(th, tt0.Add(time.Duration(i)*time.Second), 1, 1)
	}
	if r, a := th.CountsAt(tt0.Add(15 * time.Second)); r != 8 || a != 8 {
		t.Errorf("12 s window at +15 s: %d requests, %d accepts; want 8, 8 (seconds 4 to 11)", r, a)
	}
}

func TestThrottleConfigValidate(t *testing.T) {
	tests := []struct {
		c    httpx.ThrottleConfig
		want bool // valid
	}{
		{httpx.ThrottleConfig{}, true},
		{httpx.ThrottleConfig{Window: time.Minute, K: 1.5}, true},
		{httpx.ThrottleConfig{K: 0.9}, false},
		{httpx.ThrottleConfig{K: math.NaN()}, false},
		{httpx.ThrottleConfig{K: math.Inf(1)}, false},
		{httpx.ThrottleConfig{Window: -time.Second}, false},
		{httpx.ThrottleConfig{Window: 5}, false},
	}
	for _, tc := range tests {
		_, err := httpx.NewAdaptiveThrottle(tc.c)
		if (err == nil) != tc.want {
			t.Errorf("NewAdaptiveThrottle(%+v): err = %v; want valid %v", tc.c, err, tc.want)
		}
		if err != nil && !errors.Is(err, httpx.ErrInvalidThrottleConfig) {
			t.Errorf("err %v does not wrap ErrInvalidThrottleConfig", err)
		}
	}
}

func TestThrottleConcurrent(t *testing.T) {
	// Allow and Accept are two calls, so at the start up to 7 goroutines
	// may have counted a request whose accept is not in yet: the refusal
	// probability is then above 0 and an attempt may be refused. The counts
	// must still add up: every Allow a request, every allowed one an accept.
	th := newThrottle(t, httpx.ThrottleConfig{})
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if th.Allow() {
					allowed.Add(1)
					th.Accept()
				}
				th.ProbabilityAt(time.Now())
			}
		})
	}
	wg.Wait()
	if r, a := th.CountsAt(time.Now()); r != 8000 || a != allowed.Load() {
		t.Errorf("counts %d, %d; want 8000, %d (the allowed ones)", r, a, allowed.Load())
	}
	if allowed.Load() == 0 {
		t.Errorf("no attempt allowed")
	}
}

func TestThrottleNoAllocs(t *testing.T) {
	th := newThrottle(t, httpx.ThrottleConfig{})
	n := testing.AllocsPerRun(100, func() {
		th.AllowAt(tt0, 0.5)
		th.AcceptAt(tt0)
	})
	if n != 0 {
		t.Errorf("%v allocations per AllowAt + AcceptAt; want 0", n)
	}
}

// The Transport with a Throttle: attempts the throttle refuses fail
// locally with ErrThrottled, of class Throttling, without reaching the
// server; the responses that count as accepts are all but 429 and a 503
// carrying an overload signal.
func TestTransportThrottle(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		wantAccept bool
	}{
		{"200", 200, nil, true},
		{"404", 404, nil, true},
		{"500", 500, nil, true},
		{"plain 503", 503, nil, true},
		{"503 overload none", 503, map[string]string{wire.HeaderOverload: "none"}, true},
		{"429", 429, nil, false},
		{"503 instance", 503, map[string]string{wire.HeaderOverload: "instance"}, false},
		{"503 service", 503, map[string]string{wire.HeaderOverload: "service"}, false},
		{"503 unknown overload", 503, map[string]string{wire.HeaderOverload: "galaxy"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			srv := newServer(t, reply{status: tc.status, header: tc.header})
			base := newCounting(t)
			th := newThrottle(t, httpx.ThrottleConfig{})
			tr := &httpx.Transport{Base: base, Throttle: th, ResponseOnGiveUp: true} // one attempt per request
			const n = 200
			var local int
			for range n {
				resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
				if err != nil {
					if !errors.Is(err, httpx.ErrThrottled) {
						t.Fatalf("err = %v; want ErrThrottled", err)
					}
					var g *retry.GiveUpError
					if !errors.As(err, &g) || g.RetryClass() != retry.Throttling {
						t.Errorf("err = %#v; want a give-up of class throttling", err)
					}
					local++
					continue
				}
				readClose(t, resp)
			}
			sent := int(base.trips.Load())
			if sent+local != n {
				t.Errorf("%d sent + %d refused locally = %d; want %d", sent, local, sent+local, n)
			}
			r, a := th.CountsAt(time.Now())
			if r != n {
				t.Errorf("throttle counted %d requests; want %d", r, n)
			}
			if tc.wantAccept {
				if local != 0 || a != n {
					t.Errorf("%d refused locally, %d accepts; want 0 and %d", local, a, n)
				}
				return
			}
			// p = i/(i+1) before attempt i: about ln(n) ≈ 5 attempts get
			// through, in expectation; allow for chance.
			if a != 0 || sent > 20 {
				t.Errorf("%d of %d attempts sent, %d accepts; want at most 20 sent, no accept", sent, n, a)
			}
			if got := len(srv.seen()); got != sent {
				t.Errorf("server saw %d requests; the transport sent %d", got, sent)
			}
		})
	}
}

// With a retrying Transport, a locally refused attempt is retried like
// throttling (after the throttling backoff, through the throttle again)
// and never touches the network.
func TestTransportThrottleRetries(t *testing.T) {
	leakcheck.Check(t)
	srv := newServer(t, reply{status: 200})
	seq := []float64{0, 0, 0.999} // refuse, refuse, allow
	var i int
	th := newThrottle(t, httpx.ThrottleConfig{}, httpx.WithThrottleRand(func() float64 { u := seq[i%len(seq)]; i++; return u }))
	fill(th, time.Now(), 10, 0) // p ≈ 0.91
	tr, base, rec := setup(t, fast())
	tr.Throttle = th
	resp, err := tr.RoundTrip(get(t, context.Background(), srv.URL))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	readClose(t, resp)
	want := []retry.Class{retry.Throttling, retry.Throttling, retry.Success}
	if len(rec.classes) != len(want) {
		t.Fatalf("attempt classes %v; want %v", rec.classes, want)
	}
	for j := range want {
		if rec.classes[j] != want[j] {
			t.Errorf("attempt classes %v; want %v", rec.classes, want)
			break
		}
	}
	if n := base.trips.Load(); n != 1 {
		t.Errorf("%d round trips; want 1 (the refused attempts stay local)", n)
	}
	if got := srv.attempts(); len(got) != 1 || got[0] != "3" {
		t.Errorf("server saw attempts %v; want [3]", got)
	}
}
