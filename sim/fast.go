package sim

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/wire"
)

// The direct path: a scenario of the plainest shape (fastShape) — open-loop
// clients calling services directly, over a network of no latency, each
// service one replica of workers behind a queue that drops nothing by
// deadline, with no limiter, no triggers and no runbook — is simulated by
// runFast instead of the general model. It drives the same cores as the
// general model does, at the same moments and with the same arguments (the
// retriers' StartAt, EndAt and NextAt; each replica's admission core's
// EnterAt, ReleaseAt and AbandonAt; each replica's shed.Queue; the same
// random streams, drawn in the same order), fills the same statistics, and
// schedules its events in the engine's order (by time, then by the order
// they were scheduled in, the same sequence numbers), so its Result is the
// general model's, byte for byte: TestFastPathSameResult holds it over many
// random scenarios of the shape. What it leaves out is the general model's
// bookkeeping for the mechanisms the shape does not have, in three ways:
//
//   - One record per request, not a request and an attempt record: an
//     attempt is known by its request's slot and the slot's attempt
//     generation (a fastRef). A queued or running attempt whose caller
//     has left needs no record: its completion counts (wasted) and
//     answers nobody, as the general model's does.
//   - A clock of its own (fastRun's heap and timeout rings) instead of the
//     engine: one heap of small value events and one ring per distinct
//     attempt timeout, with the timeouts of attempts that were answered
//     dropped when they come up (a cancelled timeout is never delivered,
//     in the engine either), and no cancellation handles.
//   - Straight calls: no event dispatch through Handle, no network hop,
//     no balancer, no checks for mechanisms the shape lacks.
//
// A run that a caller wants judged early (RunJudged) takes the general
// path, as does any scenario outside the shape.

// fastShape returns "" when runFast can simulate s, which has its defaults
// filled in, and otherwise what keeps it from doing so.
func fastShape(s *scenario.Scenario) string {
	switch {
	case len(s.Triggers) > 0:
		return "triggers"
	case len(s.Actions) > 0:
		return "a runbook"
	}
	for i := range s.Clients {
		c := &s.Clients[i]
		switch {
		case c.Arrivals.Kind == "closed":
			return "closed-loop users"
		case c.Humans != nil:
			return "people who tap again"
		case c.Fleet != nil:
			return "a fleet budget"
		case c.Breaker != nil:
			return "a circuit breaker"
		case c.Policy.Hedge != nil && c.Policy.Hedge.MaxAttempts > 1:
			return "hedging"
		case c.Network.Latency.Kind != "" || c.Network.Latency.Mean != 0:
			return "network latency"
		}
	}
	for i := range s.Services {
		v := &s.Services[i]
		switch {
		case v.Capacity != nil:
			return "a capacity per tick"
		case len(v.Calls) > 0:
			return "downstream calls"
		case v.Cache != nil:
			return "a cache"
		case v.Crash != nil:
			return "crashes"
		case v.Replicas != 1:
			return "replicas"
		case v.Autoscale != nil:
			return "an autoscaler"
		case v.Law != nil:
			return "a capacity law"
		case v.Hang != nil:
			return "hangs"
		case v.Slowdown.Factor > 0 && v.Slowdown.Queue > 0:
			return "a slowdown"
		case v.FailureCost != (scenario.FailureCost{}):
			return "failure costs"
		case v.Server != nil:
			return "a policy file's server block"
		case v.Limiter != nil:
			return "a limiter"
		case v.Supersede != nil:
			return "supersession"
		case v.ExpiredDrop:
			return "expired drop"
		case strings.Contains(v.Queue.Discipline, "adaptive"):
			return "adaptive LIFO"
		}
	}
	return ""
}

// fastRef names an attempt: its request's slot in the low 32 bits, the
// slot's generation when the attempt was sent in the high 32. The attempt
// is its request's current one, and its caller waits for it, while the
// slot still has that generation and waits; a request's slot counts a
// generation for every attempt it sends, so an older attempt's fastRef
// never matches again.
type fastRef = uint64

