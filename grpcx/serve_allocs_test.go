package grpcx

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
)

// TestServeAllocs: serving an admitted call costs the server one
// allocation of its own, the handler's deadline context (a
// deadline.Bound, cancelled by a method call): Ticket.Bind's cancel func
// made it two.
func TestServeAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("the race detector and coverage change allocation counts")
	}
	g, err := admit.New(admit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(context.Context) error { return nil }
	n := testing.AllocsPerRun(100, func() {
		tk, d := g.Admit(ctx, time.Now(), admit.Request{Attempt: 1})
		if !d.Admitted() {
			t.Fatalf("not admitted: %+v", d)
		}
		_ = serve(ctx, run, tk, nil, nil)
	})
	if n != 1 {
		t.Errorf("%v allocations per call served; want 1", n)
	}
}
