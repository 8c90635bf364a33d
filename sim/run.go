package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Run simulates one run of a scenario and judges it. name labels the
// result. progress, if not nil, is called with the fraction of virtual time
// done, at most about 100 times. Run returns ctx's error if ctx is done
// before the end. The same scenario (with the same seed) always gives the
// same Result. A scenario beyond [DefaultLimits] is refused with a
// *[LimitError] (see [RunWithin]).
func Run(ctx context.Context, s scenario.Scenario, name string, progress func(frac float64)) (result.Result, error) {
	return RunWithin(ctx, s, name, progress, DefaultLimits)
}

// cancelEvery is how many events a run handles between two looks at its
// context: a few hundred microseconds of simulation.
const cancelEvery = 1 << 10

// RunWithin is [Run] within the limits l (zero fields: the defaults): it
// refuses, with a *[LimitError] and before it allocates the run, a
// scenario whose [Estimate] exceeds them. Whatever the scenario, it
// returns soon after ctx is done: it looks at ctx every 1024 events.
func RunWithin(ctx context.Context, s scenario.Scenario, name string, progress func(frac float64), l Limits) (result.Result, error) {
	return simulate(ctx, s, name, runOpts{progress: progress, limits: l})
}

// RunJudged is [RunWithin] for a caller that needs only the verdict (and
// the recovery time) of the run, as a sweep's searches do: it stops the
// run as soon as the verdict can no longer change — when, from the end of
// some bin on, no request of any client can succeed before the end, which
// the simulator proves with a bound on how fast the stuck service's queue
// can drain (see docs/simulator.md, "Stopping a settled run"). The verdict
// is then metastable, as the whole run's would be, Result.StoppedS says
// when it stopped, Why says why, and the series end there. Runs that are
// not proven stuck are simulated to the end and give the same Result as
// RunWithin.
func RunJudged(ctx context.Context, s scenario.Scenario, name string, l Limits) (result.Result, error) {
	return simulate(ctx, s, name, runOpts{limits: l, judged: true})
}

// RunSpooled is [RunWithin] for a caller that writes the run's series out
// (`stormguard sim --json` and --out): as each bin closes its series go
// to sp instead of staying in memory, and the Result's series read them
// back from it (their Stream is set, their Bins nil; see
// [result.ClientSeries]), so that what the run holds is its state, not its
// length: of its bins it keeps only the requests that ended by the bin
// they arrived in (16 bytes a bin and client), which its verdict reads
// and the series' arrived_ok and arrived_failed report. The Result is
// otherwise RunWithin's, and [result.WriteJSON] writes it as encoding/json
// writes RunWithin's. sp must stay open while the Result is read; an error
// writing to it is the run's.
func RunSpooled(ctx context.Context, s scenario.Scenario, name string, progress func(frac float64), l Limits, sp *result.Spool) (result.Result, error) {
	r, err := simulate(ctx, s, name, runOpts{progress: progress, limits: l, spool: sp})
	if err == nil {
		err = sp.Err()
	}
	return r, err
}

// runOpts is how simulate runs.
type runOpts struct {
	progress func(frac float64) // may be nil
	limits   Limits
	judged   bool          // RunJudged
	general  bool          // never on the fast path (tests)
	spool    *result.Spool // RunSpooled
}