func refOf(i int32, gen uint32) fastRef { return uint64(gen)<<32 | uint64(uint32(i)) }

func splitRef(r fastRef) (int32, uint32) { return int32(uint32(r)), uint32(r >> 32) }

// fastReq is a request, across its attempts.
type fastReq struct {
	call    retry.Call
	arrival engine.Time
	lane    *fastLane // its client's
	gen     uint32    // of its current attempt (fastRef)
	proc    int32     // the client process (retrier) that makes it
	waiting bool      // its current attempt's caller waits for it
	live    bool
}

// fastEv is an event of the fast path's heap: an arrival (Target: the
// client), an attempt's work done (Target: the service, ref: the
// attempt), a retry due (ref: the request's last attempt) or the end of
// a bin.
type fastEv struct {
	at     engine.Time
	seq    uint64
	ref    fastRef
	target uint32
	kind   engine.Kind
}

// fastTimeout is an attempt's timeout in its ring.
type fastTimeout struct {
	at  engine.Time
	seq uint64
	ref fastRef
}

// fastRing holds the timeouts of one delay: they fire in the order they
// were set. Its length is a power of two.
type fastRing struct {
	delay   time.Duration
	buf     []fastTimeout
	head, n int
}

// fastRun is one run on the fast path: the world's clients, services and
// edges (their cores, streams and statistics), and the fast path's own
// requests and clock.
type fastRun struct {
	w     *world
	now   engine.Time
	b     int    // now's bin (binOf), set as each event is delivered
	seq   uint64 // the last event's sequence number
	fired uint64 // events delivered
	// heap holds the events other than timeouts, earliest first; when
	// hole is set, its first is spent (delivered), and the next push goes
	// in its place (one sift, not two), or top fills it with the last.
	heap []fastEv
	hole bool
	// nowq holds the events scheduled for now (with no delay) from
	// nowHead on, in the order they were scheduled; it is empty whenever
	// the clock moves on.
	nowq    []fastEv
	nowHead int
	rings   []fastRing
	reqs    []fastReq
	free    []int32
	lanes   []fastLane // by client
	svcs    []fastSvc  // by service
	one     *fastRing  // the ring, when there is one (all clients' attempts time out alike)
	// The loop's own state (see loop).
	end      engine.Time
	bins     int    // bins closed
	look     uint64 // the next look at ctx, when fired reaches it
	ctx      context.Context
	progress func(frac float64)
	req      admit.Request
	in       admit.Entered
	item     shed.Item[fastRef]
	adm      shed.Admission[fastRef]
	// permit is every admitted attempt's: the shape's admission cores have
	// no limiter, and grant every request the zero Permit.
	permit limit.Permit
}

// fastLane is a client's way to its service, looked up once: what its
// requests' path reads.
type fastLane struct {
	c     *client
	e     *edge
	v     *service
	rep   *replica
	ring  *fastRing // its timeouts'
	si    int32     // its service
	burst bool      // its arrivals are one burst
	// samples: its retriers read the sample EndAt is given (Samples).
	// When they do not, the edge's stream, which nothing else draws from
	// in the shape (it has no network latency), is not drawn: the draws
	// would change nothing.
	samples bool
}

// fastSvc is a service, looked up once: what its attempts' path reads.
type fastSvc struct {
	v   *service
	rep *replica
	// expo: its service times are exponential, of mean mean (sample's
	// first case, drawn directly).
	expo bool
	mean float64
}

// fastBuffers is the memory a fast run grows, kept for the next one (as
// runBuffers is for the general model's runs).
type fastBuffers struct {
	heap  []fastEv
	reqs  []fastReq
	free  []int32
	rings [][]fastTimeout
}

var fastPool sync.Pool

