package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// TestAdmissionDifferential feeds random sequences of arrivals (first
// tries and retries, with and without a deadline, with and without an
// idempotency key), completions (succeeded, failed, failed from overload),
// callers that leave, and time that passes (the queue's timer) to the
// production gate (admit.Gate, its goroutines and timers run in a
// testing/synctest bubble, each step settled before the next) and to the
// simulator's execution of the same core (a world with one service that
// admits through the same server block, driven through deliver, complete,
// callerLeft and its engine's timer events), over random server blocks
// (limit, queue order, priority, capacity, CoDel, min_remaining,
// max_timeout, reject_at_limit, supersession, the kill switch). It
// compares every request's fate and when it came, every sample the
// limiters learned from, the cores' counters, and the simulated service's
// totals against the gate's.
func TestAdmissionDifferential(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 80
	}
	rng := rand.New(rand.NewPCG(29, 1))
	for i := range n {
		c := randomDiffCase(rng)
		name := fmt.Sprintf("case%03d", i)
		gate := gateRun(t, c)
		sim := simRun(t, c)
		if !slices.Equal(gate.fates, sim.fates) {
			t.Errorf("%s %s: fates differ:\n gate %q\n  sim %q", name, c, gate.fates, sim.fates)
			continue
		}
		if !slices.Equal(gate.samples, sim.samples) {
			t.Errorf("%s %s: limiter samples differ:\n gate %q\n  sim %q", name, c, gate.samples, sim.samples)
		}
		if g, s := sameInstant(gate.stats), sameInstant(sim.stats); g != s {
			t.Errorf("%s %s: counters differ:\n gate %+v\n  sim %+v", name, c, g, s)
		}
		st, v := gate.stats, sim.service
		want := result.ServiceTotal{Arrived: int64(st.Arrived), Completed: int64(st.Goodput + st.Failed + st.Wasted),
			Goodput: int64(st.Goodput), Failed: int64(st.Failed), Wasted: int64(st.Wasted), Shed: int64(st.ShedTotal()),
			Expired: int64(st.Expired + st.Canceled), Superseded: int64(st.Superseded), Joined: int64(st.Joined)}
		got := result.ServiceTotal{Arrived: v.Arrived, Completed: v.Completed, Goodput: v.Goodput, Failed: v.Failed, Wasted: v.Wasted,
			Shed: v.Shed, Expired: v.Expired, Superseded: v.Superseded, Joined: v.Joined}
		if got != want {
			t.Errorf("%s %s: the simulated service's totals %+v; the gate counted %+v", name, c, got, want)
		}
		if len(gate.fates) == 0 {
			t.Fatalf("%s: nothing happened", name)
		}
	}
}

// sameInstant returns st with its queue's account of requests removed
// (their caller left) added to those that expired there: with min_remaining
// 0, a queued request's deadline and its caller's context end at the same
// instant, and the gate takes it out by whichever of its two timers runs
// first (the core answers and counts it Expired either way).
func sameInstant(st admit.Stats) admit.Stats {
	for _, c := range []*shed.Counts{&st.Queue.FirstTries, &st.Queue.Retries} {
		c.Expired += c.Removed
		c.Removed = 0
	}
	return st
}

// diffCase is a server block and the events fed to it.
type diffCase struct {
	cfg    admit.Config // without Limiter (each side builds its own) and Dials
	aimd   limit.AIMDConfig
	shed   bool // the kill switch sheds everything
	events []diffEvent
}

func (c diffCase) String() string {
	return fmt.Sprintf("{limit %+v queue %+v min_remaining %v max_timeout %v reject %v supersede %v shed %v, %d events}",
		c.aimd, c.cfg.Queue, c.cfg.MinRemaining, c.cfg.MaxTimeout, c.cfg.RejectAtLimit, c.cfg.Supersede != nil, c.shed, len(c.events))
}

