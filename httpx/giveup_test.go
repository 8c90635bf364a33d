package httpx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// The give-up contract, through http.Client as users call it: whenever the
// policy gives up on a failure response, Client.Do returns an error that says
// why (errors.Is) and carries the last response (errors.As), whose body is
// readable and needs no closing; the table is the same as grpcx's.
func TestGiveUpContract(t *testing.T) {
	busy := reply{status: 503, body: "busy", header: map[string]string{"X-Why": "overload"}}
	tests := []struct {
		name         string
		replies      []reply
		policy       func(*retry.Policy)
		opts         func() []retry.Option
		timeout      time.Duration // the caller's deadline; 0: none
		want         error
		wantAttempts int  // sent, as the GiveUpError says and the server saw
		wantResponse bool // the last response is reachable
	}{
		{name: "attempts exhausted", replies: []reply{busy},
			want: retry.ErrAttemptsExhausted, wantAttempts: 3, wantResponse: true},
		{name: "budget exhausted", replies: []reply{busy},
			opts: func() []retry.Option { return []retry.Option{retry.WithBudget(denyBudget{})} },
			want: retry.ErrBudgetExhausted, wantAttempts: 1, wantResponse: true},
		{name: "deadline", replies: []reply{busy},
			policy: func(p *retry.Policy) {
				p.Backoff = backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Second, Cap: 10 * time.Second}
			},
			timeout: 5 * time.Second, // shorter than the backoff: no retry fits
			want:    retry.ErrDeadline, wantAttempts: 1, wantResponse: true},
		{name: "server said stop", replies: []reply{{status: 503, body: "busy", header: map[string]string{wire.HeaderOverload: "service", "X-Why": "overload"}}},
			want: retry.ErrServerSaidStop, wantAttempts: 1, wantResponse: true},
		{name: "breaker open", replies: []reply{busy},
			opts: func() []retry.Option { return []retry.Option{retry.WithBreaker(openBreaker())} },
			want: retry.ErrBreakerOpen, wantAttempts: 0},
		{name: "breaker open, stopping retries only", replies: []reply{busy},
			opts: func() []retry.Option { return []retry.Option{retry.WithBreaker(openRetriesBreaker())} },
			want: retry.ErrBreakerOpen, wantAttempts: 1, wantResponse: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			srv := newServer(t, tt.replies...)
			p := fast()
			if tt.policy != nil {
				tt.policy(&p)
			}
			var opts []retry.Option
			if tt.opts != nil {
				opts = tt.opts()
			}
			base := newCounting(t)
			client := httpx.Client(base, retry.MustNew(p, opts...))
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			resp, err := client.Do(get(t, ctx, srv.URL))
			if err == nil {
				readClose(t, resp)
				t.Fatalf("Client.Do = %s, nil; want an error (the policy gave up)", resp.Status)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("errors.Is(err, %v) is false: %v", tt.want, err)
			}
			var ue *url.Error
			var gu *retry.GiveUpError
			if !errors.As(err, &ue) || !errors.As(err, &gu) || gu.Attempts != tt.wantAttempts {
				t.Fatalf("err = %v, want a *url.Error around a *retry.GiveUpError of %d attempts", err, tt.wantAttempts)
			}
			if got := len(srv.seen()); got != tt.wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, tt.wantAttempts)
			}
			var se *httpx.StatusError
			if got := errors.As(err, &se); got != tt.wantResponse {
				t.Fatalf("a StatusError is reachable: %v, want %v (err %v)", got, tt.wantResponse, err)
			}
			if tt.wantResponse {
				if se.StatusCode != 503 || se.Header.Get("X-Why") != "overload" || se.Response == nil || se.Response.Header.Get("X-Why") != "overload" {
					t.Fatalf("StatusError %+v: want 503 with the server's header and the response", se)
				}
				body, err := io.ReadAll(se.Response.Body)
				if err != nil || string(body) != "busy" {
					t.Errorf("last response body = %q, %v; want %q", body, err, "busy")
				}
			}
			// Every response body the transport received was closed.
			if closed, _ := base.closed(); closed != tt.wantAttempts {
				t.Errorf("%d of %d response bodies closed", closed, tt.wantAttempts)
			}
		})
	}
}