// runFast simulates w's scenario, which has the shape fastShape accepts,
// and returns the Result the general model would: see the top of this
// file.
func (w *world) runFast(ctx context.Context, name string, progress func(frac float64)) (result.Result, error) {
	f := &fastRun{w: w}
	var spare [][]fastTimeout
	if b, _ := fastPool.Get().(*fastBuffers); b != nil {
		f.heap, f.reqs, f.free, spare = b.heap[:0], b.reqs[:0], b.free[:0], b.rings
	}
	defer f.release()
	ring := make([]int, len(w.clients))
	for i := range w.clients {
		d := w.edges[w.clients[i].edge].timeout
		k := 0
		for k < len(f.rings) && f.rings[k].delay != d {
			k++
		}
		if k == len(f.rings) {
			r := fastRing{delay: d}
			if n := len(spare); n > 0 {
				r.buf, spare = spare[n-1], spare[:n-1]
			} else {
				r.buf = make([]fastTimeout, 64)
			}
			f.rings = append(f.rings, r)
		}
		ring[i] = k
	}
	f.svcs = make([]fastSvc, len(w.services))
	for i := range w.services {
		v := &w.services[i]
		f.svcs[i] = fastSvc{v: v, rep: &v.reps[0], expo: v.spec.ServiceTime.Kind == "exponential", mean: float64(v.spec.ServiceTime.Mean)}
	}
	f.lanes = make([]fastLane, len(w.clients))
	for i := range w.clients {
		c := &w.clients[i]
		e := &w.edges[c.edge]
		v := &w.services[e.target]
		f.lanes[i] = fastLane{c: c, e: e, v: v, rep: &v.reps[0], ring: &f.rings[ring[i]], si: e.target,
			burst: c.spec.Arrivals.Kind == "burst", samples: e.retriers[0].Samples()}
	}
	f.ctx, f.progress, f.end = ctx, progress, w.end
	// The first events, as startEvents schedules them.
	for i := range w.clients {
		if f.lanes[i].burst {
			f.push(engine.Time(w.clients[i].spec.Arrivals.At), evArrive, uint32(i), 0)
			continue
		}
		f.scheduleArrival(&f.lanes[i], int32(i))
	}
	f.push(engine.Time(w.bin), evBin, 0, 0)
	if len(f.rings) == 1 {
		f.one = &f.rings[0]
	}
	if err := f.loop(); err != nil {
		return result.Result{}, err
	}
	// The books at the end: requests still in flight, attempts still at
	// their service (queued or in service).
	for i := range f.reqs {
		if r := &f.reqs[i]; r.live {
			r.lane.c.stats.total.InFlight++
		}
	}
	for i := range w.services {
		v := &w.services[i]
		v.stats.total.InSystem += int64(v.reps[0].queue.Len() + v.reps[0].busy)
	}
	w.fastFired = f.fired
	r := w.finish(name)
	if progress != nil {
		progress(1)
	}
	return r, nil
}

// release gives f's arrays back for the next fast run.
func (f *fastRun) release() {
	b := &fastBuffers{heap: f.heap, reqs: f.reqs, free: f.free}
	for _, r := range f.rings {
		b.rings = append(b.rings, r.buf)
	}
	*f = fastRun{}
	fastPool.Put(b)
}

