package admit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
)

// mustGate builds a Gate from cfg or fails the test.
func mustGate(tb testing.TB, cfg admit.Config) *admit.Gate {
	tb.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// fixed is a fixed concurrency limit of n.
func fixed(n int) limit.Spec { return limit.Spec{Kind: limit.KindFixed, Limit: n} }

// result is what Admit returned.
type result struct {
	t admit.Ticket
	d admit.Decision
}

// admitAsync calls Admit on a goroutine of its own, at the time it runs,
// and delivers what it returned.
func admitAsync(g *admit.Gate, ctx context.Context, r admit.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		t, d := g.Admit(ctx, time.Now(), r)
		ch <- result{t, d}
	}()
	return ch
}

// first and retry are requests of attempt 1 and 2.
var (
	first = admit.Request{Attempt: 1}
	retry = admit.Request{Attempt: 2}
)

// checkBooks verifies that every request that arrived ended in exactly one
// outcome, once nothing is in flight or queued.
func checkBooks(t *testing.T, st admit.Stats) {
	t.Helper()
	if st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("in flight %d, queued %d; want 0, 0", st.InFlight, st.Queued)
	}
	if st.Joining != 0 {
		t.Errorf("joining %d; want 0", st.Joining)
	}
	out := st.Goodput + st.Failed + st.Wasted + st.ShedTotal() + st.Expired + st.Canceled + st.Superseded + st.Joined
	if st.Arrived != out {
		t.Errorf("books do not balance: arrived %d, accounted for %d: %+v", st.Arrived, out, st)
	}
}

// recordingAlg is a limit.Algorithm with a constant limit that records the
// samples the limiter feeds it.
type recordingAlg struct {
	n       int
	mu      sync.Mutex
	samples []limit.Sample
}

func (a *recordingAlg) Update(s limit.Sample) int {
	a.mu.Lock()
	a.samples = append(a.samples, s)
	a.mu.Unlock()
	return a.n
}

func (a *recordingAlg) Limit() int { return a.n }

func (a *recordingAlg) got() []limit.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.samples)
}

// waits records the waits OnQueueWait reports.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) add(d time.Duration) {
	w.mu.Lock()
	w.got = append(w.got, d)
	w.mu.Unlock()
}

func (w *waits) list() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}
