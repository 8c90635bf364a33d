package bench

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/retry"
)

// The HTTP client retry shells, stormguard's httpx.Transport against
// hashicorp/go-retryablehttp, both behind an *http.Client as users call
// them, over a base transport that answers at once in process (no network:
// the figures are the shells' own cost and http.Client's):
//
//   - success: the first attempt gets 200. stormguard is its "stormguard"
//     preset (3 attempts, token-bucket budget); retryablehttp RetryMax 2.
//   - failing: every attempt gets 503, which both retry; 3 attempts per
//     call, no wait (stormguard's preset without backoff, budget kind none;
//     retryablehttp with a zero Backoff). Both drain and close every
//     response they retry; at the end stormguard returns a give-up error
//     that carries the last response (its body read into memory), and
//     retryablehttp an error after closing it.
//
// Neither logs (retryablehttp's Logger is nil). The requests have no
// deadline and no criticality: stormguard sends a first try as the caller
// made it (it stamps retries only), and copies the request, with a header
// map of its own, for its retries (one copy a call, rewritten from one
// retry to the next).

// cannedTransport answers every request with status and a short body.
type cannedTransport struct {
	status   int
	attempts *int
}

func (c cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	*c.attempts++
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: c.status, Status: http.StatusText(c.status), Header: make(http.Header),
		Body: io.NopCloser(strings.NewReader("body")), ContentLength: 4, Request: req}, nil
}

type httpLib struct {
	name string
	// do returns a function that makes one GET through the library over
	// base.
	do func(base http.RoundTripper, failing bool) func(ctx context.Context) (*http.Response, error)
}

var httpLibs = []httpLib{
	{"stormguard", func(base http.RoundTripper, failing bool) func(context.Context) (*http.Response, error) {
		p := stormguardPolicy(failing)
		if failing {
			p.Budget = budget.Spec{Kind: budget.KindNone}
		}
		c := httpx.Client(base, retry.MustNew(p))
		return func(ctx context.Context) (*http.Response, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://backend.invalid/x", nil)
			return c.Do(req)
		}
	}},
	{"retryablehttp", func(base http.RoundTripper, failing bool) func(context.Context) (*http.Response, error) {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: base}
		c.Logger = nil
		c.RetryMax = 2
		c.Backoff = func(time.Duration, time.Duration, int, *http.Response) time.Duration { return 0 }
		return func(ctx context.Context) (*http.Response, error) {
			req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, "http://backend.invalid/x", nil)
			return c.Do(req)
		}
	}},
}

func benchHTTPClient(b *testing.B, failing bool) {
	status := http.StatusOK
	if failing {
		status = http.StatusServiceUnavailable
	}
	// The callers: without a deadline, and with one an hour away ("dl/":
	// stormguard then propagates it, Stormguard-Timeout on a copy of the
	// request, and times every attempt; retryablehttp does neither).
	dl, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, caller := range []struct {
		name string
		ctx  context.Context
	}{{"", context.Background()}, {"dl/", dl}} {
		for _, l := range httpLibs {
			b.Run(caller.name+l.name, func(b *testing.B) {
				attempts := 0
				do := l.do(cannedTransport{status: status, attempts: &attempts}, failing)
				ctx := caller.ctx
				call := func() error {
					resp, err := do(ctx)
					if resp != nil {
						resp.Body.Close()
					}
					return err
				}
				timeCalls(b, call, failing, &attempts)
			})
		}
	}
}

// BenchmarkHTTPClientSuccess: the first attempt gets 200.
func BenchmarkHTTPClientSuccess(b *testing.B) { benchHTTPClient(b, false) }

// BenchmarkHTTPClientFailing: every attempt gets 503; 3 attempts per call.
func BenchmarkHTTPClientFailing(b *testing.B) { benchHTTPClient(b, true) }

// TestHTTPClientsAgree checks the premise: one attempt of a call that
// succeeds, three of one that keeps getting 503, in both libraries.
func TestHTTPClientsAgree(t *testing.T) {
	for _, l := range httpLibs {
		for _, failing := range []bool{false, true} {
			status, want := http.StatusOK, 1
			if failing {
				status, want = http.StatusServiceUnavailable, 3
			}
			attempts := 0
			do := l.do(cannedTransport{status: status, attempts: &attempts}, failing)
			for i := range 100 {
				attempts = 0
				resp, err := do(context.Background())
				if resp != nil {
					resp.Body.Close()
				}
				if attempts != want || (err != nil) != failing {
					t.Fatalf("%s, failing %v, call %d: %d attempts, err %v; want %d", l.name, failing, i, attempts, err, want)
				}
			}
		}
	}
}