// A diffEvent happens at a time since the start; times of events are
// whole milliseconds, and every duration of a case ends on a half, so that
// no timer of the gate falls due at the instant of an event.
type diffEvent struct {
	at      time.Duration
	kind    uint8 // evArrive, evComplete, evLeave
	id      int
	attempt int
	timeout time.Duration // the caller's deadline from its arrival; 0: none
	key     int           // 1, 2: an idempotency key; 0: none
	outcome admit.Outcome
}

const (
	diffArrive uint8 = iota
	diffComplete
	diffLeave
)

func randomDiffCase(rng *rand.Rand) diffCase {
	half := func(lo, hi int) time.Duration { // lo.5 to hi.5 ms
		return time.Duration(lo+rng.IntN(hi-lo+1))*time.Millisecond + 500*time.Microsecond
	}
	var c diffCase
	c.aimd = limit.AIMDConfig{Initial: 1 + rng.IntN(3), Min: 1, Max: 4, BackoffRatio: 0.5, Timeout: half(8, 30)}
	orders := []shed.Order{shed.FIFO, shed.LIFO, shed.AdaptiveLIFO}
	prios := []shed.Priority{shed.FirstTries, shed.NoPriority}
	c.cfg.Queue = shed.Config{Capacity: 1 + rng.IntN(4), Order: orders[rng.IntN(3)], Priority: prios[rng.IntN(2)],
		CoDelTarget: half(2, 4), CoDelInterval: half(8, 12)}
	c.cfg.MaxTimeout = time.Hour
	if rng.IntN(2) == 0 {
		c.cfg.MaxTimeout = half(15, 40)
	}
	if rng.IntN(3) == 0 {
		c.cfg.MinRemaining = half(0, 2)
	}
	c.cfg.RejectAtLimit = rng.IntN(8) == 0
	keys := rng.IntN(2) == 0
	if keys {
		c.cfg.Supersede = &admit.SupersedeConfig{MaxWaiters: 1 + rng.IntN(2)}
	}
	c.shed = rng.IntN(30) == 0
	var at time.Duration
	ids := 0
	for range 20 + rng.IntN(30) {
		at += time.Duration(rng.IntN(4)) * time.Millisecond
		ev := diffEvent{at: at}
		switch x := rng.IntN(10); {
		case x < 5 || ids == 0:
			ids++
			ev.kind, ev.id, ev.attempt = diffArrive, ids, 1+rng.IntN(2)
			if rng.IntN(2) == 0 {
				ev.timeout = half(3, 30)
			}
			if keys && rng.IntN(3) > 0 {
				ev.key = 1 + rng.IntN(2)
			}
		case x < 9:
			ev.kind, ev.id = diffComplete, 1+rng.IntN(ids)
			ev.outcome = []admit.Outcome{admit.Succeeded, admit.Succeeded, admit.Failed, admit.FailedOverload}[rng.IntN(4)]
		default:
			ev.kind, ev.id = diffLeave, 1+rng.IntN(ids)
		}
		c.events = append(c.events, ev)
	}
	return c
}

// diffResult is what one side did with a case.
type diffResult struct {
	fates   []string // "<time> r<id> <fate>", sorted
	samples []string // what the limiter learned, in order
	stats   admit.Stats
	service result.ServiceTotal // the simulator's
}

// recording is a limit algorithm that notes every sample it learns from,
// timed from epoch.
type recording struct {
	limit.Algorithm
	epoch time.Time
	mu    sync.Mutex
	out   []string
}

func (r *recording) Update(s limit.Sample) int {
	r.mu.Lock()
	r.out = append(r.out, fmt.Sprintf("%v rtt %v in-flight %d dropped %v", s.Now.Sub(r.epoch), s.RTT, s.InFlight, s.Dropped))
	r.mu.Unlock()
	return r.Algorithm.Update(s)
}

// newRecording builds c's limiter around a recording AIMD.
func (c diffCase) newRecording(t *testing.T, epoch time.Time) (*recording, *limit.Limiter) {
	t.Helper()
	alg, err := limit.Spec{Kind: limit.KindAIMD, AIMD: c.aimd}.New()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recording{Algorithm: alg, epoch: epoch}
	return rec, limit.NewLimiter(rec)
}

