package httpx_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

func ExampleTransport() {
	// A server that is overloaded for its first request.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(wire.HeaderAttempt)
		a, ok := wire.ParseAttempt(v)
		if !ok {
			a = 1 // absent (or malformed): a first try
		}
		fmt.Printf("server: attempt %d (Stormguard-Attempt %q)\n", a, v)
		if n.Add(1) == 1 {
			w.Header().Set(wire.HeaderOverload, "instance")
			w.Header().Set(wire.HeaderRetryAfter, "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	// In production, start from retry.Preset("stormguard"). This policy waits
	// 10 ms between attempts and lets Retry-After stretch that by at most
	// 20 ms.
	r := retry.MustNew(retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Policy{Kind: backoff.Constant, Base: 10 * time.Millisecond},
		Pushback:    retry.Pushback{MaxExtra: 20 * time.Millisecond},
	})
	client := httpx.Client(nil, r) // nil: http.DefaultTransport
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("client: %s %s\n", resp.Status, body)
	// Output:
	// server: attempt 1 (Stormguard-Attempt "")
	// server: attempt 2 (Stormguard-Attempt "2")
	// client: 200 OK hello
}
