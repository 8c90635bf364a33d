package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
)

// A replica is one instance of a service: its admission (an admit.Core,
// the production gate's core), its workers and their run queue, and its
// capacity law. A service has one or more behind a balancer.
type replica struct {
	core    *admit.Core[int32]  // admission: every decision from arrival to release
	queue   *shed.Queue[uint64] // the run queue: admitted attempts waiting for a worker (their ids; the fast path's fastRefs)
	busy    int                 // workers held: attempts in service and overhead jobs
	inSvc   int                 // attempts in service: working, waiting on calls, or hung
	working int                 // workers doing local work or failure work (worker laws)
	down    bool
	// scaling: a replica scaled down drains, then is retired; a new one
	// boots (down) until its delay has passed and its start-up calls are
	// done.
	draining, retired, booting, delayed bool
	bootLeft                            int
	upAt                                engine.Time // when it last came up (for a cold start)
	epoch                               uint32      // counts crashes; events of an older epoch are stale
	// expiryAt is when an evExpire is scheduled for the run queue, and
	// coreTimer when one is for the core's timer (its last Arm); 0: none.
	expiryAt, coreTimer engine.Time
	// debt is failure work not yet started by a worker (worker laws).
	debt time.Duration
	ps   psState
}

// newReplica builds replica state from the service's spec (also after a
// restart: a fresh core, limiter and queue).
func (v *service) newReplica() (replica, error) {
	cfg, opts := v.admission()
	core, err := admit.NewCore[int32](cfg, opts...)
	if err != nil {
		if v.spec.Server != nil {
			return replica{}, fmt.Errorf("policy_file: server: %w", err)
		}
		return replica{}, fmt.Errorf("admission: %w", err)
	}
	// The run queue: a server block's FIFO, or the scenario's queue, the
	// one a thread pool keeps (see scenario.Service.RunQueue).
	qc := v.spec.RunQueue()
	q, err := shed.New[uint64](qc)
	if err != nil {
		return replica{}, fmt.Errorf("queue: %w", err)
	}
	return replica{core: core, queue: q}, nil
}

// admission returns the configuration of the service's admission core
// (scenario.Service.Admission, which the lab's gate takes too: a policy
// file's server block, or the scenario's own admission), with the
// service's dials; the scenario's own admission without a bound on
// deadlines, and without a limit when it has no limiter.
func (v *service) admission() (admit.Config, []admit.CoreOption) {
	cfg, limited := v.spec.Admission()
	cfg.Dials = v.dials
	opts := []admit.CoreOption{admit.OneGoroutine()}
	if v.spec.Server != nil {
		return cfg, opts
	}
	// Not used (WithoutMaxTimeout); set above any min_remaining, which
	// Validate compares with it.
	cfg.MaxTimeout = math.MaxInt64
	opts = append(opts, admit.WithoutMaxTimeout())
	if !limited {
		opts = append(opts, admit.WithoutLimit())
	}
	return cfg, opts
}

// queued returns the attempts waiting at the replica: in its run queue,
// and in its admission core's queue.
func (r *replica) queued() int { return r.queue.Len() + r.core.Queued() }

// pickReplica returns the replica the balancer sends an attempt to, or
// noID when none is up.
func (v *service) pickReplica() int32 {
	n := int32(len(v.reps))
	if n == 1 {
		if v.reps[0].down || v.reps[0].draining {
			return noID
		}
		return 0
	}
	best := int32(noID)
	for i := range n {
		ri := (v.rr + i) % n
		r := &v.reps[ri]
		if r.down || r.draining {
			continue
		}
		if !v.leastOutstanding {
			best = ri
			break
		}
		if best == noID || r.queue.Len()+r.inSvc < v.reps[best].queue.Len()+v.reps[best].inSvc {
			best = ri
		}
	}
	if best != noID {
		v.rr = (best + 1) % n
	}
	return best
}

// speed is a replica's speed factor now, apart from its thrashing curve:
// capacity triggers and a cold start.
func (w *world) speed(v *service, r *replica) float64 {
	f := v.capacity * v.opSpeed
	if c := v.spec.Crash; c != nil && c.Cold != nil && r.upAt > 0 {
		if since := w.now() - r.upAt; since < engine.Time(c.Cold.Duration) {
			f *= c.Cold.Speed + (1-c.Cold.Speed)*float64(since)/float64(c.Cold.Duration)
		}
	}
	return f
}

// --- failure costs -----------------------------------------------------------