// The give-up carries the last response sent, with its own body and
// header, whatever came before it: a call keeps one retried response's
// body after another in one buffer and sends its retries in one request of
// its own, rewritten, and none of that shows. Bodies of decreasing and
// increasing lengths, and a breaker that refuses the third attempt (the
// give-up then carries the second, kept while the call waited to retry).
func TestGiveUpCarriesLastResponse(t *testing.T) {
	long := strings.Repeat("a long first body; ", 40)
	tests := []struct {
		name         string
		replies      []reply
		opts         func() []retry.Option
		want         error
		wantAttempts int
		wantStatus   int
		wantBody     string
	}{
		{name: "shorter and shorter",
			replies: []reply{{status: 503, body: long, header: map[string]string{"X-Which": "1"}}, {status: 502, body: "second", header: map[string]string{"X-Which": "2"}}, {status: 504, body: "3rd", header: map[string]string{"X-Which": "3"}}},
			want:    retry.ErrAttemptsExhausted, wantAttempts: 3, wantStatus: 504, wantBody: "3rd"},
		{name: "longer and longer",
			replies: []reply{{status: 503, body: "1", header: map[string]string{"X-Which": "1"}}, {status: 502, body: "second", header: map[string]string{"X-Which": "2"}}, {status: 504, body: long, header: map[string]string{"X-Which": "3"}}},
			want:    retry.ErrAttemptsExhausted, wantAttempts: 3, wantStatus: 504, wantBody: long},
		{name: "the breaker refuses the third attempt",
			replies: []reply{{status: 503, body: long, header: map[string]string{"X-Which": "1"}}, {status: 502, body: "second", header: map[string]string{"X-Which": "2"}}, {status: 200, body: "never sent"}},
			opts: func() []retry.Option {
				return []retry.Option{retry.WithBreaker(breaker.MustNew(breaker.Spec{Failures: 2, Delay: time.Hour}))}
			},
			want: retry.ErrBreakerOpen, wantAttempts: 2, wantStatus: 502, wantBody: "second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			srv := newServer(t, tt.replies...)
			var opts []retry.Option
			if tt.opts != nil {
				opts = tt.opts()
			}
			base := newCounting(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := httpx.Client(base, retry.MustNew(fast(), opts...)).Do(post(t, ctx, srv.URL, "payload"))
			var gu *retry.GiveUpError
			var se *httpx.StatusError
			if !errors.Is(err, tt.want) || !errors.As(err, &gu) || gu.Attempts != tt.wantAttempts || !errors.As(err, &se) || se.Response == nil {
				t.Fatalf("err = %v; want a give-up (%v) after %d attempts carrying the last response", err, tt.want, tt.wantAttempts)
			}
			if se.StatusCode != tt.wantStatus || se.Response.StatusCode != tt.wantStatus || se.Response.Header.Get("X-Which") != strconv.Itoa(tt.wantAttempts) {
				t.Errorf("StatusError %d, response %d with X-Which %q; want %d, %d", se.StatusCode, se.Response.StatusCode, se.Response.Header.Get("X-Which"), tt.wantStatus, tt.wantAttempts)
			}
			body, err := io.ReadAll(se.Response.Body)
			if err != nil || string(body) != tt.wantBody {
				t.Errorf("last response body = %q, %v; want %q", body, err, tt.wantBody)
			}
			if got, want := srv.attempts(), wantAttempts(tt.wantAttempts); !slices.Equal(got, want) {
				t.Errorf("server saw attempts %q, want %q", got, want)
			}
			for i, r := range srv.seen() {
				if r.body != "payload" {
					t.Errorf("attempt %d: server read body %q, want payload", i+1, r.body)
				}
				if r.timeout == "" {
					t.Errorf("attempt %d: no %s", i+1, wire.HeaderTimeout)
				}
			}
			if closed, _ := base.closed(); closed != tt.wantAttempts {
				t.Errorf("%d of %d response bodies closed", closed, tt.wantAttempts)
			}
		})
	}
}