func (c diffCase) dials(t *testing.T) *killswitch.Dials {
	d := new(killswitch.Dials)
	if c.shed {
		if err := d.SetShedFraction(1); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// fate names a decision as both sides log it.
func fate(d admit.Decision) string {
	if d.Admitted() {
		return "admitted"
	}
	if d.Reason != 0 || d.Answer == admit.InstanceOverloaded || d.Answer == admit.ServiceOverloaded || d.Answer == admit.Throttled {
		return fmt.Sprintf("%v (%v)", d.Answer, d.Reason)
	}
	return d.Answer.String()
}

// gateRun feeds c to a production Gate in a synctest bubble.
func gateRun(t *testing.T, c diffCase) (res diffResult) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rec, lim := c.newRecording(t, start)
		cfg := c.cfg
		cfg.Limiter, cfg.Dials = lim, c.dials(t)
		g, err := admit.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			tk admit.Ticket
			d  admit.Decision
			at time.Duration
		}
		type req struct {
			ctx       context.Context
			cancel    context.CancelFunc
			done      chan answer
			tk        admit.Ticket
			running   bool
			completed bool
		}
		reqs := map[int]*req{}
		var fates []string
		collect := func() {
			for id, r := range reqs {
				select {
				case a := <-r.done:
					fates = append(fates, fmt.Sprintf("%v r%d %s", a.at, id, fate(a.d)))
					if a.d.Admitted() {
						r.tk, r.running = a.tk, true
					}
				default:
				}
			}
		}
		for _, ev := range c.events {
			time.Sleep(start.Add(ev.at).Sub(time.Now()))
			synctest.Wait()
			collect()
			switch ev.kind {
			case diffArrive:
				r := &req{done: make(chan answer, 1)}
				if ev.timeout > 0 {
					r.ctx, r.cancel = context.WithDeadline(context.Background(), time.Now().Add(ev.timeout))
				} else {
					r.ctx, r.cancel = context.WithCancel(context.Background())
				}
				reqs[ev.id] = r
				q := admit.Request{Attempt: ev.attempt}
				if ev.key > 0 {
					q.Key, q.KeyScope = fmt.Sprint("k", ev.key), "POST /pay"
				}
				go func() {
					tk, d := g.Admit(r.ctx, time.Now(), q)
					r.done <- answer{tk, d, time.Since(start)}
				}()
			case diffComplete:
				if r := reqs[ev.id]; r.running && !r.completed {
					r.completed = true
					var result any
					if r.tk.Joinable() {
						result = fmt.Sprint("r", ev.id)
					}
					r.tk.ReleaseWith(r.ctx, time.Now(), ev.outcome, result)
				}
			case diffLeave:
				reqs[ev.id].cancel()
			}
			synctest.Wait()
			collect()
		}
		res.samples = rec.out
		res.stats = g.Stats()
		slices.Sort(fates)
		res.fates = fates
		// Let every request go, so that the bubble ends.
		for _, r := range reqs {
			r.cancel()
		}
		synctest.Wait()
		collect()
		for _, r := range reqs {
			if r.running && !r.completed {
				r.tk.Release(r.ctx, time.Now(), admit.Succeeded)
			}
		}
	})
	return res
}

