package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
)

// A replica is one instance of a service: its workers, queue, limiter and
// capacity law. A service has one or more behind a balancer.
type replica struct {
	queue   *shed.Queue[int32] // with a gate: the run queue of admitted attempts waiting for a worker
	limiter *limit.Limiter
	gate    *admit.Core[int32] // admission from a policy file's server block (ServerRef); nil: none
	busy    int                // workers held: attempts in service and overhead jobs
	inSvc   int                // attempts in service: working, waiting on calls, or hung
	working int                // workers doing local work or failure work (worker laws)
	down    bool
	// scaling: a replica scaled down drains, then is retired; a new one
	// boots (down) until its delay has passed and its start-up calls are
	// done.
	draining, retired, booting, delayed bool
	bootLeft                            int
	upAt                                engine.Time // when it last came up (for a cold start)
	epoch                               uint32      // counts crashes; events of an older epoch are stale
	// expiryAt is when an evExpire is scheduled; 0: none.
	expiryAt engine.Time
	// debt is failure work not yet started by a worker (worker laws).
	debt time.Duration
	ps   psState
}

// newReplica builds replica state from the service's spec (also after a
// restart: a fresh queue and limiter).
func (v *service) newReplica() (replica, error) {
	if v.spec.Server != nil {
		return v.newGateReplica()
	}
	q, err := shed.New[int32](v.spec.Queue.ShedConfig(v.spec.MinRemaining))
	if err != nil {
		return replica{}, fmt.Errorf("queue: %w", err)
	}
	r := replica{queue: q}
	if v.spec.Limiter != nil {
		alg, err := v.spec.Limiter.New()
		if err != nil {
			return replica{}, fmt.Errorf("limiter: %w", err)
		}
		r.limiter = limit.NewLimiter(alg, limit.WithDials(v.dials))
	}
	return r, nil
}

// newGateReplica builds a replica that admits through an admit.Core of
// the service's server block, with a FIFO run queue (in effect unbounded,
// no deadlines: admitted work is never dropped) in front of its workers.
func (v *service) newGateReplica() (replica, error) {
	cfg := *v.spec.Server
	cfg.Dials = v.dials
	g, err := admit.NewCore[int32](cfg)
	if err != nil {
		return replica{}, fmt.Errorf("policy_file: server: %w", err)
	}
	q, err := shed.New[int32](QueueSpec{}.ShedConfig(0))
	if err != nil {
		return replica{}, fmt.Errorf("run queue: %w", err)
	}
	return replica{queue: q, gate: g, limiter: g.Limiter()}, nil
}

// queued returns the attempts waiting at the replica: in its queue, and
// in its gate's.
func (r *replica) queued() int {
	n := r.queue.Len()
	if r.gate != nil {
		n += r.gate.Queued()
	}
	return n
}

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
		w.lostInCrash(it.Payload, v, b)
	}
	for r.gate != nil {
		ai, ok := r.gate.TakeAt(wall(now))
		if !ok {
			break
		}
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
	r.busy, r.inSvc, r.working, r.debt, r.expiryAt = 0, 0, 0, 0, 0
	w.eng.After(v.spec.Crash.Restart, engine.Event{Kind: evRestart, Target: uint32(v.idx), A: int64(ri), B: int64(r.epoch)})
}

// lostInCrash ends an attempt that a crash lost: it never completes, and
// its caller sees the connection reset.
func (w *world) lostInCrash(ai int32, v *service, b int) {
	a := &w.atts[ai]
	if a.hasPermit {
		a.hasPermit = false // the limiter is replaced at the restart
	}
	a.decided = true
	v.stats.crashed[b]++
	v.stats.total.Crashed++
	w.settle(ai, v, codeRefused)
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
	return share * v.spec.Law.speed(r.inSvc) * w.speed(v, r)
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