// A failure response the policy never retries (404) is a response, as
// net/http gives it; ResponseOnGiveUp returns a given-up 503 as a response.
func TestGiveUpResponses(t *testing.T) {
	leakcheck.Check(t)
	srv := newServer(t, reply{status: 404, body: "nope"})
	base := newCounting(t)
	resp, err := httpx.Client(base, retry.MustNew(fast())).Do(get(t, context.Background(), srv.URL))
	if err != nil || resp.StatusCode != 404 || readClose(t, resp) != "nope" {
		t.Fatalf("404: %v, %v; want the response", resp, err)
	}
	srv2 := newServer(t, reply{status: 503, body: "busy"})
	tr := httpx.NewTransport(base, retry.MustNew(fast()))
	tr.ResponseOnGiveUp = true
	resp, err = (&http.Client{Transport: tr}).Do(get(t, context.Background(), srv2.URL))
	if err != nil || resp.StatusCode != 503 || resp.Header.Get(wire.HeaderRetriesExhausted) != "1" || readClose(t, resp) != "busy" {
		t.Fatalf("ResponseOnGiveUp: %v, %v; want the 503, marked exhausted", resp, err)
	}
}

// A failure body longer than 64 KiB reads as its first 64 KiB, then
// ErrBodyTruncated.
func TestGiveUpLongBody(t *testing.T) {
	leakcheck.Check(t)
	long := make([]byte, 100<<10)
	for i := range long {
		long[i] = 'x'
	}
	srv := newServer(t, reply{status: 503, body: string(long)})
	base := newCounting(t)
	_, err := httpx.Client(base, retry.MustNew(fast())).Do(get(t, context.Background(), srv.URL))
	var se *httpx.StatusError
	if !errors.As(err, &se) || se.Response == nil {
		t.Fatalf("err = %v, want a StatusError with the response", err)
	}
	body, rerr := io.ReadAll(se.Response.Body)
	if len(body) != 64<<10 || !errors.Is(rerr, httpx.ErrBodyTruncated) {
		t.Errorf("read %d bytes, %v; want 65536 and ErrBodyTruncated", len(body), rerr)
	}
	if closed, _ := base.closed(); closed != 3 {
		t.Errorf("%d of 3 response bodies closed", closed)
	}
}

// The breaker in the Transport: failures open it; then requests fail fast,
// unsent; after the open period a probe closes it.
func TestTransportBreaker(t *testing.T) {
	leakcheck.Check(t)
	srv := newServer(t, reply{status: 503}, reply{status: 503}, reply{status: 200, body: "ok"})
	zero := 0.0
	b := breaker.MustNew(breaker.Spec{Failures: 2, Delay: 50 * time.Millisecond, Jitter: &zero})
	base := newCounting(t)
	client := httpx.Client(base, retry.MustNew(retry.Policy{MaxAttempts: 1}, retry.WithBreaker(b)))
	for range 2 {
		if _, err := client.Do(get(t, context.Background(), srv.URL)); !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Fatalf("err = %v, want attempts exhausted", err)
		}
	}
	if _, err := client.Do(get(t, context.Background(), srv.URL)); !errors.Is(err, retry.ErrBreakerOpen) {
		t.Fatalf("err = %v, want ErrBreakerOpen", err)
	}
	if got := len(srv.seen()); got != 2 {
		t.Fatalf("server saw %d requests, want 2 (the third refused unsent)", got)
	}
	time.Sleep(60 * time.Millisecond)
	resp, err := client.Do(get(t, context.Background(), srv.URL))
	if err != nil || readClose(t, resp) != "ok" || b.State() != breaker.Closed {
		t.Fatalf("probe: %v %v, state %v; want ok and closed", resp, err, b.State())
	}
}

// The README's give-up snippet, against a server that is always busy.
func ExampleClient_giveUp() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p, _ := retry.Preset("stormguard")
	p.Backoff = backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond} // a quick example
	p.ThrottleBackoff = nil
	client := httpx.Client(nil, retry.MustNew(p))
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)

	var se *httpx.StatusError
	switch {
	case err == nil:
		defer resp.Body.Close()
	case errors.Is(err, retry.ErrBudgetExhausted), errors.Is(err, retry.ErrBreakerOpen):
		fmt.Println("degrade")
	case errors.As(err, &se):
		body, _ := io.ReadAll(se.Response.Body)
		fmt.Printf("gave up on %s (%s): %s", se.Status, strings.TrimSpace(string(body)), errors.Unwrap(err))
	}
	// Output: gave up on 503 Service Unavailable (busy): gave up after 3 attempt(s): attempts exhausted: httpx: server answered 503 Service Unavailable
}
