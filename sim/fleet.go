package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/fleet/alloc"
	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
)

// fleetPool is the store's side of a fleet budget: the allocation rule's
// state, and the processes.
type fleetPool struct {
	state  alloc.State
	params alloc.Params
	am     alloc.Amounts
	procs  []*leaseBudget
}

// level is the fleet's fill: the pool plus what every process holds, over
// the capacity.
func (f *fleetPool) level() float64 {
	sum := f.state.Level
	for _, p := range f.procs {
		sum += p.k.Hold
	}
	return float64(sum) / float64(f.am.Capacity)
}

// step applies m at virtual time now.
func (f *fleetPool) step(m alloc.Message, now engine.Time) alloc.Answer {
	a, err := alloc.Step(&f.state, f.params, m, int64(now)/1000, "sim")
	if err != nil {
		// Every process shares the spec: a SpecError cannot happen.
		panic(err)
	}
	return a
}

// leaseBudget is one process's side: a budget.Budget the retrier charges,
// the process's client core and its amounts.
type leaseBudget struct {
	w            *world
	fleet        *fleetPool
	client, proc int32
	sync         time.Duration
	core         *alloc.Client
	k            alloc.Counts
	tickets      [3]budget.Ticket
	inflight     bool
	msg          alloc.Message // in flight
	ans          alloc.Answer  // on its way back
	wake         engine.Time   // the earliest wake scheduled (0: none)
	busy         bool          // the last look set a low-water mark: the process retries often
	lowWater     int64
}

func newFleet(w *world, ci int32, procs int, spec budget.Spec, f scenario.FleetSpec) *fleetPool {
	am, err := alloc.FromSpec(spec)
	if err != nil {
		panic(err) // validated with the scenario
	}
	if f.Sync == 0 {
		f.Sync = 5 * time.Millisecond
	}
	lease := am.DefaultLease()
	if f.Lease > 0 {
		lease = alloc.Milli(f.Lease)
	}
	rate := int64(alloc.DefaultRate)
	if f.RoundTrips > 0 {
		rate = int64(f.RoundTrips)
	}
	fp := &fleetPool{params: am.Params(rate, alloc.DefaultHeartbeat), am: am}
	for i := range procs {
		core, err := alloc.NewClient(am.ClientConfig(fmt.Sprint(i), lease, alloc.DefaultLeaseTTL, alloc.DefaultHeartbeat, rate))
		if err != nil {
			panic(err)
		}
		l := &leaseBudget{w: w, fleet: fp, client: ci, proc: int32(i), sync: f.Sync, core: core, lowWater: math.MinInt64}
		for c := range l.tickets {
			l.tickets[c] = budget.NewTicket(int32(am.Cost[c]))
		}
		fp.procs = append(fp.procs, l)
	}
	fp.join(w)
	return fp
}

// join sends every process's first message, spread over the first
// heartbeat so that they do not all arrive at once.
func (f *fleetPool) join(w *world) {
	for _, l := range f.procs {
		at := engine.Time(int64(alloc.DefaultHeartbeat) * int64(l.proc) / int64(len(f.procs)))
		w.eng.At(at, engine.Event{Kind: evFleetGrant, Target: uint32(l.client), A: int64(l.proc), B: fleetWake})
	}
}

// BeginAt does nothing: a first attempt costs nothing.
func (l *leaseBudget) BeginAt(time.Time) {}

// RetryAt pays from what the process holds; if that is too little, it asks
// the store at once (see scenario.FleetSpec), unless the store told it to wait or a
// message of it is in flight.
func (l *leaseBudget) RetryAt(_ time.Time, c budget.Cause) (budget.Ticket, bool) {
	i := c
	if int(i) >= len(l.tickets) {
		i = budget.Transient
	}
	cost := l.fleet.am.Cost[i]
	now := l.w.eng.Now()
	l.k.Asked += cost
	if l.k.Hold >= cost {
		l.k.Hold -= cost
		if l.k.Hold < l.lowWater {
			l.look(now)
		}
		return l.tickets[i], true
	}
	ok := false
	if !l.inflight && !l.core.BackingOff(int64(now)) {
		// The round trip a waiting retry makes, taken as instant.
		l.k.Waiting += cost
		m := l.message(now)
		l.receive(now, l.fleet.step(m, now))
		l.k.Waiting -= cost
		if l.k.Hold >= cost {
			l.k.Hold -= cost
			ok = true
		}
	}
	l.look(now)
	if ok {
		return l.tickets[i], true
	}
	return budget.Ticket{}, false
}

// EndAt collects rewards and what goes back (refunds), as package fleet
// does: a busy process keeps a refund in its lease.
func (l *leaseBudget) EndAt(_ time.Time, o budget.Outcome, t budget.Ticket) {
	switch {
	case !t.Retry() && o == budget.Success:
		l.k.Credit += l.fleet.am.Reward
	case t.Retry() && (o == budget.Ignore || o == budget.Success && l.fleet.am.Refund):
		if l.busy {
			l.k.Hold += int64(t.Data())
		} else {
			l.k.Back += int64(t.Data())
		}
	default:
		return
	}
	l.look(l.w.eng.Now())
}

// NeedsClock reports false: the lease counts tokens.
func (l *leaseBudget) NeedsClock() bool { return false }

// message builds the process's next message (the one in flight, if its
// answer was lost: never in the simulator).
func (l *leaseBudget) message(now engine.Time) alloc.Message {
	m, _ := l.core.Message(int64(now), l.k.Credit, l.k.Back, l.k)
	l.k.Credit, l.k.Back = 0, 0
	return m
}

// receive applies an answer.
func (l *leaseBudget) receive(now engine.Time, a alloc.Answer) {
	l.k.Hold += l.core.Apply(int64(now), a)
}

// look asks the client core what to do now, and does it.
func (l *leaseBudget) look(now engine.Time) {
	if l.inflight {
		return
	}
	act := l.core.Decide(int64(now), l.k)
	if act.Expire {
		l.k.Back += l.k.Hold
		l.k.Hold = 0
	}
	l.lowWater = act.LowWater
	l.busy = act.LowWater != math.MinInt64
	if act.Send {
		l.msg = l.message(now)
		l.inflight = true
		l.w.eng.After(l.sync, engine.Event{Kind: evFleetSync, Target: uint32(l.client), A: int64(l.proc)})
		return
	}
	if act.Wake != math.MaxInt64 && (l.wake <= now || engine.Time(act.Wake) < l.wake) {
		l.wake = engine.Time(act.Wake)
		l.w.eng.At(l.wake, engine.Event{Kind: evFleetGrant, Target: uint32(l.client), A: int64(l.proc), B: fleetWake})
	}
}

// fleetAnswer and fleetWake tell the two uses of evFleetGrant apart.
const (
	fleetAnswer = 0
	fleetWake   = 1
)

// onFleetSync: a process's message reaches the store.
func (w *world) onFleetSync(ci int32, pi int64, _ int64) {
	f := w.clients[ci].fleet
	l := f.procs[pi]
	l.ans = f.step(l.msg, w.eng.Now())
	w.eng.After(l.sync, engine.Event{Kind: evFleetGrant, Target: uint32(ci), A: pi, B: fleetAnswer})
}

// onFleetGrant: the store's answer reaches the process, or the process
// looks again.
func (w *world) onFleetGrant(ci int32, pi int64, what int64) {
	l := w.clients[ci].fleet.procs[pi]
	now := w.eng.Now()
	if what == fleetAnswer {
		l.inflight = false
		l.receive(now, l.ans)
	} else if l.wake == now {
		l.wake = 0
	}
	l.look(now)
}
