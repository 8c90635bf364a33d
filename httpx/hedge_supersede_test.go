package httpx_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
)

// A hedged request with an Idempotency-Key to a superseding server that is
// full: each hedge takes its earlier copy's place in the queue, and the
// 409 "superseded: replaced" the earlier copy gets is not the call's
// answer (it was returned to the caller before): the client waits for the
// copy that replaced it, which runs once.
func TestTransportHedgeSupersededCopy(t *testing.T) {
	leakcheck.Check(t)
	tr := &transfer{hold: newGate()}
	gs := startGuarded(t, httpx.ServerConfig{Config: admit.Config{Limit: fixed(1), Supersede: &admit.SupersedeConfig{}}}, tr.ServeHTTP)
	c := plainClient(t, 8)
	defer tr.hold.open()
	wait := blockSlots(t, gs, c, 1)

	p, _ := retry.Preset("stormguard")
	p.Hedge = &retry.HedgePolicy{MaxAttempts: 3, Delay: 20 * time.Millisecond}
	hc := httpx.Client(nil, retry.MustNew(p))
	t.Cleanup(hc.CloseIdleConnections)
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, gs.URL, strings.NewReader("transfer 10"))
		req.Header.Set(httpx.HeaderIdempotencyKey, `"tx-1"`)
		resp, err := hc.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	waitUntil(t, "the third copy queued, the first two superseded", func() bool {
		st := gs.sg.Stats()
		return st.Superseded == 2 && st.Queued == 1
	})
	select {
	case r := <-done:
		t.Fatalf("the call ended while its last copy was queued: %d %q, %v", r.status, r.body, r.err)
	default:
	}
	tr.hold.open()
	wait()
	r := <-done
	if r.err != nil || r.status != http.StatusCreated || r.body != "transfer done by run 1\n" {
		t.Errorf("the call: %d %q, %v; want 201 from run 1", r.status, r.body, r.err)
	}
	if n := tr.runs.Load(); n != 1 {
		t.Errorf("the transfer ran %d times; want 1", n)
	}
}
