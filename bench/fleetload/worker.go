package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/retry"
)

// workerConfig is what the parent sends a worker, as the first line of its
// standard input.
type workerConfig struct {
	Addr      string        `json:"addr"`
	Key       string        `json:"key"`
	Preset    string        `json:"preset"`
	First     int           `json:"first"` // the first process this worker runs
	Count     int           `json:"count"` // how many
	FleetSize int           `json:"fleet_size"`
	Rate      float64       `json:"rate"`
	Seed      uint64        `json:"seed"`
	Scale     float64       `json:"scale"`
	Isolated  int           `json:"isolated"`
	Timeout   time.Duration `json:"timeout"`
}

// phaseCounts is what a worker counted in one phase (by the planned start
// of each request).
type phaseCounts struct {
	Requests    int64     `json:"requests"`
	FirstOK     int64     `json:"first_ok"` // first-try successes: the rewards
	Asks        int64     `json:"asks"`     // retries asked of the budget
	Granted     int64     `json:"granted"`
	IsoAsks     int64     `json:"iso_asks"` // of the isolated processes
	IsoGranted  int64     `json:"iso_granted"`
	Waits       []float64 `json:"waits"` // seconds each ask spent in the budget
	LateSeconds float64   `json:"late_s"`
	// From the budgets' Stats at the phase's ends (by wall clock).
	Budget budgetCounts `json:"budget"`
}

// budgetCounts are the sums of the budgets' Stats that the report shows.
type budgetCounts struct {
	RoundTrips, Failures, Fallbacks                            uint64
	RefusedBackoff, RefusedSlow, RefusedShort, RefusedFallback uint64
	Capped                                                     float64
}

// add adds o to c.
func (c *phaseCounts) add(o phaseCounts) {
	c.Requests += o.Requests
	c.FirstOK += o.FirstOK
	c.Asks += o.Asks
	c.Granted += o.Granted
	c.IsoAsks += o.IsoAsks
	c.IsoGranted += o.IsoGranted
	c.Waits = append(c.Waits, o.Waits...)
	c.LateSeconds += o.LateSeconds
	c.Budget = c.Budget.plus(o.Budget)
}

func (c *budgetCounts) add(s fleet.Stats) {
	c.RoundTrips += s.RoundTrips
	c.Failures += s.Failures
	c.Fallbacks += s.Fallbacks
	c.RefusedBackoff += s.RefusedBackoff
	c.RefusedSlow += s.RefusedSlow
	c.RefusedShort += s.RefusedShort
	c.RefusedFallback += s.RefusedFallback
	c.Capped += s.Capped
}

func (c budgetCounts) minus(o budgetCounts) budgetCounts {
	return budgetCounts{c.RoundTrips - o.RoundTrips, c.Failures - o.Failures, c.Fallbacks - o.Fallbacks,
		c.RefusedBackoff - o.RefusedBackoff, c.RefusedSlow - o.RefusedSlow, c.RefusedShort - o.RefusedShort,
		c.RefusedFallback - o.RefusedFallback, c.Capped - o.Capped}
}

func (c budgetCounts) plus(o budgetCounts) budgetCounts {
	return budgetCounts{c.RoundTrips + o.RoundTrips, c.Failures + o.Failures, c.Fallbacks + o.Fallbacks,
		c.RefusedBackoff + o.RefusedBackoff, c.RefusedSlow + o.RefusedSlow, c.RefusedShort + o.RefusedShort,
		c.RefusedFallback + o.RefusedFallback, c.Capped + o.Capped}
}

// workerResult is what a worker prints when it is done.
type workerResult struct {
	Phases     []phaseCounts `json:"phases"`
	RoundTrips uint64        `json:"round_trips"` // as the budgets counted them
	Failures   uint64        `json:"failures"`
	Fallbacks  uint64        `json:"fallbacks"`
	Fallback   int           `json:"fallback_at_end"`
	Err        string        `json:"err,omitempty"`
}

// proc is one simulated process: its own Redis client (one connection, as
// a real process has), its own fleet budget and retrier.
type proc struct {
	id  int
	rdb *redis.Client
	b   *fleet.Budget
	r   *retry.Retrier
	mu  sync.Mutex
	per []phaseCounts
}