// loop delivers the events due up to the end of the run, earliest first,
// as simulate's loop does with the engine. Its state lives in f, not in
// locals: every handler is a call, which would spill and reload them.
func (f *fastRun) loop() error {
	for {
		// The earliest event: the heap's first, the first of those
		// scheduled for now, or a ring's front. The timeouts of attempts
		// answered in time (cancelled, in the engine) are dropped as they
		// come to the front.
		if f.hole {
			f.fill()
		}
		at, seq := engine.Never, ^uint64(0)
		if len(f.heap) > 0 {
			at, seq = f.heap[0].at, f.heap[0].seq
		}
		var now *fastEv
		if f.nowHead < len(f.nowq) {
			if e := &f.nowq[f.nowHead]; e.at < at || e.at == at && e.seq < seq {
				at, seq, now = e.at, e.seq, e
			}
		}
		var due *fastRing
		var dueI int32 // the request whose timeout is due
		if r := f.one; r != nil {
			for r.n > 0 {
				t := &r.buf[r.head]
				if t.at > at || t.at == at && t.seq > seq {
					break
				}
				if i, gen := splitRef(t.ref); f.reqs[i].gen == gen && f.reqs[i].waiting {
					at, due, dueI = t.at, r, i
					break
				}
				r.head = (r.head + 1) & (len(r.buf) - 1)
				r.n--
			}
		} else if at, due = f.earliestRing(at, seq); due != nil {
			dueI, _ = splitRef(due.buf[due.head].ref)
		}
		if at > f.end {
			return nil
		}
		f.now = at
		f.b = f.w.binOf(int64(at))
		f.fired++
		if due != nil {
			due.head = (due.head + 1) & (len(due.buf) - 1)
			due.n--
			r := &f.reqs[dueI]
			r.waiting = false
			f.ended(r, dueI, retry.Timeout, nil, true)
		} else {
			e := now
			if e != nil {
				if f.nowHead++; f.nowHead == len(f.nowq) {
					f.nowHead, f.nowq = 0, f.nowq[:0]
				}
			} else {
				e = &f.heap[0]
				f.hole = true
			}
			ref, target := e.ref, e.target
			switch e.kind {
			case evArrive:
				if l := &f.lanes[target]; !l.burst {
					f.newRequest(l, int32(target), true)
				} else {
					f.arrive(int32(target))
				}
			case evWorkDone:
				f.workDone(ref, int32(target))
			case evRetry:
				f.retry(ref)
			case evBin:
				if err := f.bin(); err != nil {
					return err
				}
			}
		}
		if f.fired >= f.look {
			// Every cancelEvery events (counted by fired, which a retry
			// sent at once also counts).
			f.look = f.fired + cancelEvery
			if err := f.ctx.Err(); err != nil {
				return err
			}
		}
	}
}

// earliestRing is loop's look at the rings when there are several: it
// drops the cancelled timeouts that come before the earliest event so far
// (at, seq), and returns the time of the earliest live timeout before it
// and its ring, or at and nil.
func (f *fastRun) earliestRing(at engine.Time, seq uint64) (engine.Time, *fastRing) {
	var due *fastRing
	for j := range f.rings {
		r := &f.rings[j]
		for r.n > 0 {
			t := &r.buf[r.head]
			if t.at > at || t.at == at && t.seq > seq {
				break
			}
			if i, gen := splitRef(t.ref); f.reqs[i].gen == gen && f.reqs[i].waiting {
				at, seq, due = t.at, t.seq, r
				break
			}
			r.head = (r.head + 1) & (len(r.buf) - 1)
			r.n--
		}
	}
	return at, due
}

// bin closes the bin that ends now, schedules the next, and reports
// progress (as simulate's loop does, every so many bins).
func (f *fastRun) bin() error {
	w := f.w
	w.closeBins(f.now)
	if next := f.now.Add(w.bin); next <= f.end {
		f.push(next, evBin, 0, 0)
	}
	f.bins++
	if f.bins%max(1, w.nbins/100) == 0 && f.progress != nil {
		f.progress(float64(f.now) / float64(f.end))
	}
	return nil
}

