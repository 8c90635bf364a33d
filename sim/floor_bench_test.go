package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
)

// The floor of issue 16's target 1: issue 16's M/M/1 model (mm1Bench)
// written by hand straight on sim/engine, driving the same cores the
// simulator drives (the retrier's StartAt/EndAt, the shed queue's
// PushAt/PopAt, the engine's FixedQueue for the attempt timeouts) and
// keeping the client's statistics the simulator keeps in kind (requests
// and successes per bin, the latency sum, each bin's p50 and p99 by
// selectKth), and nothing else: one client, one worker, no network, no
// service-side series, no verdict. It draws from the simulator's streams
// (the client's arrivals, the service's service times) in the simulator's
// order, so it follows the same trajectory. No design of the simulator
// that drives these cores can spend less per event on this model than
// about this; BenchmarkMM1Floor measures it, and bench/des/engine-ratio -f
// sets it beside the engine and the whole simulator.

// floorModel is the hand-written model's state. Its arrays are kept from
// one run to the next, as the simulator keeps its own (pool.go).
type floorModel struct {
	// From the scenario, with its defaults.
	rate    float64 // arrivals per second
	mean    time.Duration
	timeout time.Duration
	bin     time.Duration
	nbins   int
	end     engine.Time
	seed    uint64
	policy  retry.Policy
	qcfg    shed.Config
	client  string // names, for the streams
	service string

	// One run's state.
	eng    engine.Engine
	tq     *engine.FixedQueue
	queue  *shed.Queue[int32]
	ret    *retry.Retrier
	arrRng engine.Rand // the client's arrival stream
	svcRng engine.Rand // the service's stream: service times
	edgRng engine.Rand // the edge's stream: the retrier's jitter after a failure
	busy   bool        // the one worker
	reqs   []floorReq
	atts   []floorAtt
	freeR  []int32
	freeA  []int32
	cur    int // the open bin

	// Statistics: per bin, and the open bin's latency sample.
	requests, successes, failures []int64
	p50, p99                      []float64
	lat                           []float64
	latSum                        float64 // seconds, over all successes

	// Kept between runs.
	storage *engine.Storage
	oldQ    *shed.Queue[int32]
}

// floorReq is one request across its attempts.
type floorReq struct {
	call    retry.Call
	arrival engine.Time
}

// floorAtt is one attempt. Its slot is freed when the worker finishes it:
// every attempt is served (the queue is unbounded FIFO without deadlines),
// and its timeout is cancelled then, so a timeout that fires always finds
// its attempt, and a completion its attempt.
type floorAtt struct {
	req     int32
	number  int32
	waiting bool // the caller still waits for it
	timeout engine.Handle
}

// floorTotals is what one run of the floor model counted.
type floorTotals struct {
	events, requests, succeeded, failed uint64
	latencyS                            float64 // mean latency of successes
}

func newFloorModel(s scenario.Scenario) *floorModel {
	s = s.WithDefaults()
	c, v := s.Clients[0], s.Services[0]
	f := &floorModel{
		rate:    c.Arrivals.Rate,
		mean:    v.ServiceTime.Mean,
		timeout: c.Timeout,
		bin:     s.Bin,
		nbins:   int((s.Duration + s.Bin - 1) / s.Bin),
		end:     engine.Time(s.Duration),
		seed:    s.Seed,
		policy:  c.Policy.Policy,
		qcfg:    v.Queue.ShedConfig(v.MinRemaining),
		client:  c.Name,
		service: v.Name,
	}
	f.requests = make([]int64, f.nbins)
	f.successes = make([]int64, f.nbins)
	f.failures = make([]int64, f.nbins)
	f.p50 = make([]float64, f.nbins)
	f.p99 = make([]float64, f.nbins)
	return f
}

// wallOf is the time.Time the cores take for virtual time t, as wall does.
func wallOf(t engine.Time) time.Time { return time.Unix(0, int64(t)) }