func runWorker(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	if !in.Scan() {
		return errors.New("worker: no configuration")
	}
	var cfg workerConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	policy, err := retry.Preset(cfg.Preset)
	if err != nil {
		return err
	}
	ps := schedule(cfg.Scale, cfg.Isolated)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	procs := make([]*proc, cfg.Count)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Count)
	sem := make(chan struct{}, 32)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id := cfg.First + i
			opts := fleet.ClientOptions(cfg.Addr, "", cfg.Timeout)
			opts.PoolSize = 1
			rdb := redis.NewClient(opts)
			b, err := fleet.New(context.Background(), rdb, fleet.Config{
				Key: cfg.Key, Spec: policy.Budget, FleetSize: cfg.FleetSize,
				ID: fmt.Sprintf("load-%d", id), Logger: quiet, Timeout: cfg.Timeout,
			})
			if err != nil {
				errs <- err
				return
			}
			procs[i] = &proc{id: id, rdb: rdb, b: b, r: retry.MustNew(policy, retry.WithBudget(b)), per: make([]phaseCounts, len(ps))}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ready")
	if !in.Scan() {
		return errors.New("worker: no start time")
	}
	var t0ns int64
	if _, err := fmt.Sscan(in.Text(), &t0ns); err != nil {
		return fmt.Errorf("worker: start time: %w", err)
	}
	t0 := time.Unix(0, t0ns)
	end := total(ps)
	// The budgets' counters at each phase's end.
	snaps := make([]budgetCounts, len(ps)+1)
	snapDone := make(chan struct{})
	go func() {
		defer close(snapDone)
		for i := range snaps {
			time.Sleep(time.Until(t0.Add(phaseStart(ps, i))))
			var c budgetCounts
			for _, p := range procs {
				c.add(p.b.Stats())
			}
			snaps[i] = c
		}
	}()
	var reqs sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(cfg, ps, t0, end, &reqs)
		}()
	}
	wg.Wait()
	reqs.Wait()
	<-snapDone

	res := workerResult{Phases: make([]phaseCounts, len(ps))}
	for i := range ps {
		res.Phases[i].Budget = snaps[i+1].minus(snaps[i])
	}
	for _, p := range procs {
		st := p.b.Stats()
		res.RoundTrips += st.RoundTrips
		res.Failures += st.Failures
		res.Fallbacks += st.Fallbacks
		if p.b.Mode() == fleet.ModeFallback {
			res.Fallback++
		}
		for i, c := range p.per {
			res.Phases[i].add(c)
		}
	}
	for _, p := range procs {
		p.b.Close()
		p.rdb.Close()
	}
	return json.NewEncoder(stdout).Encode(res)
}

// run makes the process's requests as planned, each in its own goroutine.
func (p *proc) run(cfg workerConfig, ps []phase, t0 time.Time, end time.Duration, reqs *sync.WaitGroup) {
	arrivals(cfg.Seed, p.id, cfg.Rate, end, func(req int, at time.Duration) bool {
		if d := time.Until(t0.Add(at)); d > 0 {
			time.Sleep(d)
		}
		ph := phaseAt(ps, at)
		if ph < 0 {
			return false
		}
		reqs.Add(1)
		go func() {
			defer reqs.Done()
			p.request(cfg, ps[ph], ph, req, time.Since(t0.Add(at)))
		}()
		return true
	})
}

// request makes one request's attempts, as retry.Do does, with outcomes
// and backoff samples from the plan.
func (p *proc) request(cfg workerConfig, ph phase, phi, req int, late time.Duration) {
	var c phaseCounts
	c.Requests = 1
	c.LateSeconds = late.Seconds()
	iso := p.id < ph.Isolated
	now := time.Now()
	call := p.r.StartAt(now, time.Time{})
	for attempt := 1; ; attempt++ {
		if !fails(cfg.Seed, ph, p.id, req, attempt) {
			if attempt == 1 {
				c.FirstOK = 1
			}
			p.r.EndAt(time.Now(), &call, retry.Success, retry.Signal{}, 0)
			break
		}
		u := uniform(cfg.Seed, p.id, req, attempt, drawU)
		asked := attempt < p.r.Policy().MaxAttempts
		start := time.Now()
		d := p.r.EndAt(start, &call, retry.Transient, retry.Signal{}, u)
		if asked {
			c.Asks++
			c.Waits = append(c.Waits, time.Since(start).Seconds())
			if iso {
				c.IsoAsks++
			}
			if d.Retry {
				c.Granted++
				if iso {
					c.IsoGranted++
				}
			}
		}
		if !d.Retry {
			break
		}
		time.Sleep(d.Delay)
		p.r.NextAt(time.Now(), &call)
	}
	p.mu.Lock()
	p.per[phi].add(c)
	p.mu.Unlock()
}

func workerMain() {
	if err := runWorker(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetload worker:", err)
		os.Exit(1)
	}
}
