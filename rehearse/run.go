package rehearse

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/lab"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Options configures Run. The zero Options is ready to use.
type Options struct {
	// Start is when the run's first bin begins [300 ms after Run is
	// called, once everything is listening]; shards of one rehearsal give
	// the same Start (at most 10 minutes ahead).
	Start time.Time
	// Progress, if not nil, is called with the fraction of the run done,
	// about five times a second.
	Progress func(frac float64)
}

// Result is one rehearsal run: its measurements in the simulator's shape,
// judged by its rule, and what only a rehearsal knows.
type Result struct {
	// Result holds the series and the verdict (result.Judge); its Events
	// counts the requests sent and, for the services measured, the
	// attempts that reached them.
	Result result.Result `json:"result"`
	// Clients account for every request of each client.
	Clients []ClientOutcomes `json:"clients"`
	// Services say how each service was measured.
	Services []ServiceNote `json:"services"`
	// Steps are what the runbook's steps did; Restored says whether the
	// dials they turned were set back after the run.
	Steps    []StepResult `json:"steps"`
	Restored string       `json:"restored,omitempty"`
	// Preflight says how each service answered before the run.
	Preflight []string `json:"preflight"`
	// Paths are what the fault proxies and error fronts did.
	Paths []ProxyStats `json:"paths"`
	// Sent counts the attempts sent, WorstCase the plan's bound on them
	// and Refused those the Guard refused (0 unless the plan is wrong).
	Sent      int64 `json:"attempts_sent"`
	WorstCase int64 `json:"attempts_worst_case"`
	Refused   int64 `json:"attempts_refused"`
	// Host is the run's account of its machine: a starved run's verdict
	// is lab.VerdictInconclusive.
	Host lab.Host `json:"host"`
	// Interrupted is set when the run was stopped before its end (Ctrl-C):
	// its series end at StoppedS.
	Interrupted bool    `json:"interrupted,omitempty"`
	StoppedS    float64 `json:"stopped_s,omitempty"`
	// WallS is how long the run took, drain included; StartUnixNano when
	// its first bin began.
	WallS         float64 `json:"wall_s"`
	StartUnixNano int64   `json:"start_unix_ns"`
	// Shard is the part of the run this was; Latency the per-bin latency
	// histograms of a shard's clients (for Merge), by client.
	Shard   string                  `json:"shard"`
	Latency map[string]*latencyHist `json:"latency_hist,omitempty"`
}

// ClientOutcomes is the accounting of one client.
type ClientOutcomes struct {
	Name     string       `json:"name"`
	Outcomes lab.Outcomes `json:"outcomes"`
	// HumanRetries counts people's taps after their first.
	HumanRetries int64 `json:"human_retries,omitempty"`
	// MaxLagS is how far its arrivals fell behind their schedule, at most.
	MaxLagS float64 `json:"max_lag_s"`
}

