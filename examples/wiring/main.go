// Command wiring is the README's "Wiring a service" section as one program:
// a server with stormguard's defenses, a client with the recommended retry
// policy, the give-up contract, a circuit breaker, hedged requests and
// retry.Do — each function's body is what the README quotes, line for line
// (TestReadmeQuotesThisProgram checks it). main serves the server on
// 127.0.0.1, makes the calls against it and exits 0 when every one behaved
// as the README says, 1 otherwise:
//
//	go run ./examples/wiring
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wiring:", err)
		os.Exit(1)
	}
}

// newServer is the README's server.
func newServer() http.Handler {
	sg, err := httpx.NewServer(httpx.ServerConfig{
		Config: admit.Config{
			MaxTimeout: 5 * time.Second,                   // a caller can never extend it
			Limit:      limit.Spec{Kind: limit.KindVegas}, // adaptive concurrency
			Queue:      shed.Config{Capacity: 100, Order: shed.AdaptiveLIFO},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		// r.Context() carries the propagated deadline; deadline.Attempt(r.Context()) the attempt number.
		fmt.Fprintf(w, "order %s (attempt %d)\n", r.PathValue("id"), deadline.Attempt(r.Context()))
	})
	return sg.Wrap(mux) // serve it: http.ListenAndServe(":8080", newServer())
}

// getOrder is the README's client and its give-up contract.
func getOrder(ctx context.Context, base string) (*http.Response, error) {
	p, _ := retry.Preset("stormguard")
	r, err := retry.New(p) // share one Retrier per dependency: its budget sees all traffic
	if err != nil {
		log.Fatal(err)
	}
	client := httpx.Client(nil, r) // nil: http.DefaultTransport underneath
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/orders/42", nil)
	resp, err := client.Do(req)
	explain(resp, err)
	return resp, err
}

// explain is the README's give-up switch.
func explain(resp *http.Response, err error) {
	var se *httpx.StatusError // grpcx.StatusError on gRPC; status.Code(err) works too
	switch {
	case err == nil:
		defer resp.Body.Close()
	case errors.Is(err, retry.ErrBudgetExhausted), errors.Is(err, retry.ErrBreakerOpen):
		// the dependency is failing for everyone: degrade now
	case errors.As(err, &se):
		log.Printf("gave up on %s: %v", se.Status, err) // se.Header, se.Response.Body: the last response (nothing to close)
	}
}

// withBreaker is the README's circuit breaker.
func withBreaker(p retry.Policy) *retry.Retrier {
	bs, _ := breaker.Preset("stormguard") // or "rate", "failsafe", "gobreaker", or a breaker.Spec of your own
	br := breaker.MustNew(bs)
	r := retry.MustNew(p, retry.WithBreaker(br)) // retry.Do, httpx and grpcx all ask it
	_ = metrics.RegisterBreaker(prometheus.NewRegistry(), metrics.Labels{Target: "orders"}, br)
	return r
}

// hedged is the README's hedging client.
func hedged(p retry.Policy) *http.Client {
	p.Hedge = &retry.HedgePolicy{MaxAttempts: 3, Delay: 50 * time.Millisecond}
	r := retry.MustNew(p)
	client := httpx.Client(nil, r)
	return client
}

// doOnce is the README's retry.Do.
func doOnce(ctx context.Context, r *retry.Retrier, callTheDependency func(context.Context) error) error {
	err := retry.Do(ctx, r, func(ctx context.Context) error { return callTheDependency(ctx) })
	return err
}

// errDown is a failure that may pass: the retrier retries it.
type errDown struct{}

func (errDown) Error() string           { return "the dependency is down" }
func (errDown) RetryClass() retry.Class { return retry.Transient }

// run serves newServer on 127.0.0.1 and checks that every piece behaves as
// the README says, printing one line per check.
func run(ctx context.Context, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newServer(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	base := "http://" + ln.Addr().String()

	// The client gets order 42, in one attempt.
	resp, err := getOrder(ctx, base)
	if err != nil {
		return fmt.Errorf("GET /orders/42: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /orders/42: %s, want 200 OK", resp.Status)
	}
	fmt.Fprintf(out, "client: GET /orders/42: %s\n", resp.Status)

	// A status the policy never retries (404) comes back as a response.
	p, _ := retry.Preset("stormguard")
	resp, err = httpx.Client(nil, retry.MustNew(p)).Get(base + "/nothing")
	if err != nil || resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("GET /nothing: %v, %v; want a 404 response and no error", resp, err)
	}
	resp.Body.Close()
	fmt.Fprintf(out, "client: GET /nothing: %s, no error (404 is not retried)\n", resp.Status)

	// The breaker opens after five failures in a row and then refuses, unsent.
	br := withBreaker(retry.Policy{MaxAttempts: 1})
	calls := 0
	failing := func(context.Context) error { calls++; return errDown{} }
	for range 6 {
		err = doOnce(ctx, br, failing)
	}
	if !errors.Is(err, retry.ErrBreakerOpen) || calls != 5 {
		return fmt.Errorf("breaker: %d calls made, last error %v; want 5 calls, then %v", calls, err, retry.ErrBreakerOpen)
	}
	fmt.Fprintf(out, "breaker: open after %d failures: %v\n", calls, err)

	// A hedged GET gets the order.
	hc := hedged(p)
	resp, err = hc.Get(base + "/orders/7")
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("hedged GET /orders/7: %v, %v", resp, err)
	}
	resp.Body.Close()
	fmt.Fprintf(out, "hedged: GET /orders/7: %s\n", resp.Status)

	// retry.Do retries a transient error, then succeeds.
	tries := 0
	flaky := func(context.Context) error {
		if tries++; tries == 1 {
			return errDown{}
		}
		return nil
	}
	if err := doOnce(ctx, retry.MustNew(p), flaky); err != nil || tries != 2 {
		return fmt.Errorf("retry.Do: %v after %d tries; want success on the second", err, tries)
	}
	fmt.Fprintf(out, "retry.Do: succeeded on try %d\n", tries)
	return nil
}
