package lab

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/wire"
)

// loadgen is the load generator role: open-loop arrivals at the
// scenario's rate, each request sent with the client's timeout and retry
// policy, and its one outcome counted.
type loadgen struct {
	cfg      LoadgenConfig
	clk      clock
	counts   *clientCounts
	retriers []*retry.Retrier
	client   *http.Client
	url      string
	wg       sync.WaitGroup
	// lag is how far the arrivals fell behind their schedule, at most.
	lag time.Duration
	// loads are the load triggers, as the simulator's arrivals read them.
	loads []scenario.Trigger
}

func newLoadgen(cfg LoadgenConfig, clk clock) (*loadgen, error) {
	g := &loadgen{cfg: cfg, clk: clk, counts: newClientCounts(clk), url: "http://" + cfg.Target + "/",
		client: &http.Client{Transport: newHTTPTransport()}}
	for _, w := range cfg.Triggers {
		if w.Kind == "load" {
			g.loads = append(g.loads, scenario.Trigger{Kind: w.Kind, At: w.At, Duration: w.Duration, Factor: w.Factor})
		}
	}
	for range max(1, cfg.Processes) {
		r, err := retry.New(cfg.Policy)
		if err != nil {
			return nil, fmt.Errorf("client policy: %w", err)
		}
		g.retriers = append(g.retriers, r)
	}
	return g, nil
}

// run sends the requests of the whole run, then waits for each to end.
// When ctx is done it stops sending, and the requests still in flight end
// as canceled.
func (g *loadgen) run(ctx context.Context) {
	bctx, stopBudget := context.WithCancel(ctx)
	var bw sync.WaitGroup
	bw.Go(func() { g.sampleBudgets(bctx) })
	// The simulator's stream for the same client: the lab's arrivals are
	// the simulated run's, to the nanosecond.
	rng := engine.Stream(g.cfg.Seed, streamID("client", g.cfg.Name, "arrivals"))
	proc := 0
	t := time.Duration(0)
	for {
		next, ok := g.next(t, &rng)
		if !ok {
			break
		}
		t = next
		at := g.clk.start.Add(t)
		if d := time.Until(at); d > 0 {
			tm := time.NewTimer(d)
			select {
			case <-ctx.Done():
				tm.Stop()
			case <-tm.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		g.lag = max(g.lag, time.Since(at))
		r := g.retriers[proc]
		proc = (proc + 1) % len(g.retriers)
		g.wg.Add(1)
		go g.request(ctx, r, at)
	}
	g.wg.Wait()
	stopBudget()
	bw.Wait()
}

// next returns the offset of the arrival after the one at t, and false
// when there is none before the end of the run: the simulator's own
// arrival process (scenario.Arrivals.NextArrival) with the run's load triggers,
// drawing from rng, so the lab's arrivals are the simulated run's.
func (g *loadgen) next(t time.Duration, rng *engine.Rand) (time.Duration, bool) {
	n, ok := g.cfg.Arrivals.NextArrival(t, g.loads, rng)
	return n, ok && n < g.cfg.Duration
}

// request sends one request, due at at, with the client's policy and
// counts its outcome. Its demand counts in the bin of at, as the
// simulator counts it, even when the request leaves a little late.
func (g *loadgen) request(ctx context.Context, r *retry.Retrier, at time.Time) {
	defer g.wg.Done()
	begin := time.Now()
	g.counts.sent(at)
	rctx := ctx
	if g.cfg.Deadline > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, g.cfg.Deadline)
		defer cancel()
	}
	attempts, degraded := 0, false
	err := retry.Do(rctx, r, func(actx context.Context) error {
		attempts++
		return g.attempt(actx, attempts, &degraded)
	})
	end := time.Now()
	o := classify(err, g.cfg.Deadline > 0 && errors.Is(rctx.Err(), context.DeadlineExceeded))
	o.degraded = degraded
	var reason error
	var gu *retry.GiveUpError
	if errors.As(err, &gu) {
		reason = gu.Reason
	}
	g.counts.attempts(attempts)
	g.counts.ended(end, end.Sub(begin), o, reason)
}

// attempt sends attempt number n and returns nil for a success, a
// retry.SignalError around a *statusError for a failure response, or the
// transport's error.
func (g *loadgen) attempt(ctx context.Context, n int, degraded *bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set(wire.HeaderAttempt, wire.FormatAttempt(n))
	if g.cfg.PropagateDeadline {
		if dl, ok := ctx.Deadline(); ok {
			v, ok := wire.FormatTimeout(time.Until(dl))
			if !ok {
				return context.DeadlineExceeded
			}
			req.Header.Set(wire.HeaderTimeout, v)
		}
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return &retry.SignalError{Err: statusErrorOf(resp), Sig: httpx.ParseSignal(resp.Header, time.Now())}
	}
	*degraded = resp.Header.Get(HeaderDegraded) != ""
	return nil
}

// sampleBudgets records the mean fill of the retriers' budgets at the end
// of every bin.
func (g *loadgen) sampleBudgets(ctx context.Context) {
	everyBin(ctx, g.clk, func(b int) {
		sum, n := 0.0, 0
		for _, r := range g.retriers {
			if l := budgetLevel(r.Budget()); l >= 0 {
				sum += l
				n++
			}
		}
		if n > 0 {
			g.counts.setBudget(b, sum/float64(n))
		}
	})
}

// result returns the client's series and outcomes.
func (g *loadgen) result() (result.ClientSeries, Outcomes) {
	return g.counts.series(g.cfg.Name, 0)
}

// budgetLevel returns the fill of a budget as a fraction of full, or -1
// when the budget has no level (the simulator's rule).
func budgetLevel(b budget.Budget) float64 {
	switch b := b.(type) {
	case *budget.TokenBucket:
		return b.Level() / b.Capacity()
	case *budget.TokenRatio:
		return b.Level() / b.MaxTokens()
	}
	return -1
}

// streamID derives a random stream's id from stable names.
func streamID(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