// ServiceNote says how a service was measured.
type ServiceNote struct {
	Name string `json:"name"`
	// Measured is set when its metrics were read (Readings of them);
	// Failed counts the readings that failed, LastError the last reason.
	Measured  bool   `json:"measured"`
	Readings  int    `json:"readings"`
	Failed    int    `json:"failed,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// Timing of a run.
const (
	startDelay = 300 * time.Millisecond
	// maxDrain bounds how long the clients may wait for their last
	// requests after the run's end before those are cancelled.
	maxDrain = 2 * time.Minute
	// maxStartAhead bounds Options.Start.
	maxStartAhead = 10 * time.Minute
)

// Run carries out the plan: it checks that the services answer (see
// preflight), opens what stands in front of each
// endpoint, reads the dials its steps will turn, sends every client's
// arrivals at their times from Options.Start, turns the dials at the
// steps' times, reads the services' metrics, waits for the last requests,
// sets the dials back and judges what it measured.
//
// When ctx ends during the run (Ctrl-C), every client stops sending at
// once, the requests in flight are cancelled, the dials are set back, and
// Run returns what was measured until then (Interrupted, series cut at
// StoppedS) with a nil error. An error means the run could not start or
// measure (an address in use, a dial that could not be read).
func Run(ctx context.Context, p Plan, opts Options) (Result, error) {
	began := time.Now()
	sc := p.Scenario
	pre := preflight(ctx, p)
	g, err := NewGuard(p.WorstCase, p.Limits.AllowRemote)
	if err != nil {
		return Result{}, err
	}
	start := opts.Start
	if start.IsZero() {
		start = time.Now().Add(startDelay)
	} else if d := time.Until(start); d > maxStartAhead {
		return Result{}, fmt.Errorf("rehearse: the start is %v away, more than %v", d.Round(time.Second), maxStartAhead)
	}
	paths := make([]*path, len(p.Endpoints))
	defer func() {
		for _, pa := range paths {
			if pa != nil {
				pa.close()
			}
		}
	}()
	for i, e := range p.Endpoints {
		pa, err := openPath(e, g, seedFor(sc.Seed, "front", e.Name))
		if err != nil {
			return Result{}, fmt.Errorf("rehearse: services.%s: %w", e.Name, err)
		}
		paths[i] = pa
	}
	base := g.transport()
	defer base.CloseIdleConnections()
	gens := make([]*generator, 0, len(p.Clients))
	defer func() {
		for _, gen := range gens {
			gen.close()
		}
	}()
	for _, cp := range p.Clients {
		gen, err := newGenerator(&p, cp, paths[cp.Endpoint].entry, g, base, start)
		if err != nil {
			return Result{}, err
		}
		gens = append(gens, gen)
	}
	sb := newSwitchboard(&p, g, gens)
	defer sb.close()
	if err := sb.save(ctx); err != nil {
		return Result{}, fmt.Errorf("rehearse: %w", err)
	}
	var watchers []*fleet.Watcher
	defer func() {
		for _, w := range watchers {
			w.Close()
		}
	}()
	for _, gen := range gens {
		if gen.cp.FleetDials == "" {
			continue
		}
		w, err := fleet.Watch(redis.UniversalClient(sb.rdb), gen.cp.FleetDials, gen.dials, fleet.WatchConfig{})
		if err != nil {
			return Result{}, fmt.Errorf("rehearse: clients.%s: watching the fleet's dials: %w", gen.cp.Name, err)
		}
		watchers = append(watchers, w)
	}
	scrapers := map[int]*scraper{}
	for i, e := range p.Endpoints {
		if e.Metrics != nil {
			scrapers[i] = newScraper(e, g)
		}
	}

	dur := sc.Duration
	end := start.Add(dur)
	// serve: the paths, the scrapers and the probe, until the clients
	// have drained; load: the clients' requests.
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var serving sync.WaitGroup
	for i, pa := range paths {
		serving.Go(func() { pa.run(serveCtx, start, p.Endpoints[i]) })
	}
	scrapeCtx, stopScrape := context.WithCancel(ctx)
	defer stopScrape()
	var scraping sync.WaitGroup
	for _, s := range scrapers {
		scraping.Go(func() { s.run(scrapeCtx, start, end) })
	}
	stopProbe := lab.ProbeHost(loadCtx, start, dur)
	var steps []StepResult
	var stepping sync.WaitGroup
	stepping.Go(func() { steps = sb.run(loadCtx, start) })
	var clients sync.WaitGroup
	for _, gen := range gens {
		clients.Go(func() { gen.run(loadCtx, start) })
		clients.Go(func() { gen.sampleBudgets(loadCtx, start, sc.Bin) })
	}
	done := make(chan struct{})
	go func() {
		clients.Wait()
		close(done)
	}()
	drain := time.NewTimer(time.Until(end.Add(min(maxDrain, requestBound(p)))))
	defer drain.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var stopped time.Time
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			if stopped.IsZero() {
				stopped = time.Now()
			}
			stopLoad()
		case <-drain.C:
			stopLoad() // the last requests take too long: end them
		case <-tick.C:
			if opts.Progress != nil {
				opts.Progress(min(0.99, float64(time.Since(start))/float64(dur+time.Second)))
			}
		}
	}
	if ctx.Err() != nil && stopped.IsZero() {
		stopped = time.Now()
	}
	stopLoad()
	stepping.Wait()
	host := stopProbe()
	if stopped.IsZero() {
		scraping.Wait() // its last reading is at the run's end
	}
	stopScrape()
	scraping.Wait()
	stopServe()
	serving.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	restoreErr := sb.restore(rctx)
	cancel()
	if opts.Progress != nil {
		opts.Progress(1)
	}

	res := Result{Preflight: pre, Steps: steps, Sent: g.Sent(), Refused: g.Refused(), WorstCase: p.WorstCase,
		StartUnixNano: start.UnixNano(), Shard: p.Shard.String()}
	if restoreErr != nil {
		res.Restored = "NOT set back: " + restoreErr.Error()
	} else if len(p.Steps) > 0 {
		res.Restored = "set back to what they were before the run"
	}
	n := int((dur + sc.Bin - 1) / sc.Bin)
	if !stopped.IsZero() {
		res.Interrupted = true
		at := max(0, stopped.Sub(start))
		n = min(n, max(1, int((at+sc.Bin-1)/sc.Bin)))
		res.StoppedS = (time.Duration(n) * sc.Bin).Seconds()
	}
	r := result.Result{Name: p.Name, Seed: sc.Seed, BinS: sc.Bin.Seconds(), DurationS: (time.Duration(n) * sc.Bin).Seconds(), TriggerS: [][2]float64{}}
	for _, t := range sc.Triggers {
		r.TriggerS = append(r.TriggerS, [2]float64{t.At.Seconds(), (t.At + t.Duration).Seconds()})
	}
	for _, s := range steps {
		if s.Err == "" {
			r.Actions = append(r.Actions, result.ActionMark{T: s.DoneS, Kind: stepKind(p, s), Label: s.Label})
		}
	}
	for _, gen := range gens {
		cs, o := gen.books.Series(gen.cp.Name, gen.inFlight.Load())
		cs.Bins = cs.Bins[:min(n, len(cs.Bins))]
		cs.Total.HumanRetries = gen.humanRetries.Load()
		r.Clients = append(r.Clients, cs)
		r.Events += uint64(o.Sent)
		res.Clients = append(res.Clients, ClientOutcomes{Name: gen.cp.Name, Outcomes: o, HumanRetries: cs.Total.HumanRetries, MaxLagS: gen.lag.Seconds()})
		if gen.hist != nil {
			if res.Latency == nil {
				res.Latency = map[string]*latencyHist{}
			}
			gen.hist.Bins = gen.hist.Bins[:min(n, len(gen.hist.Bins))]
			res.Latency[gen.cp.Name] = gen.hist
		}
	}
	for i, e := range p.Endpoints {
		res.Paths = append(res.Paths, paths[i].stats(e.Name))
		if e.Kind == scenario.EndpointTCP {
			continue
		}
		note := ServiceNote{Name: e.Name}
		ss := result.ServiceSeries{Name: e.Name, Bins: make([]result.ServiceBin, n)}
		for b := range ss.Bins {
			ss.Bins[b].T = float64(b) * sc.Bin.Seconds()
		}
		if s := scrapers[i]; s != nil {
			note.Readings, note.Failed, note.LastError = len(s.readings), s.errs, s.lastErr
			if got, ok := s.series(e.Name, start, sc.Bin, n); ok {
				ss, note.Measured = got, true
				r.Events += uint64(max(0, ss.Total.Arrived))
			}
		}
		r.Services = append(r.Services, ss)
		res.Services = append(res.Services, note)
	}
	judged := sc
	judged.Duration = time.Duration(n) * sc.Bin
	result.Judge(&r, judged)
	for i, note := range res.Services {
		if !note.Measured {
			why := "not measured: the service gives no metrics (metrics: in the scenario reads stormguard's)"
			if note.LastError != "" {
				why = "not measured: its metrics could not be read (" + note.LastError + ")"
			}
			r.Services[i].Judgement = result.Judgement{Verdict: result.NotJudged, Why: why}
		}
	}
	res.Host = lab.JudgeHost([]lab.RoleHost{{Role: "rehearse", HostStats: host}})
	lr := lab.RunResult{Result: r, Host: res.Host}
	lr.MarkInconclusive()
	res.Result, res.Host = lr.Result, lr.Host
	res.WallS = time.Since(began).Seconds()
	return res, nil
}

// stepKind is the kind of an ActionMark: the step's.
func stepKind(p Plan, s StepResult) string {
	for _, st := range p.Steps {
		if st.Label == s.Label && st.At.Seconds() == s.At {
			return st.Kind
		}
	}
	return ""
}

// requestBound is the longest a request of the plan can last: the lab's
// bound for its policy, times a person's taps.
func requestBound(p Plan) time.Duration {
	var longest time.Duration
	for _, c := range p.Clients {
		d := lab.RequestBound(c.Policy, c.Timeout, c.Deadline)
		if h := c.Humans; h != nil {
			d *= time.Duration(h.Taps)
		}
		longest = max(longest, d)
	}
	return longest
}

var _ http.RoundTripper = capped{}
