package otelx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/otelx"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// tracer returns a tracer whose ended spans sr records.
func tracer(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), sr
}

// events renders a span's events as "name k=v k=v", attributes sorted,
// durations left out (they vary).
func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		var kv []string
		for _, a := range e.Attributes {
			if a.Key == "stormguard.duration" {
				if a.Value.AsFloat64() < 0 {
					kv = append(kv, "negative duration")
				}
				continue
			}
			kv = append(kv, fmt.Sprintf("%s=%s", strings.TrimPrefix(string(a.Key), "stormguard."), a.Value.Emit()))
		}
		slices.Sort(kv)
		out = append(out, strings.Join(append([]string{e.Name}, kv...), " "))
	}
	return out
}

type classed retry.Class

func (c classed) Error() string           { return retry.Class(c).String() }
func (c classed) RetryClass() retry.Class { return retry.Class(c) }

// A request's attempts, its retry and its give-up are events of the span
// in its context, in order, with their attributes.
func TestClientSpanEvents(t *testing.T) {
	tr, sr := tracer(t)
	hooks, err := otelx.RetryHooks(nil, "payments")
	if err != nil {
		t.Fatal(err)
	}
	r := retry.MustNew(retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond}},
		retry.WithHooks(hooks))
	ctx, span := tr.Start(context.Background(), "charge")
	n := 0
	err = retry.Do(ctx, r, func(context.Context) error {
		n++
		if n == 1 {
			return classed(retry.Transient)
		}
		return classed(retry.NeverRetry)
	})
	span.End()
	if !errors.Is(err, retry.ErrNotRetryable) {
		t.Fatal(err)
	}
	// A request outside any span: nothing to add to, nothing breaks.
	_ = retry.Do(context.Background(), r, func(context.Context) error { return classed(retry.NeverRetry) })

	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans; want 1", len(spans))
	}
	want := []string{
		"stormguard.attempt attempt=1 class=transient target=payments try=first",
		"stormguard.retry attempt=1 delay=0.001 target=payments",
		"stormguard.attempt attempt=2 class=never-retry target=payments try=retry",
		"stormguard.gave_up attempt=2 error=never-retry reason=not-retryable target=payments",
	}
	if got := events(spans[0]); !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The httpx Transport makes its calls with the request's context: the
// span of the request gets the attempt events.
func TestHTTPClientSpanEvents(t *testing.T) {
	leakcheck.Check(t)
	tr, sr := tracer(t)
	hooks, err := otelx.RetryHooks(nil, "backend")
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(wire.HeaderAttempt) == "" { // a first try carries none
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer backend.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	r := retry.MustNew(retry.Policy{MaxAttempts: 2, Backoff: backoff.Policy{Kind: backoff.Constant, Base: time.Millisecond}},
		retry.WithHooks(hooks))
	ctx, span := tr.Start(context.Background(), "GET")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, backend.URL, nil)
	resp, err := httpx.Client(base, r).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	span.End()
	want := []string{
		"stormguard.attempt attempt=1 class=transient target=backend try=first",
		"stormguard.retry attempt=1 delay=0.001 target=backend",
		"stormguard.attempt attempt=2 class=success target=backend try=retry",
	}
	if got := events(sr.Ended()[0]); !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A server's refusals are events of the request's span, started by a
// tracing middleware outside the stormguard Server; a request served has
// none.
func TestServerSpanEvents(t *testing.T) {
	leakcheck.Check(t)
	tr, sr := tracer(t)
	dials := new(killswitch.Dials)
	sg, err := httpx.NewServer(httpx.ServerConfig{Config: admit.Config{Dials: dials, OnRefuse: otelx.ServerEvents("shop")}})
	if err != nil {
		t.Fatal(err)
	}
	traced := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, span := tr.Start(r.Context(), r.URL.Path)
			defer span.End()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	srv := httptest.NewServer(traced(sg.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(path string, kv ...string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for i := 0; i+1 < len(kv); i += 2 {
			req.Header.Set(kv[i], kv[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("/served")
	get("/expired", wire.HeaderTimeout, "0n", wire.HeaderAttempt, "2")
	if err := dials.SetShedFraction(1); err != nil {
		t.Fatal(err)
	}
	get("/shed")
	want := map[string][]string{
		"/served":  nil,
		"/expired": {"stormguard.expired answer=expired attempt=2 outcome=expired target=shop try=retry"},
		"/shed":    {"stormguard.shed answer=service-overloaded attempt=1 outcome=shed reason=kill-switch target=shop try=first"},
	}
	spans := sr.Ended()
	if len(spans) != len(want) {
		t.Fatalf("%d spans; want %d", len(spans), len(want))
	}
	for _, s := range spans {
		if got := events(s); !slices.Equal(got, want[s.Name()]) {
			t.Errorf("%s: events %q; want %q", s.Name(), got, want[s.Name()])
		}
	}
}

// BreakerTransition and AddEvent add their event to a recording span and
// do nothing without one.
func TestBreakerTransition(t *testing.T) {
	tr, sr := tracer(t)
	otelx.BreakerTransition(context.Background(), "payments", "closed", "open") // no span: nothing
	ctx, span := tr.Start(context.Background(), "call")
	otelx.BreakerTransition(ctx, "payments", "closed", "open")
	otelx.AddEvent(ctx, "stormguard.something", "payments", attribute.Int("stormguard.n", 3))
	span.End()
	want := []string{
		"stormguard.breaker.transition from=closed target=payments to=open",
		"stormguard.something n=3 target=payments",
	}
	if got := events(sr.Ended()[0]); !slices.Equal(got, want) {
		t.Errorf("events %q; want %q", got, want)
	}
}

// A breaker's changes of state reach the span of the request whose attempt
// moved it, through the retrier's hooks: the second failure opens it (on
// the span of that request), and the first request after the open period
// makes it half-open, then its success closes it.
func TestBreakerTransitionSpanEvents(t *testing.T) {
	tr, sr := tracer(t)
	hooks, err := otelx.RetryHooks(nil, "payments")
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	b := breaker.MustNew(breaker.Spec{Failures: 2, Delay: 10 * time.Millisecond, Jitter: &zero, Successes: 1})
	r := retry.MustNew(retry.Policy{MaxAttempts: 1}, retry.WithBreaker(b), retry.WithHooks(hooks))
	call := func(name string, result error) {
		ctx, span := tr.Start(context.Background(), name)
		_ = retry.Do(ctx, r, func(context.Context) error { return result })
		span.End()
	}
	call("first failure", classed(retry.Transient))
	call("second failure", classed(retry.Transient))
	time.Sleep(20 * time.Millisecond) // past the open period
	call("probe", nil)
	var got []string
	for _, s := range sr.Ended() {
		for _, e := range events(s) {
			if strings.HasPrefix(e, "stormguard.breaker.transition") {
				got = append(got, s.Name()+": "+e)
			}
		}
	}
	want := []string{
		"second failure: stormguard.breaker.transition from=closed target=payments to=open",
		"probe: stormguard.breaker.transition from=open target=payments to=half-open",
		"probe: stormguard.breaker.transition from=half-open target=payments to=closed",
	}
	if !slices.Equal(got, want) {
		t.Errorf("transitions\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