// simulate runs s, on the fast path (fast.go) when the scenario has its
// shape and o allows.
func simulate(ctx context.Context, s scenario.Scenario, name string, o runOpts) (result.Result, error) {
	progress, l, judged := o.progress, o.limits, o.judged
	if err := s.Validate(); err != nil {
		return result.Result{}, err
	}
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		return result.Result{}, err
	}
	cost := Estimate(s)
	if o.spool != nil {
		cost = EstimateSpooled(s)
	}
	if err := l.Check(cost); err != nil {
		return result.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return result.Result{}, err
	}
	w, err := newWorld(s, o.spool)
	if err != nil {
		return result.Result{}, err
	}
	defer w.release() // the next run reuses its arrays, however this one ends
	if !o.general && !judged && fastShape(&w.sc) == "" {
		return w.runFast(ctx, name, progress)
	}
	w.startEvents()
	every := max(1, w.nbins/100)
	var ev engine.Event
	bins, n := 0, 0
	// A judged run looks, at the end of each bin once the system can no
	// longer change, whether its verdict is settled (stuck.go).
	var quiet engine.Time
	var memo []uint8
	if judged && w.stuckPossible() {
		quiet, memo = w.quietFrom(), make([]uint8, len(w.services))
	}
	for w.eng.NextUntil(w.end, &ev) {
		w.Handle(&w.eng, ev)
		if n++; n == cancelEvery {
			n = 0
			if err := ctx.Err(); err != nil {
				return result.Result{}, err
			}
		}
		if ev.Kind == evBin {
			bins++
			if bins%every == 0 && progress != nil {
				progress(float64(w.eng.Now()) / float64(w.end))
			}
			if memo != nil && w.eng.Now() >= quiet {
				if why, ok := w.settledStuck(memo); ok {
					return w.stop(name, why), nil
				}
			}
		}
	}
	// The last bin closes at the end of the run.
	r := w.finish(name)
	if progress != nil {
		progress(1)
	}
	return r, nil
}

// startEvents schedules the triggers, the first arrivals and the bins.
// Triggers are scheduled first, so that a trigger takes effect before
// anything else that happens at the same instant.
func (w *world) startEvents() {
	for i, t := range w.sc.Triggers {
		w.eng.At(engine.Time(t.At), engine.Event{Kind: evTriggerOn, Target: uint32(i)})
		w.eng.At(engine.Time(t.At+t.Duration), engine.Event{Kind: evTriggerOff, Target: uint32(i)})
	}
	w.startRunbook()
	for i := range w.clients {
		c := &w.clients[i]
		a := c.spec.Arrivals
		switch a.Kind {
		case "burst":
			w.eng.At(engine.Time(a.At), engine.Event{Kind: evArrive, Target: uint32(i)})
		case "closed":
			for u := range a.Users {
				// Users start spread over one think time.
				t := engine.Time(0).Add(sample(&a.Think, &c.rng))
				w.eng.At(engine.Time(float64(t)*c.rng.Float64()), engine.Event{Kind: evThink, Target: uint32(i), A: int64(u)})
			}
		default:
			w.scheduleArrival(int32(i))
		}
	}
	w.eng.At(engine.Time(w.bin), engine.Event{Kind: evBin})
}

// finish closes the books: requests still in flight, and the verdict.
func (w *world) finish(name string) result.Result {
	if w.spool != nil {
		w.flushBins(w.nbins-1, true)
	}
	for i := range w.reqs {
		r := &w.reqs[i]
		if r.live && w.edges[r.edge].client >= 0 && r.intent == noID {
			w.clients[w.edges[r.edge].client].stats.total.InFlight++
		}
	}
	for i := range w.intents {
		if it := &w.intents[i]; it.live {
			w.clients[it.client].stats.total.InFlight++
		}
	}
	for i := range w.atts {
		a := &w.atts[i]
		if a.live && a.arrived && !a.decided {
			w.services[a.svc].stats.total.InSystem++
		}
	}
	res := w.result(name)
	result.Judge(&res, w.sc)
	return res
}

// stop ends a judged run at the end of the current bin, its verdict
// settled for the reason why (see RunJudged): judged as the whole run
// would be, every request from now on failed (result.JudgeStopped).
func (w *world) stop(name, why string) result.Result {
	now := w.now()
	whole := w.sc
	w.nbins = int(now / engine.Time(w.bin))
	w.end, w.sc.Duration = now, time.Duration(now)
	r := w.finish(name)
	result.JudgeStopped(&r, whole)
	r.Why += " (" + why + ")"
	at := time.Duration(now).Seconds()
	r.StoppedS = &at
	return r
}

// String names the run for errors.
func (w *world) String() string { return fmt.Sprintf("run of %s", w.sc.Name) }