// push schedules an event at at, as the engine's At does: into the
// hole, if there is one, else at the end, then into its place. Its
// sequence number is the newest, so it goes after every event at the same
// time.
func (f *fastRun) push(at engine.Time, kind engine.Kind, target uint32, ref fastRef) {
	if at < f.now {
		panic("engine: event scheduled in the past")
	}
	f.seq++
	h := f.heap
	j := 0
	if f.hole {
		f.hole = false
		n := len(h)
		for {
			c := 2*j + 1
			if c >= n {
				break
			}
			if d := c + 1; d < n && (h[d].at < h[c].at || h[d].at == h[c].at && h[d].seq < h[c].seq) {
				c = d
			}
			if h[c].at > at {
				break
			}
			h[j] = h[c]
			j = c
		}
	} else {
		j = len(h)
		if j == cap(h) {
			h = append(h, fastEv{})
		}
		h = h[:j+1]
		for j > 0 {
			p := (j - 1) / 2
			if at >= h[p].at {
				break
			}
			h[j] = h[p]
			j = p
		}
		f.heap = h
	}
	e := &h[j]
	e.at, e.seq, e.ref, e.target, e.kind = at, f.seq, ref, target, kind
}

// after schedules an event d from now, as the engine's After does.
func (f *fastRun) after(d time.Duration, kind engine.Kind, target uint32, ref fastRef) {
	switch {
	case d < 0:
		panic("engine: negative delay")
	case d == 0:
		// Due now, after everything already scheduled: at the end of
		// the events for now, not through the heap.
		f.seq++
		f.nowq = append(f.nowq, fastEv{at: f.now, seq: f.seq, ref: ref, target: target, kind: kind})
		return
	}
	f.push(f.now.Add(d), kind, target, ref)
}

// fill fills the hole with the last event.
func (f *fastRun) fill() {
	f.hole = false
	n := len(f.heap) - 1
	h := f.heap[:n]
	f.heap = h
	if n == 0 {
		return
	}
	x := f.heap[:n+1][n]
	j := 0
	for {
		c := 2*j + 1
		if c >= n {
			break
		}
		if d := c + 1; d < n && (h[d].at < h[c].at || h[d].at == h[c].at && h[d].seq < h[c].seq) {
			c = d
		}
		if h[c].at > x.at || h[c].at == x.at && h[c].seq > x.seq {
			break
		}
		h[j] = h[c]
		j = c
	}
	h[j] = x
}