// charge makes replica ri of v do d of failure work before queued work.
func (w *world) charge(v *service, ri int32, d time.Duration) {
	if d <= 0 {
		return
	}
	r := &v.reps[ri]
	if r.down {
		return
	}
	v.stats.overhead[w.binOf(int64(w.now()))] += int64(d)
	v.stats.total.OverheadS += d.Seconds()
	if v.ps {
		// All cores do it first: work in progress stands still meanwhile.
		w.psAdvance(v, ri)
		now := w.now()
		if r.ps.frozen < now {
			r.ps.frozen = now
		}
		r.ps.frozen = r.ps.frozen.Add(time.Duration(float64(d) / (v.cores * w.speed(v, r))))
		w.psReschedule(v, ri)
		return
	}
	r.debt += d
	w.startOverhead(v, ri)
}

// startOverhead puts a free worker on the failure work owed, if any. It is
// a guard small enough to inline: most of the time nothing is owed.
func (w *world) startOverhead(v *service, ri int32) bool {
	return v.reps[ri].debt != 0 && w.startOwed(v, ri)
}

// startOwed is startOverhead for a replica that owes failure work.
func (w *world) startOwed(v *service, ri int32) bool {
	r := &v.reps[ri]
	if r.busy >= v.workers || v.paused > 0 {
		return false
	}
	d := time.Duration(float64(r.debt) / w.speed(v, r))
	w.integrate(v)
	r.debt = 0
	r.busy++
	r.working++
	w.eng.After(d, engine.Event{Kind: evOverheadDone, Target: uint32(v.idx), A: int64(ri), B: int64(r.epoch)})
	return true
}

func (w *world) onOverheadDone(si, ri int32, epoch uint32) {
	v := &w.services[si]
	r := &v.reps[ri]
	if r.epoch != epoch {
		return // the replica crashed meanwhile
	}
	w.integrate(v)
	r.busy--
	r.working--
	w.startNext(v, ri)
}

// --- crashes -----------------------------------------------------------------

// maybeCrash crashes replica ri when its queue has passed the limit.
func (w *world) maybeCrash(v *service, ri int32) {
	if v.spec.Crash != nil {
		w.crashIfOver(v, ri)
	}
}

// crashIfOver is maybeCrash for a service that can crash.
func (w *world) crashIfOver(v *service, ri int32) {
	if v.reps[ri].queued() > v.crashAt {
		w.crash(v, ri)
	}
}

// crash loses the replica's queue and the attempts in service: their
// callers see the connection reset. It restarts Restart later.
func (w *world) crash(v *service, ri int32) {
	w.integrate(v)
	r := &v.reps[ri]
	now := w.now()
	b := w.binOf(int64(now))
	r.down = true
	r.epoch++
	v.stats.total.Crashes++
	v.stats.crashes[b]++
	for {
		it, _, ok := r.queue.PopAt(wall(now))
		if !ok {
			break
		}
		w.lostInCrash(int32(it.Payload), v, b)
	}
	// The core's queued and joined attempts; its state goes with it (a
	// fresh core at the restart).
	for _, ai := range r.core.Drain(wall(now)) {
		w.lostInCrash(ai, v, b)
	}
	if r.busy > 0 {
		for i := range w.atts {
			if a := &w.atts[i]; a.live && a.inSvc && a.svc == int32(v.idx) && a.rep == ri {
				a.inSvc = false
				w.lostInCrash(int32(i), v, b)
			}
		}
	}
	if r.ps.next != (engine.Handle{}) {
		w.eng.Cancel(r.ps.next)
	}
	r.ps = psState{}
	r.busy, r.inSvc, r.working, r.debt, r.expiryAt, r.coreTimer = 0, 0, 0, 0, 0, 0
	w.eng.After(v.spec.Crash.Restart, engine.Event{Kind: evRestart, Target: uint32(v.idx), A: int64(ri), B: int64(r.epoch)})
}

// lostInCrash ends an attempt that a crash lost: it never completes, and
// its caller sees the connection reset.
func (w *world) lostInCrash(ai int32, v *service, b int) {
	a := &w.atts[ai]
	a.hasPermit, a.held, a.ref = false, false, admit.Ref{} // the core is replaced at the restart
	a.decided = true
	v.stats.crashed[b]++
	v.stats.total.Crashed++
	w.reply(ai, v, codeRefused)
}

func (w *world) onRestart(si, ri int32, epoch uint32) {
	v := &w.services[si]
	if old := &v.reps[ri]; old.epoch != epoch || old.retired {
		return // scaled away while it was down
	}
	w.integrate(v)
	r, err := v.newReplica()
	if err != nil {
		panic("sim: a replica that started once cannot restart: " + err.Error())
	}
	r.epoch = v.reps[ri].epoch
	r.upAt = w.now()
	v.reps[ri] = r
}

// --- processor sharing ----------------------------------------------------------

