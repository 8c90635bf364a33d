package httpx_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// sameRequest is a base transport that records, for every attempt,
// whether it was given the caller's request itself.
type sameRequest struct {
	base   http.RoundTripper
	caller *http.Request
	mu     sync.Mutex
	same   []bool
}

func (s *sameRequest) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.same = append(s.same, req == s.caller)
	s.mu.Unlock()
	return s.base.RoundTrip(req)
}

// A first try carries no Stormguard-Attempt (absent means 1 at every
// stormguard server), and when it has nothing else to carry either (no
// deadline to propagate, no criticality, no attempt bound) it is the
// caller's request itself, uncopied; retries always carry their number.
// The server, a real httpx.Server on 127.0.0.1, counts the unstamped
// attempt as a first try: in its handler's context (deadline.Attempt) and
// in its books (Stats: Arrived, Retries, which the metrics' try label
// reads).
func TestTransportFirstTryUnstamped(t *testing.T) {
	type wire_ struct{ attempt, timeout, crit string }
	tests := []struct {
		name           string
		ctx            func() (context.Context, context.CancelFunc)
		header         http.Header // the caller's
		nilHeader      bool        // the caller's request has none
		attemptTimeout time.Duration
		statuses       []int // the handler's answers, in turn
		wantSame       []bool
		wantWire       []wire_ // "": absent; "set": present, any value
		wantAttempt    []int   // deadline.Attempt in the handler
		wantRetries    uint64  // the server's Stats().Retries
	}{
		{name: "nothing to stamp: the caller's request as it is",
			statuses: []int{200}, wantSame: []bool{true}, wantWire: []wire_{{}}, wantAttempt: []int{1}},
		{name: "a deadline to propagate: a copy with Stormguard-Timeout only",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
			statuses: []int{200}, wantSame: []bool{false}, wantWire: []wire_{{timeout: "set"}}, wantAttempt: []int{1}},
		{name: "a criticality to send: a copy with Stormguard-Criticality only",
			ctx: func() (context.Context, context.CancelFunc) {
				return deadline.WithCriticality(context.Background(), wire.Sheddable), func() {}
			},
			statuses: []int{200}, wantSame: []bool{false}, wantWire: []wire_{{crit: "sheddable"}}, wantAttempt: []int{1}},
		{name: "an attempt bound: a copy under its context, unstamped",
			attemptTimeout: time.Minute,
			statuses:       []int{200}, wantSame: []bool{false}, wantWire: []wire_{{timeout: "set"}}, wantAttempt: []int{1}},
		{name: "a request without a header map gets one",
			nilHeader: true,
			statuses:  []int{200}, wantSame: []bool{false}, wantWire: []wire_{{}}, wantAttempt: []int{1}},
		{name: "the caller's own Stormguard-Attempt is not passed on",
			header:   http.Header{wire.HeaderAttempt: {"5"}, "X-Trace": {"abc"}},
			statuses: []int{200}, wantSame: []bool{false}, wantWire: []wire_{{}}, wantAttempt: []int{1}},
		{name: "a retry is always stamped",
			statuses: []int{503, 200}, wantSame: []bool{true, false}, wantWire: []wire_{{}, {attempt: "2"}},
			wantAttempt: []int{1, 2}, wantRetries: 1},
		{name: "a retry with a deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
			statuses: []int{503, 503, 200}, wantSame: []bool{false, false, false},
			wantWire:    []wire_{{timeout: "set"}, {attempt: "2", timeout: "set"}, {attempt: "3", timeout: "set"}},
			wantAttempt: []int{1, 2, 3}, wantRetries: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			var (
				mu      sync.Mutex
				gotWire []wire_
				gotTry  []int
			)
			gs := startGuarded(t, httpx.ServerConfig{}, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				seen := wire_{r.Header.Get(wire.HeaderAttempt), r.Header.Get(wire.HeaderTimeout), r.Header.Get(wire.HeaderCriticality)}
				if seen.timeout != "" {
					seen.timeout = "set"
				}
				gotWire = append(gotWire, seen)
				gotTry = append(gotTry, deadline.Attempt(r.Context()))
				w.WriteHeader(tt.statuses[min(len(gotTry), len(tt.statuses))-1])
			})
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			req := get(t, ctx, gs.URL)
			switch {
			case tt.nilHeader:
				req.Header = nil
			case tt.header != nil:
				req.Header = tt.header
			}
			p := fast()
			p.AttemptTimeout = tt.attemptTimeout
			base := http.DefaultTransport.(*http.Transport).Clone()
			t.Cleanup(base.CloseIdleConnections)
			rec := &sameRequest{base: base, caller: req}
			tr := httpx.NewTransport(rec, retry.MustNew(p))

			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readClose(t, resp)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			if !slices.Equal(rec.same, tt.wantSame) {
				t.Errorf("base transport given the caller's request: %v, want %v", rec.same, tt.wantSame)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(gotWire, tt.wantWire) {
				t.Errorf("on the wire (attempt, timeout, criticality): %q, want %q", gotWire, tt.wantWire)
			}
			if !slices.Equal(gotTry, tt.wantAttempt) {
				t.Errorf("the handler's deadline.Attempt: %v, want %v", gotTry, tt.wantAttempt)
			}
			st := gs.sg.Stats()
			if want := uint64(len(tt.wantAttempt)); st.Arrived != want || st.Retries != tt.wantRetries {
				t.Errorf("server counted %d arrived, %d retries; want %d, %d", st.Arrived, st.Retries, want, tt.wantRetries)
			}
		})
	}
}