// simRun feeds c to a world with one service that admits through c's
// server block: its workers are ample and its work and network take half an hour,
// so that only the events of c decide.
func simRun(t *testing.T, c diffCase) (res diffResult) {
	t.Helper()
	epoch := wall(0)
	rec, lim := c.newRecording(t, epoch)
	cfg := c.cfg
	cfg.Limiter = lim
	long := scenario.Dist{Kind: "constant", Mean: 30 * time.Minute}
	sc := scenario.Scenario{Name: "diff", Duration: time.Hour,
		Clients: []scenario.Client{{Name: "c", Target: "s", Arrivals: scenario.Arrivals{Kind: "poisson", Rate: 1},
			Timeout: 30 * time.Minute, Network: scenario.Network{Latency: long}}},
		Services: []scenario.Service{{Name: "s", Workers: 10_000, ServiceTime: long, ServerRef: scenario.ServerRef{Server: &cfg}}}}
	if c.cfg.Supersede != nil {
		s := c.cfg.Supersede
		sc.Services[0].Supersede = &scenario.Supersede{Max: s.MaxKeys, TTL: s.TTL, MaxWaiters: s.MaxWaiters}
	}
	sc = sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	w, err := newWorld(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.release()
	v := &w.services[0]
	if c.shed {
		if err := v.dials.SetShedFraction(1); err != nil {
			t.Fatal(err)
		}
	}
	// The attempts' request is over: their answers travel on the client's
	// edge, and reach nobody.
	w.reqs = append(w.reqs, request{})
	type att struct {
		ai        int32
		gen       uint32
		started   bool
		completed bool
	}
	atts := map[int]*att{}
	byAtt := map[int32]int{}
	var fates []string
	note := func(ai int32, what string) {
		fates = append(fates, fmt.Sprintf("%v r%d %s", time.Duration(w.now()), byAtt[ai], what))
	}
	w.traceAnswer = func(ai int32, d admit.Decision) { note(ai, fate(d)) }
	// Starts are read from the attempts after each step: an attempt the
	// core admitted holds a permit until its release.
	started := func() {
		for id, a := range atts {
			if x := w.att(int64(a.ai), int64(a.gen)); x != nil && !a.started && x.inSvc {
				a.started = true
				fates = append(fates, fmt.Sprintf("%v r%d admitted", time.Duration(w.now()), id))
			}
		}
	}
	advance := func(to time.Duration) {
		var ev engine.Event
		for w.eng.NextUntil(engine.Time(to), &ev) {
			w.Handle(&w.eng, ev)
			started()
		}
	}
	leaves := map[time.Duration][]int{} // callers whose deadline passes then
	for _, ev := range c.events {
		// The callers whose deadline passes before the event leave then,
		// as the gate's contexts end.
		for {
			next := time.Duration(-1)
			for at := range leaves {
				if at <= ev.at && (next < 0 || at < next) {
					next = at
				}
			}
			if next < 0 {
				break
			}
			advance(next)
			for _, id := range leaves[next] {
				if a := atts[id]; w.att(int64(a.ai), int64(a.gen)) != nil {
					w.callerLeft(a.ai)
					started()
				}
			}
			delete(leaves, next)
		}
		advance(ev.at)
		switch ev.kind {
		case diffArrive:
			ai := w.allocAttempt()
			a := &w.atts[ai]
			a.svc, a.number, a.waiting = 0, int32(ev.attempt), true
			if ev.timeout > 0 {
				a.deadline = w.now().Add(ev.timeout)
				leaves[ev.at+ev.timeout] = append(leaves[ev.at+ev.timeout], ev.id)
			}
			if ev.key > 0 {
				a.skey = uint64(ev.key)
			}
			atts[ev.id] = &att{ai: ai, gen: a.gen}
			byAtt[ai] = ev.id
			w.deliver(ai)
		case diffComplete:
			a := atts[ev.id]
			if x := w.att(int64(a.ai), int64(a.gen)); x != nil && a.started && !a.completed && x.inSvc {
				a.completed = true
				code := codeOK
				if ev.outcome != admit.Succeeded {
					code = codeError
					x.callFailed = ev.outcome == admit.FailedOverload
				}
				w.complete(a.ai, v, code)
			}
		case diffLeave:
			if a := atts[ev.id]; w.att(int64(a.ai), int64(a.gen)) != nil {
				w.callerLeft(a.ai)
			}
		}
		started()
	}
	res.samples = rec.out
	res.stats = v.reps[0].core.Stats()
	slices.Sort(fates)
	res.fates = fates
	res.service = v.stats.total
	return res
}