// addTimeout sets the timeout of attempt ref in ring r, at, numbered f.seq,
// when the ring is full: it grows.
func (f *fastRun) addTimeout(r *fastRing, at engine.Time, ref fastRef) {
	buf := make([]fastTimeout, 2*len(r.buf))
	for j := range r.n {
		buf[j] = r.buf[(r.head+j)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
	r.buf[r.n] = fastTimeout{at: at, seq: f.seq, ref: ref}
	r.n++
}

// scheduleArrival is scheduleArrival on the fast path's clock, for client
// ci on lane l.
func (f *fastRun) scheduleArrival(l *fastLane, ci int32) {
	if c := l.c; c.plain > 0 {
		f.pushArrival(f.now+poissonGap(c), ci)
		return
	}
	f.scheduleNext(l, ci)
}

// poissonGap is the time to a Poisson client's next arrival, drawn.
func poissonGap(c *client) engine.Time {
	return engine.Time(time.Duration(c.rng.ExpFloat64() / c.plain * 1e9))
}

// pushArrival schedules client ci's next arrival at next, if it comes
// before the end.
func (f *fastRun) pushArrival(next engine.Time, ci int32) {
	if next < f.end {
		f.push(next, evArrive, uint32(ci), 0)
	}
}

// scheduleNext is scheduleArrival for arrivals other than Poisson's.
func (f *fastRun) scheduleNext(l *fastLane, ci int32) {
	c := l.c
	next, ok := c.spec.Arrivals.NextArrival(time.Duration(f.now), f.w.sc.Triggers, &c.rng)
	if ok && engine.Time(next) < f.end {
		f.push(engine.Time(next), evArrive, uint32(ci), 0)
	}
}

// arrive is onArrive, newUserRequest and newRequest: a request of client
// ci starts, and sends its first attempt (a burst's requests all at once);
// then the client's next arrival is scheduled. (loop calls newRequest
// itself for a client that is not a burst: a call less on every arrival.)
func (f *fastRun) arrive(ci int32) {
	l := &f.lanes[ci]
	if l.burst {
		for range l.c.spec.Arrivals.Count {
			f.newRequest(l, ci, false)
		}
		return
	}
	f.newRequest(l, ci, true)
}

// newRequest is newUserRequest and newRequest for client ci, on lane l;
// then, if next, the client's next arrival is scheduled (here, not in
// arrive: a call less on every arrival).
func (f *fastRun) newRequest(l *fastLane, ci int32, next bool) {
	now := f.now
	c, e := l.c, l.e
	b := f.b
	c.stats.demand[b]++
	c.stats.total.Requests++
	proc := c.nextProc
	if len(e.retriers) > 1 {
		c.nextProc = (proc + 1) % int32(len(e.retriers))
	}
	var deadline engine.Time
	if e.deadline > 0 {
		deadline = now.Add(e.deadline)
	}
	var i int32
	if n := len(f.free); n > 0 {
		i = f.free[n-1]
		f.free = f.free[:n-1]
	} else {
		f.reqs = append(f.reqs, fastReq{})
		i = int32(len(f.reqs) - 1)
	}
	r := &f.reqs[i]
	r.arrival, r.lane, r.proc, r.live = now, l, proc, true
	var dl time.Time
	if deadline != 0 {
		dl = wall(deadline)
	}
	wt := wall(now)
	e.retriers[proc].StartInto(&r.call, wt, dl)
	if deadline != 0 && now >= deadline {
		// Nothing left of the caller's deadline: fail locally, send nothing.
		d := e.retriers[proc].EndAt(wt, &r.call, retry.Canceled, retry.Signal{}, 0)
		f.finish(r, i, false, d.Reason)
	} else {
		f.launch(r, i, wt)
	}
	if next {
		// scheduleArrival, its Poisson case written here (a call less
		// on every arrival).
		if c.plain > 0 {
			f.pushArrival(now+poissonGap(c), ci)
		} else {
			f.scheduleNext(l, ci)
		}
	}
}

// launch is launch, transmit and deliver: request i (r is its record)
// sends its current attempt (the retrier's count) to its service, which
// admits it.
func (f *fastRun) launch(r *fastReq, i int32, wt time.Time) {
	l := r.lane
	n := r.call.Attempt()
	r.gen++
	r.waiting = true
	ref := refOf(i, r.gen)
	// Its timeout, as a FixedQueue's Add sets it.
	f.seq++
	at := f.now + engine.Time(l.ring.delay)
	if at < f.now {
		at = engine.Never
	}
	if t := l.ring; t.n < len(t.buf) {
		t.buf[(t.head+t.n)&(len(t.buf)-1)] = fastTimeout{at: at, seq: f.seq, ref: ref}
		t.n++
	} else {
		f.addTimeout(t, at, ref)
	}
	c, v := l.c, l.v
	c.stats.total.Attempts++
	b := f.b
	v.stats.total.Arrived++
	v.meter.arrived++
	if n > 1 {
		c.stats.total.Retries++
		v.stats.retries[b]++
	} else {
		v.stats.first[b]++
	}
	f.req.Attempt = n
	switch l.rep.core.EnterAt(wt, &f.req, time.Time{}, false, v.draw, &f.in) {
	case admit.Go:
		rep := l.rep
		if rep.busy < v.workers && rep.queue.Len() == 0 {
			// admitStart: a free worker, and nobody waits before it.
			v.meter.started++
			f.start(ref, v, l.si)
			return
		}
		// The rest of admitStart: it waits in the run queue (written here,
		// not called: a call less on every queued attempt).
		it := &f.item // its Deadline stays zero: nothing in the shape expires
		it.Payload, it.Attempt = ref, n
		rep.queue.PushTo(wt, it, &f.adm)
		refused, vr, victim := f.adm.Refused, f.adm.VictimReason, f.adm.Victim.Payload
		if vr != shed.None {
			f.dropRun(victim, l.si, vr, wt)
		}
		if refused != shed.None {
			f.dropRun(ref, l.si, refused, wt)
		}
	case admit.Stop:
		f.answer(ref, l.si, f.in.Decision)
	default:
		panic("sim: an admission core without a limit or keys held an attempt")
	}
}

// dropRun is dropRun: the run queue refused or gave up an admitted
// attempt; the core takes back its slot and decides its answer.
func (f *fastRun) dropRun(ref fastRef, si int32, why shed.Reason, wt time.Time) {
	d, acts := f.w.services[si].reps[0].core.AbandonAt(wt, admit.Ref{}, &f.permit, time.Time{}, why)
	f.answer(ref, si, d)
	if len(acts) > 0 {
		panic("sim: an admission core without a queue handed on a slot")
	}
}

// answer is answer for the refusals of the shape: the attempt is shed.
func (f *fastRun) answer(ref fastRef, si int32, d admit.Decision) {
	switch d.Answer {
	case admit.Expired, admit.Canceled, admit.Superseded, admit.Joined:
		panic("sim: the fast path cannot answer " + d.Answer.String())
	}
	v := &f.w.services[si]
	v.stats.shed[f.b]++
	v.stats.total.Shed++
	f.reply(ref, v, codeShed)
}

// start is start: attempt ref takes a worker of service v (si).
func (f *fastRun) start(ref fastRef, v *service, si int32) {
	sv := &f.svcs[si]
	rep := sv.rep
	rep.busy++
	rep.inSvc++
	rep.working++
	var st time.Duration
	if sv.expo {
		st = time.Duration(v.rng.ExpFloat64() * sv.mean) // sample's first case
	} else {
		st = sample(&v.spec.ServiceTime, &v.rng)
	}
	if st > 0 {
		f.push(f.now.Add(st), evWorkDone, uint32(si), ref) // after's common case
		return
	}
	f.after(st, evWorkDone, uint32(si), ref)
}

// workDone is workDone and complete: attempt ref's work at service si is
// done; the core counts it, its caller gets the answer (if it still
// waits), and the worker takes the next queued attempt.
func (f *fastRun) workDone(ref fastRef, si int32) {
	sv := &f.svcs[si]
	v, rep := sv.v, sv.rep
	b := f.b
	rep.working--
	rep.busy--
	rep.inSvc--
	code := codeOK
	if v.errRate > 0 && v.rng.Float64() < v.errRate {
		code = codeError
	}
	i, gen := splitRef(ref)
	q := &f.reqs[i]
	waiting := q.gen == gen && q.waiting
	wt := wall(f.now)
	fate, handOn := rep.core.ReleaseAt(wt, &f.permit, time.Time{}, !waiting, outcomeOf(code, false))
	if handOn {
		panic("sim: an admission core without a queue handed on a slot")
	}
	v.stats.completed1(b, fate)
	if waiting {
		// reply: its caller gets the answer.
		q.waiting = false
		if code == codeOK {
			f.served(i, wt)
		} else {
			f.ended(q, i, retry.Transient, nil, false)
		}
	}
	for rep.busy < v.workers && rep.queue.Len() > 0 {
		it, why, _ := rep.queue.PopAt(wt)
		if why != shed.None {
			f.dropRun(it.Payload, si, why, wt)
			continue
		}
		f.start(it.Payload, v, si)
	}
}

// reply is onReply: attempt ref's answer, code, from service v reaches its
// caller, if the caller still waits for it (its timeout, in its ring, is
// then dropped when it comes up).
func (f *fastRun) reply(ref fastRef, v *service, code int) {
	i, gen := splitRef(ref)
	r := &f.reqs[i]
	if r.gen != gen || !r.waiting {
		return
	}
	r.waiting = false
	cls, sig := retry.Success, retry.Signal{}
	switch code {
	case codeOK:
	case codeShed:
		cls = retry.Transient
		if v.signals {
			sig = retry.Signal{Overload: wire.OverloadInstance, HasPushback: true, Pushback: shedPushback}
		}
	default:
		cls = retry.Transient
	}
	f.ended(r, i, cls, &sig, false)
}

// ended is attemptEnded: request i's current attempt (r is its record)
// ended with class cls and signal sig (nil: none) at now; its retrier
// decides.
//
// last says that the event being handled does nothing after this: a retry
// due at once is then sent at once, as the event it would be (counted,
// and numbered), when no other event is due now, since it would be the
// next delivered.
func (f *fastRun) ended(r *fastReq, i int32, cls retry.Class, sig *retry.Signal, last bool) {
	l := r.lane
	e := l.e
	var u float64
	if l.samples {
		u = e.rng.Float64()
	}
	var none retry.Signal
	if sig == nil {
		sig = &none
	}
	wt := wall(f.now)
	d := e.retriers[r.proc].EndAt(wt, &r.call, cls, *sig, u)
	switch {
	case cls == retry.Success:
		f.finish(r, i, true, nil)
	case d.Retry:
		if d.Delay == 0 && last && f.quiet() {
			f.seq++
			f.fired++
			e.retriers[r.proc].NextAt(wt, &r.call)
			f.launch(r, i, wt)
			return
		}
		f.after(d.Delay, evRetry, 0, refOf(i, r.gen))
	default:
		f.finish(r, i, false, d.Reason)
	}
}

// served is ended for a success (workDone calls it directly, not ended:
// a call less, and fewer arguments, on every request served): the
// retrier learns it, the request ends.
func (f *fastRun) served(i int32, wt time.Time) {
	r := &f.reqs[i]
	l := r.lane
	var u float64
	if l.samples {
		u = l.e.rng.Float64()
	}
	l.e.retriers[r.proc].EndAt(wt, &r.call, retry.Success, retry.Signal{}, u)
	// finish(i, true, nil), written here.
	r.live, r.waiting = false, false
	f.free = append(f.free, i)
	f.w.clientServed(l.c, f.b, r.arrival, f.now, false)
}

// quiet reports whether no event is due now: none in the heap (which has
// no hole), none scheduled for now, no timeout in a ring (even one that
// will be dropped). Then an event scheduled now would be delivered next.
func (f *fastRun) quiet() bool {
	if f.nowHead < len(f.nowq) || len(f.heap) > 0 && f.heap[0].at <= f.now {
		return false
	}
	for j := range f.rings {
		if r := &f.rings[j]; r.n > 0 && r.buf[r.head].at <= f.now {
			return false
		}
	}
	return true
}

// retry is the evRetry handler and sendAttempt: request ref's backoff is
// over; it sends its next attempt.
func (f *fastRun) retry(ref fastRef) {
	i, gen := splitRef(ref)
	r := &f.reqs[i]
	if !r.live || r.gen != gen {
		return
	}
	wt := wall(f.now)
	l := r.lane
	l.e.retriers[r.proc].NextAt(wt, &r.call)
	f.launch(r, i, wt)
}

// finish is finishRequest: request i (r is its record) ends with its one
// outcome.
func (f *fastRun) finish(r *fastReq, i int32, ok bool, reason error) {
	r.live, r.waiting = false, false
	f.free = append(f.free, i)
	c := r.lane.c
	if ok {
		f.w.clientServed(c, f.b, r.arrival, f.now, false)
		return
	}
	// clientOutcomeIn's failure, and gaveUpFor's first case (the retrier's
	// sentinel itself), written here: two calls fewer on every request
	// that fails.
	c.stats.failArr[f.w.binIndex(int64(r.arrival))]++
	c.stats.total.Failed++
	c.stats.total.FailureLatencyS += f.now.Sub(r.arrival).Seconds()
	if reason == retry.ErrAttemptsExhausted {
		c.stats.gaveUp[f.b].Attempts++
		c.stats.total.GaveUp.Attempts++
		return
	}
	c.stats.gaveUpFor(f.b, reason)
}