// A status a classifier takes for a success ends the request at its first
// attempt with that response, whether the retrier needs a Call for the
// first attempt (a breaker, hooks) or not (a token bucket alone); a
// retryable status is retried either way. The two paths of RoundTrip agree.
func TestTransportPathsAgree(t *testing.T) {
	notFoundOK := retry.WithClassifiers(retry.ClassifierFunc(func(err error) (retry.Class, bool) {
		var se *httpx.StatusError
		if errors.As(err, &se) && se.StatusCode == 404 {
			return retry.Success, true
		}
		return 0, false
	}))
	p := fast()
	p.Budget = budget.Spec{Kind: budget.KindTokenBucket, Capacity: 100, RetryCost: 10, SuccessReward: 1}
	retriers := map[string][]retry.Option{
		"no Call first": {notFoundOK},
		"breaker":       {notFoundOK, retry.WithBreaker(breaker.MustNew(breaker.Spec{}))},
		"hooks":         {notFoundOK, retry.WithHooks(retry.Hooks{OnAttempt: func(int, retry.Class, time.Duration) {}})},
	}
	tests := []struct {
		name         string
		replies      []reply
		wantStatus   int
		wantErr      error
		wantAttempts int
	}{
		{"ok", []reply{{status: 200, body: "ok"}}, 200, nil, 1},
		{"404, taken for a success", []reply{{status: 404, body: "none"}}, 404, nil, 1},
		{"503, then ok", []reply{{status: 503}, {status: 200, body: "ok"}}, 200, nil, 2},
		{"always 503", []reply{{status: 503, body: "busy"}}, 503, retry.ErrAttemptsExhausted, 3},
		{"400", []reply{{status: 400, body: "bad"}}, 400, nil, 1},
	}
	for name, opts := range retriers {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				leakcheck.Check(t)
				r := retry.MustNew(p, opts...)
				if skips := r.SkipsCall(); skips != (name == "no Call first") {
					t.Fatalf("SkipsCall = %v", skips)
				}
				srv := newServer(t, tt.replies...)
				base := newCounting(t)
				resp, err := httpx.NewTransport(base, r).RoundTrip(get(t, context.Background(), srv.URL))
				if tt.wantErr != nil {
					var se *httpx.StatusError
					if !errors.Is(err, tt.wantErr) || !errors.As(err, &se) {
						t.Fatalf("err %v; want %v with the last response", err, tt.wantErr)
					}
					resp = se.Response
				} else if err != nil {
					t.Fatalf("err %v", err)
				}
				body, want := readClose(t, resp), tt.replies[min(tt.wantAttempts, len(tt.replies))-1].body
				if resp.StatusCode != tt.wantStatus || body != want || len(srv.seen()) != tt.wantAttempts {
					t.Errorf("%d %q after %d attempts; want %d %q after %d", resp.StatusCode, body, len(srv.seen()), tt.wantStatus, want, tt.wantAttempts)
				}
			})
		}
	}
}
