package grpcx_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/grpcx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/retry"
)

// A hedged call with an idempotency key to a superseding server that is
// full: each hedge takes its earlier copy's place in the queue, and the
// ALREADY_EXISTS "superseded: replaced" the earlier copy gets is not the
// call's answer: the client waits for the copy that replaced it, which
// runs once.
func TestUnaryHedgeSupersededCopy(t *testing.T) {
	leakcheck.Check(t)
	tr := newTransfer()
	close(tr.slow)
	b, sg := guarded(t, grpcx.ServerConfig{Config: admit.Config{Limit: fixed(1), Supersede: &admit.SupersedeConfig{}}}, tr.step())
	raw := dial(t, b.addr)
	hedging := unaryClient(t, b, fast(t, func(p *retry.Policy) {
		p.Hedge = &retry.HedgePolicy{MaxAttempts: 3, Delay: 20 * time.Millisecond}
	}))
	blocker := keyedCheck(raw, "", "x-name", "blocker")
	waitFor(t, "the blocker running", func() bool { return sg.Stats().InFlight == 1 })
	call := keyedCheck(hedging, "tx-1")
	waitFor(t, "the third copy queued, the first two superseded", func() bool {
		st := sg.Stats()
		return st.Superseded == 2 && st.Queued == 1
	})
	select {
	case a := <-call:
		t.Fatalf("the call ended while its last copy was queued: %v", a.err)
	default:
	}
	close(tr.hold)
	if a := <-blocker; a.err != nil {
		t.Errorf("blocker: %v", a.err)
	}
	if a := <-call; a.err != nil || first(a.header, "x-run") != "1" {
		t.Errorf("the call: %v, header %v; want run 1's answer", a.err, a.header)
	}
	if n := tr.runs.Load(); n != 1 {
		t.Errorf("the call ran %d times; want 1", n)
	}
}
