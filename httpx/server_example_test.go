package httpx_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/deadline"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/wire"
)

// A server behind stormguard: deadlines bounded to 5 s, an adaptive
// concurrency limit, a queue that serves first tries before retries and
// turns LIFO under overload. The handler reads its request's signals from
// the context.
func ExampleServer() {
	sg, err := httpx.NewServer(httpx.ServerConfig{
		Config: admit.Config{
			MaxTimeout: 5 * time.Second,
			Limit:      limit.Spec{Kind: limit.KindVegas},
			Queue:      shed.Config{Capacity: 100, Order: shed.AdaptiveLIFO},
		},
	})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		left, _ := deadline.Remaining(r.Context(), time.Now())
		fmt.Fprintf(w, "attempt %d, at most %v left", deadline.Attempt(r.Context()), left.Round(time.Second))
	})
	srv := httptest.NewServer(sg.Wrap(hello)) // in production: http.ListenAndServe(addr, sg.Wrap(mux))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output: attempt 1, at most 5s left
}

// A client wired with stormguard: the recommended retry policy (budgeted,
// jittered, honouring server signals), adaptive throttling, and the
// caller's deadline propagated to the server.
func Example_client() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := wire.ParseTimeout(r.Header.Get(wire.HeaderTimeout))
		fmt.Fprintf(w, "Stormguard-Attempt %q (a first try), deadline in %v", r.Header.Get(wire.HeaderAttempt), d.Round(time.Second))
	}))
	defer srv.Close()

	p, err := retry.Preset("stormguard")
	if err != nil {
		panic(err)
	}
	tr := httpx.NewTransport(nil, retry.MustNew(p)) // nil: http.DefaultTransport
	tr.Throttle, err = httpx.NewAdaptiveThrottle(httpx.ThrottleConfig{})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		panic(err) // a *retry.GiveUpError says why retrying stopped
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK Stormguard-Attempt "" (a first try), deadline in 2s
}