// run simulates the model from an empty system for the whole horizon.
func (f *floorModel) run(ctx context.Context) (floorTotals, error) {
	// Per run, what the simulator builds per run: the retrier, the queue,
	// the timeout queue, the streams; the arrays are the last run's.
	f.eng.Reuse(f.storage)
	f.storage = nil
	f.tq = f.eng.NewFixedQueue(f.timeout)
	q, err := shed.New[int32](f.qcfg)
	if err != nil {
		return floorTotals{}, err
	}
	q.Reuse(f.oldQ)
	f.queue, f.oldQ = q, nil
	f.ret, err = retry.New(f.policy, retry.WithDials(new(killswitch.Dials)))
	if err != nil {
		return floorTotals{}, err
	}
	f.arrRng = engine.Stream(f.seed, streamID("client", f.client, "arrivals"))
	f.svcRng = engine.Stream(f.seed, streamID("service", f.service))
	f.edgRng = engine.Stream(f.seed, streamID("edge", f.client))
	f.busy = false
	f.reqs, f.atts, f.freeR, f.freeA = f.reqs[:0], f.atts[:0], f.freeR[:0], f.freeA[:0]
	f.cur = 0
	clear(f.requests)
	clear(f.successes)
	clear(f.failures)
	clear(f.p50)
	clear(f.p99)
	f.lat, f.latSum = f.lat[:0], 0

	f.scheduleArrival(0)
	f.eng.At(engine.Time(f.bin), engine.Event{Kind: evBin})
	var ev engine.Event
	n := 0
	for f.eng.NextUntil(f.end, &ev) {
		switch ev.Kind {
		case evArrive:
			f.onArrive()
		case evWorkDone:
			f.onDone(int32(ev.A))
		case evTimeout:
			f.onTimeout(int32(ev.A))
		case evRetry:
			f.onRetry(int32(ev.A))
		case evBin:
			f.onBin()
		}
		// The simulator looks at its context every cancelEvery events.
		if n++; n == cancelEvery {
			n = 0
			if err := ctx.Err(); err != nil {
				return floorTotals{}, err
			}
		}
	}
	t := floorTotals{events: f.eng.Fired()}
	for b := range f.nbins {
		t.requests += uint64(f.requests[b])
		t.succeeded += uint64(f.successes[b])
		t.failed += uint64(f.failures[b])
	}
	if t.succeeded > 0 {
		t.latencyS = f.latSum / float64(t.succeeded)
	}
	f.storage = f.eng.Release()
	f.oldQ, f.queue, f.tq, f.ret = f.queue, nil, nil, nil
	return t, nil
}

// scheduleArrival schedules the next arrival after now: the exponential
// gap of a Poisson process at a rate that never changes, drawn as
// Arrivals.NextArrival draws it.
func (f *floorModel) scheduleArrival(now engine.Time) {
	next := now + engine.Time(time.Duration(f.arrRng.ExpFloat64()/f.rate*1e9))
	if next < f.end {
		f.eng.At(next, engine.Event{Kind: evArrive})
	}
}

func (f *floorModel) onArrive() {
	now := f.eng.Now()
	wt := wallOf(now)
	f.requests[f.cur]++
	var ri int32
	if n := len(f.freeR); n > 0 {
		ri = f.freeR[n-1]
		f.freeR = f.freeR[:n-1]
	} else {
		f.reqs = append(f.reqs, floorReq{})
		ri = int32(len(f.reqs) - 1)
	}
	r := &f.reqs[ri]
	r.arrival = now
	r.call = f.ret.StartAt(wt, time.Time{})
	f.launch(ri, 1, wt)
	f.scheduleArrival(now)
}

// launch sends attempt number n of request ri: its timeout, then the
// worker at once if it is idle, or the queue.
func (f *floorModel) launch(ri, n int32, wt time.Time) {
	var ai int32
	if k := len(f.freeA); k > 0 {
		ai = f.freeA[k-1]
		f.freeA = f.freeA[:k-1]
	} else {
		f.atts = append(f.atts, floorAtt{})
		ai = int32(len(f.atts) - 1)
	}
	a := &f.atts[ai]
	a.req, a.number, a.waiting = ri, n, true
	a.timeout = f.tq.Add(engine.Event{Kind: evTimeout, A: int64(ai)})
	if !f.busy {
		f.start(ai)
		return
	}
	// PushAt sets the item's Enqueued to wt itself.
	adm := f.queue.PushAt(wt, shed.Item[int32]{Payload: ai, Attempt: int(n)})
	if !adm.Admitted() || adm.HasVictim() {
		// An unbounded FIFO (200,000 places) without deadlines refuses
		// nothing and evicts nothing on this model.
		panic("floor: the queue refused or evicted an attempt")
	}
}

// start puts attempt ai on the worker for an exponential service time.
func (f *floorModel) start(ai int32) {
	f.busy = true
	st := time.Duration(f.svcRng.ExpFloat64() * float64(f.mean))
	f.eng.After(st, engine.Event{Kind: evWorkDone, A: int64(ai)})
}

// onDone: the worker finished attempt ai; it answers at once (no network),
// then takes the next queued attempt.
func (f *floorModel) onDone(ai int32) {
	now := f.eng.Now()
	wt := wallOf(now)
	f.busy = false
	a := &f.atts[ai]
	if a.waiting {
		a.waiting = false
		f.eng.Cancel(a.timeout)
		ri := a.req
		r := &f.reqs[ri]
		// The draw u is for a retry's jitter: a success never reads it.
		f.ret.EndAt(wt, &r.call, retry.Success, retry.Signal{}, 0)
		l := time.Duration(now - r.arrival).Seconds()
		f.successes[f.cur]++
		f.latSum += l
		f.lat = append(f.lat, l)
		f.freeR = append(f.freeR, ri)
	}
	f.freeA = append(f.freeA, ai)
	it, why, ok := f.queue.PopAt(wt)
	if !ok {
		return
	}
	if why != shed.None {
		panic("floor: the queue dropped an attempt")
	}
	f.start(it.Payload)
}