// psState is a processor-sharing replica's state. Every job in service
// progresses at the same rate, so one number, the work v each has received
// since an arbitrary origin, describes them all: a job that needs work s
// and starts when the count is v0 finishes when it reaches v0 + s. The jobs
// wait in a min-heap by that finish tag; one cancelable event marks the
// next finish, and moves whenever the rate changes.
type psState struct {
	jobs   []psJob
	v      float64     // work received by every job in service, ns
	t      engine.Time // when v was last brought up to date
	frozen engine.Time // no progress before this (failure work)
	next   engine.Handle
}

type psJob struct {
	finish float64
	att    int32
	gen    uint32
}

// psRate is the work a job receives per nanosecond now.
func (w *world) psRate(v *service, r *replica) float64 {
	m := float64(len(r.ps.jobs))
	share := 1.0
	if m > v.cores {
		share = v.cores / m
	}
	return share * v.spec.Law.Speed(r.inSvc) * w.speed(v, r)
}

// psAdvance brings the work count of replica ri up to now. It must be
// called before anything that changes the rate.
func (w *world) psAdvance(v *service, ri int32) {
	r := &v.reps[ri]
	now := w.now()
	from := max(r.ps.t, r.ps.frozen)
	if now > from && len(r.ps.jobs) > 0 {
		r.ps.v += float64(now-from) * w.psRate(v, r)
	}
	r.ps.t = now
}

// psReschedule moves the next-finish event to the rate now.
func (w *world) psReschedule(v *service, ri int32) {
	r := &v.reps[ri]
	if r.ps.next != (engine.Handle{}) {
		w.eng.Cancel(r.ps.next)
		r.ps.next = engine.Handle{}
	}
	if len(r.ps.jobs) == 0 {
		return
	}
	rate := w.psRate(v, r)
	left := r.ps.jobs[0].finish - r.ps.v
	at := max(w.now(), r.ps.frozen)
	if left > 0 {
		at = at.Add(time.Duration(math.Ceil(left / rate)))
	}
	r.ps.next = w.eng.AtCancelable(at, engine.Event{Kind: evPSDone, Target: uint32(v.idx), A: int64(ri)})
}

// psStart puts attempt ai in service with work s.
func (w *world) psStart(v *service, ri, ai int32, s time.Duration) {
	w.integrate(v)
	w.psAdvance(v, ri)
	r := &v.reps[ri]
	r.ps.push(psJob{finish: r.ps.v + float64(s), att: ai, gen: w.atts[ai].gen})
	w.psReschedule(v, ri)
}

// onPSDone: the job at the front has had its work (and any others due).
func (w *world) onPSDone(si, ri int32) {
	v := &w.services[si]
	r := &v.reps[ri]
	r.ps.next = engine.Handle{}
	w.integrate(v)
	w.psAdvance(v, ri)
	// Take every job due now off first, then let each go on: going on can
	// start new jobs.
	var done [8]psJob
	n := 0
	for len(r.ps.jobs) > 0 && r.ps.jobs[0].finish <= r.ps.v+0.5 && n < len(done) {
		done[n] = r.ps.pop()
		n++
	}
	if len(r.ps.jobs) == 0 {
		r.ps.v = 0 // rebase while nothing is in service: v stays small
	}
	w.psReschedule(v, ri)
	for _, j := range done[:n] {
		if a := w.att(int64(j.att), int64(j.gen)); a != nil {
			w.workDone(j.att)
		}
	}
}

// psAdvanceAll and psRescheduleAll bracket a change of a processor-sharing
// service's speed (a capacity trigger).
func (w *world) psAdvanceAll(v *service) {
	if v.ps {
		for ri := range v.reps {
			w.psAdvance(v, int32(ri))
		}
	}
}

func (w *world) psRescheduleAll(v *service) {
	if v.ps {
		for ri := range v.reps {
			if !v.reps[ri].down {
				w.psReschedule(v, int32(ri))
			}
		}
	}
}

func (p *psState) push(j psJob) {
	p.jobs = append(p.jobs, j)
	i := len(p.jobs) - 1
	for i > 0 {
		up := (i - 1) / 2
		if p.jobs[up].finish <= p.jobs[i].finish {
			break
		}
		p.jobs[up], p.jobs[i] = p.jobs[i], p.jobs[up]
		i = up
	}
}

func (p *psState) pop() psJob {
	top := p.jobs[0]
	last := len(p.jobs) - 1
	p.jobs[0] = p.jobs[last]
	p.jobs = p.jobs[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		c := l
		if r := l + 1; r < last && p.jobs[r].finish < p.jobs[l].finish {
			c = r
		}
		if p.jobs[i].finish <= p.jobs[c].finish {
			break
		}
		p.jobs[i], p.jobs[c] = p.jobs[c], p.jobs[i]
		i = c
	}
	return top
}
