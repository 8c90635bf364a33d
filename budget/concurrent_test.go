package budget

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests hammer each budget from many goroutines and check invariants
// that must hold whatever the interleaving. Run them with -race.

const (
	hammerGoroutines = 8
	hammerCalls      = 20_000
)

// hammer runs work on hammerGoroutines goroutines, each with its own seeded
// random source, while watch runs repeatedly on another goroutine until the
// workers are done. watch reports violations with t.Errorf.
func hammer(t *testing.T, work func(r *rand.Rand), watch func()) {
	t.Helper()
	var wg sync.WaitGroup
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			default:
				watch()
			}
		}
	}()
	for g := range hammerGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(rand.New(rand.NewPCG(uint64(g), 42)))
		}()
	}
	wg.Wait()
	close(done)
	<-watched
	watch()
}

func TestTokenBucketConcurrentLedger(t *testing.T) {
	// Without first-try rewards the level can only reach the capacity again
	// by refunds, so it is exactly capacity − charged + refunded.
	b := NewTokenBucket(100, 14, 5, 10, 1, true)
	var charged, refunded atomic.Int64 // milli-tokens
	hammer(t, func(r *rand.Rand) {
		for range hammerCalls {
			tk, ok := b.RetryAt(t0, Cause(r.IntN(3)))
			if !ok {
				continue
			}
			charged.Add(int64(tk.cost))
			switch o := Outcome(r.IntN(3)); o {
			case Success, Ignore:
				refunded.Add(int64(tk.cost))
				b.EndAt(t0, o, tk)
			default:
				b.EndAt(t0, o, tk)
			}
		}
	}, func() {
		if l := b.level.Load(); l < 0 || l > b.capacity {
			t.Errorf("level %d milli-tokens outside [0, %d]", l, b.capacity)
		}
	})
	got, want := b.level.Load(), b.capacity-charged.Load()+refunded.Load()
	if got != want {
		t.Errorf("level = %d milli-tokens, want capacity − charged + refunded = %d", got, want)
	}
	if charged.Load() == 0 || refunded.Load() == 0 {
		t.Errorf("charged %d, refunded %d: the test exercised nothing", charged.Load(), refunded.Load())
	}
}

func TestTokenBucketConcurrentBounds(t *testing.T) {
	b := mustPreset(t, "aws-2026").(*TokenBucket)
	hammer(t, func(r *rand.Rand) {
		for range hammerCalls {
			b.BeginAt(t0)
			if r.Float64() < 0.6 {
				b.EndAt(t0, Success, Ticket{})
				continue
			}
			b.EndAt(t0, Failure, Ticket{})
			if tk, ok := b.RetryAt(t0, Transient); ok {
				b.EndAt(t0, Outcome(r.IntN(3)), tk)
			}
		}
	}, func() {
		if l := b.Level(); l < 0 || l > 500 {
			t.Errorf("level %g outside [0, 500]", l)
		}
	})
}

func TestTokenRatioConcurrent(t *testing.T) {
	r := mustPreset(t, "grpc").(*TokenRatio)
	var granted atomic.Int64
	hammer(t, func(rng *rand.Rand) {
		for range hammerCalls {
			r.EndAt(t0, Outcome(rng.IntN(3)), Ticket{})
			if _, ok := r.RetryAt(t0, Transient); ok {
				granted.Add(1)
			}
		}
	}, func() {
		if l := r.tokens.Load(); l < 0 || l > r.max {
			t.Errorf("tokens %d milli-tokens outside [0, %d]", l, r.max)
		}
	})
	if granted.Load() == 0 {
		t.Error("no retry granted: the test exercised nothing")
	}
	// Only failures from here: more than maxTokens of them empty the count.
	hammer(t, func(*rand.Rand) {
		for range 10 {
			r.EndAt(t0, Failure, Ticket{})
		}
	}, func() {})
	if got := r.Level(); got != 0 {
		t.Errorf("after %d failures Level() = %g, want 0", hammerGoroutines*10, got)
	}
}

func TestWindowConcurrent(t *testing.T) {
	// With the clock held still, the grants cannot exceed the allowance, and
	// they reach it exactly: 0.2 × 1000 requests + 10/s × 10 s = 300.
	w := mustPreset(t, "finagle").(*Window)
	for range 1000 {
		w.BeginAt(t0)
	}
	var granted atomic.Int64
	hammer(t, func(*rand.Rand) {
		for range 100 {
			if _, ok := w.RetryAt(t0, Transient); ok {
				granted.Add(1)
			}
		}
	}, func() {
		if _, rets := w.CountsAt(t0); rets > 300 {
			t.Errorf("%d retries in the window, allowance 300", rets)
		}
	})
	if got, want := granted.Load(), int64(300); got != want {
		t.Errorf("granted %d, want %d", got, want)
	}

	// With each goroutine's clock moving forward (and the goroutines' clocks
	// out of step, so the window sees time go back and forth), the counts
	// stay consistent with the slots.
	w = mustPreset(t, "sre").(*Window)
	hammer(t, func(r *rand.Rand) {
		now := t0
		for range hammerCalls / 10 {
			now = now.Add(time.Duration(r.IntN(100)) * time.Millisecond)
			w.BeginAt(now)
			if tk, ok := w.RetryAt(now, Transient); ok && r.IntN(2) == 0 {
				w.EndAt(now, Ignore, tk)
			}
		}
	}, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		var reqs, rets int64
		for _, s := range w.ring {
			if s.reqs < 0 || s.rets < 0 {
				t.Errorf("negative slot counts %+v", s)
			}
			reqs += s.reqs
			rets += s.rets
		}
		if reqs != w.reqs || rets != w.rets {
			t.Errorf("ring sums (%d, %d) differ from totals (%d, %d)", reqs, rets, w.reqs, w.rets)
		}
	})
}

func TestConcurrencyConcurrent(t *testing.T) {
	c := mustPreset(t, "envoy").(*Concurrency)
	var granted atomic.Int64
	hammer(t, func(r *rand.Rand) {
		for range hammerCalls {
			c.BeginAt(t0)
			c.EndAt(t0, Failure, Ticket{})
			tk, ok := c.RetryAt(t0, Transient)
			if !ok {
				continue
			}
			granted.Add(1)
			c.EndAt(t0, Outcome(r.IntN(3)), tk)
		}
	}, func() {
		// Every retry in flight is also an attempt in flight, and with at
		// most 8 attempts in flight only the floor of 3 can grant retries.
		a, r := c.InFlight()
		if r > a || r > 3 || a > hammerGoroutines {
			t.Errorf("InFlight() = (%d, %d): want retries ≤ min(attempts, 3), attempts ≤ %d", a, r, hammerGoroutines)
		}
	})
	if a, r := c.InFlight(); a != 0 || r != 0 {
		t.Errorf("after every EndAt, InFlight() = (%d, %d), want (0, 0)", a, r)
	}
	if granted.Load() == 0 {
		t.Error("no retry granted: the test exercised nothing")
	}

	// A burst of retries from many goroutines over one first try is cut at
	// exactly the floor.
	c = mustPreset(t, "envoy").(*Concurrency)
	c.BeginAt(t0)
	granted.Store(0)
	hammer(t, func(*rand.Rand) {
		for range 100 {
			if _, ok := c.RetryAt(t0, Transient); ok {
				granted.Add(1)
			}
		}
	}, func() {})
	if got := granted.Load(); got != 3 {
		t.Errorf("burst granted %d retries, want 3", got)
	}
}