// onTimeout: the caller stops waiting for attempt ai (which stays queued
// or in service until the worker finishes it). Never on this model: the
// 1 s timeout is 100 mean sojourns.
func (f *floorModel) onTimeout(ai int32) {
	a := &f.atts[ai]
	a.waiting = false
	ri := a.req
	now := f.eng.Now()
	d := f.ret.EndAt(wallOf(now), &f.reqs[ri].call, retry.Timeout, retry.Signal{}, f.edgRng.Float64())
	if d.Retry {
		f.eng.After(d.Delay, engine.Event{Kind: evRetry, A: int64(ri)})
		return
	}
	f.failures[f.cur]++
	f.freeR = append(f.freeR, ri)
}

// onRetry sends request ri's next attempt.
func (f *floorModel) onRetry(ri int32) {
	wt := wallOf(f.eng.Now())
	r := &f.reqs[ri]
	f.ret.NextAt(wt, &r.call)
	f.launch(ri, int32(r.call.Attempt()), wt)
}

// onBin closes the open bin: its percentiles, as clientStats.closeBin
// computes them.
func (f *floorModel) onBin() {
	b := f.cur
	if n := len(f.lat); n > 0 {
		i50, i99 := int(0.50*float64(n-1)), int(0.99*float64(n-1))
		f.p50[b] = selectKth(f.lat, i50)
		f.p99[b] = selectKth(f.lat[i50:], i99-i50)
		f.lat = f.lat[:0]
	}
	if f.cur < f.nbins-1 {
		f.cur++
	}
	if next := f.eng.Now().Add(f.bin); next <= f.end {
		f.eng.At(next, engine.Event{Kind: evBin})
	}
}

// BenchmarkMM1Floor runs the floor model of issue 16's M/M/1 for the
// horizon of BenchmarkMM1 (100 s, 90,000 requests) and reports the same
// metrics, so that the two and sim/engine's BenchmarkEngine/small compare
// (bench/des/engine-ratio -f runs the three alternately).
func BenchmarkMM1Floor(b *testing.B) {
	s := mm1Bench(100 * time.Second)
	f := newFloorModel(s)
	ctx := context.Background()
	if _, err := f.run(ctx); err != nil { // grow the arrays once
		b.Fatal(err)
	}
	var events, reqs uint64
	b.ReportAllocs()
	for b.Loop() {
		t, err := f.run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		events += t.events
		reqs += t.requests
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reqs), "ns/request")
}

// TestMM1Floor checks that the floor model is the simulator's model: on
// mm1Bench for 100 s, its requests within 1 % of sim.Run's and its mean
// latency of successes within 5 % (M/M/1 at ρ = 0.9: a mean sojourn of
// 10 ms). Both draw from the same streams in the same order, so in fact
// they agree exactly; the tolerances are what the floor needs to stand for
// the same model, and leave the simulator room to change how it draws.
func TestMM1Floor(t *testing.T) {
	s := mm1Bench(100 * time.Second)
	ctx := context.Background()
	r, err := Run(ctx, s, "mm1", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFloorModel(s)
	var got floorTotals
	for range 2 { // the second run reuses the first one's arrays
		if got, err = f.run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := r.Clients[0].Total
	t.Logf("simulator: %d requests, %d succeeded, %d failed, mean latency %.6f s, %d events",
		want.Requests, want.Succeeded, want.Failed, want.SuccessLatencyS, r.Events)
	t.Logf("floor:     %d requests, %d succeeded, %d failed, mean latency %.6f s, %d events",
		got.requests, got.succeeded, got.failed, got.latencyS, got.events)
	if d := math.Abs(float64(got.requests)/float64(want.Requests) - 1); d > 0.01 {
		t.Errorf("requests: floor %d, simulator %d (%.2f %% apart, want ≤ 1 %%)", got.requests, want.Requests, 100*d)
	}
	if d := math.Abs(got.latencyS/want.SuccessLatencyS - 1); d > 0.05 {
		t.Errorf("mean latency: floor %.6f s, simulator %.6f s (%.2f %% apart, want ≤ 5 %%)", got.latencyS, want.SuccessLatencyS, 100*d)
	}
	if got.latencyS < 0.005 || got.latencyS > 0.02 {
		t.Errorf("mean latency %.6f s: not near M/M/1's 10 ms", got.latencyS)
	}
	if got.failed != 0 {
		t.Errorf("%d requests failed; none time out on this model", got.failed)
	}
	// The per-bin percentiles, as a further look: the same trajectory
	// gives the same p50 and p99 in every bin.
	same := 0
	for b, cb := range r.Clients[0].Bins {
		if f.p50[b] == cb.LatencyP50 && f.p99[b] == cb.LatencyP99 {
			same++
		}
	}
	t.Logf("bins with the simulator's p50 and p99 exactly: %d of %d", same, len(r.Clients[0].Bins))
}
