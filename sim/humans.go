package sim

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/supersede"
)

// People who tap again (Paper 08's banking app: "swipe down to refresh or
// tap the transfer button five or six times in a row"), and the server
// defense against them, request supersession (the supersede package).

// Humans makes a client's arrivals people rather than programs: each
// arrival is one person's intent, who sends a request (a tap) and, if no
// answer has come within a patience drawn from Patience, or an error came
// back, taps again — a new request, a first try to the server, with no
// backoff and no budget — up to Taps taps in all, while the earlier ones
// still wait. The person succeeds when any tap succeeds; the intent is what
// demand, goodput and the verdict count. Each tap goes through the client's
// policy like any request.
type Humans struct {
	Patience Dist `yaml:"patience" json:"patience"`
	Taps     int  `yaml:"taps" json:"taps"`
}

func (h *Humans) validate() error {
	if h.Taps < 1 || h.Taps > 100 {
		return &FieldError{"taps", fmt.Sprintf("%d is outside [1, 100]", h.Taps)}
	}
	if err := h.Patience.validate(); err != nil {
		var f fieldErrs
		f.wrap(err, "patience")
		return f[0]
	}
	if h.Patience.mean() <= 0 {
		return &FieldError{"patience", "a person's patience must be longer than 0"}
	}
	return nil
}

// Supersede turns on request supersession at a service: an arriving
// attempt whose idempotency key (a client's idempotency_key) matches an
// attempt still queued replaces it (the older is answered "superseded",
// which its caller does not retry), and one whose twin is in service waits
// for that result instead of running again. At most Max keys [100000],
// each forgotten TTL after it was last seen [1m], and at most MaxWaiters
// attempts waiting for one key's twin in service [16]: one more is refused
// at once and answered shed, as the production gate refuses it (Throttled,
// admit.ShedKeyBusy).
type Supersede struct {
	Max        int           `yaml:"max,omitempty" json:"max,omitempty"`
	TTL        time.Duration `yaml:"ttl,omitempty" json:"ttl_ns,omitempty"`
	MaxWaiters int           `yaml:"max_waiters,omitempty" json:"max_waiters,omitempty"`
}

// table builds the service's supersession table from s.
func (s *Supersede) table() *supersede.Table[uint64, int32] {
	return supersede.New[uint64, int32](s.Max, s.TTL, supersede.WithMaxWaiters(s.MaxWaiters))
}

func (s *Supersede) validate() error {
	if s.Max < 0 || s.Max > 10_000_000 {
		return &FieldError{"max", fmt.Sprintf("%d is outside [0, 1e7]", s.Max)}
	}
	if s.TTL < 0 {
		return &FieldError{"ttl", "must not be negative"}
	}
	if s.MaxWaiters < 0 || s.MaxWaiters > 1024 {
		return &FieldError{"max_waiters", fmt.Sprintf("%d is outside [0, 1024]", s.MaxWaiters)}
	}
	return nil
}

// intent is one person's wish: the taps sent for it and how it ended.
type intent struct {
	client  int32
	proc    int32
	arrival engine.Time
	key     uint64
	taps    int32 // sent
	pending int32 // taps not ended
	gen     uint32
	live    bool
}

// startIntent begins a person's intent and sends the first tap.
func (w *world) startIntent(ci, proc int32) {
	var id int32
	if n := len(w.freeIntent); n > 0 {
		id = w.freeIntent[n-1]
		w.freeIntent = w.freeIntent[:n-1]
	} else {
		w.intents = append(w.intents, intent{})
		id = int32(len(w.intents) - 1)
	}
	it := &w.intents[id]
	w.nextKey++
	*it = intent{client: ci, proc: proc, arrival: w.now(), key: w.nextKey, gen: it.gen + 1, live: true}
	w.tap(id)
}

// tap sends the intent's next tap and arms the person's patience.
func (w *world) tap(id int32) {
	it := &w.intents[id]
	c := &w.clients[it.client]
	it.taps++
	it.pending++
	if it.taps > 1 {
		c.stats.total.HumanRetries++
	}
	gen := it.gen
	if p := c.spec.Humans.Patience.sample(&c.rng); it.taps < int32(c.spec.Humans.Taps) {
		if t := w.now().Add(p); t < w.end {
			w.eng.At(t, engine.Event{Kind: evPatience, A: int64(id), B: int64(gen)<<8 | int64(it.taps&0xff)})
		}
	}
	var deadline engine.Time
	if e := &w.edges[c.edge]; e.deadline > 0 {
		deadline = w.now().Add(e.deadline)
	}
	w.newRequest(c.edge, it.proc, origin{parent: noID, user: noID, boot: noID, intent: id, intentGen: gen}, deadline)
}

// onPatience: the person has waited long enough for tap n: tap again.
func (w *world) onPatience(id int32, b uint32) {
	it := &w.intents[id]
	if !it.live || it.gen != b>>8 || it.taps != int32(b&0xff) {
		return // over, or tapped again already (after an error)
	}
	w.tap(id)
}

// tapDone: one tap of intent id ended.
func (w *world) tapDone(id int32, gen uint32, ok, degraded bool, reason error) {
	it := &w.intents[id]
	if it.gen != gen {
		return
	}
	it.pending--
	if !it.live {
		if it.pending == 0 {
			w.freeIntent = append(w.freeIntent, id)
		}
		return
	}
	c := &w.clients[it.client]
	switch {
	case ok:
		it.live = false
		w.clientOutcome(c, it.arrival, true, degraded, nil)
	case it.taps < int32(c.spec.Humans.Taps):
		w.tap(id) // an error on the screen: the person taps again
		return
	case it.pending == 0:
		it.live = false
		w.clientOutcome(c, it.arrival, false, false, reason)
	default:
		return // the last taps still wait
	}
	if it.pending == 0 {
		w.freeIntent = append(w.freeIntent, id)
	}
}

// requestKey is the idempotency key a new request's attempts carry: the
// person's intent's (every tap the same), or one of its own, when the edge's
// client sets keys; 0 otherwise. intent is the request's origin's intent
// (the origin itself is not passed: copying it whole stalled).
func (w *world) requestKey(ei, intent int32) uint64 {
	e := &w.edges[ei]
	if e.client < 0 || !w.clients[e.client].spec.IdempotencyKey {
		return 0
	}
	if intent != noID {
		return w.intents[intent].key
	}
	w.nextKey++
	return w.nextKey
}

// --- supersession at the server ---------------------------------------------

// supersedeAt runs an arriving attempt through the service's supersession
// table, before it would start (queued false) or join the queue; it returns
// true when the table took care of it: it took a queued twin's place,
// waits for a twin in service, or was refused because MaxWaiters already
// wait for that twin. A refused attempt is answered shed at once (codeShed,
// counted Shed, with the failure work of a refusal), as the production gate
// answers it Throttled and counts it shed (admit.ShedKeyBusy): it is not
// served without its key.
func (w *world) supersedeAt(ai int32, v *service, queued bool) bool {
	a := &w.atts[ai]
	d := v.sup.ArriveAt(wall(w.now()), a.skey, ai, queued)
	switch d.Action {
	case supersede.Serve:
		a.tracked = true
	case supersede.Replace:
		old := &w.atts[d.Old]
		if !old.tracked || old.inSvc {
			// The twin is no longer queued (it started at this very
			// instant): serve the newcomer as it would be.
			a.tracked = true
			return false
		}
		// The newcomer takes the twin's place in its queue (its gate's,
		// with a ServerRef), and its permit.
		var ok bool
		if g := v.reps[old.rep].gate; g != nil {
			_, ok = g.Swap(old.qh, ai)
		} else {
			_, ok = v.reps[old.rep].queue.Swap(old.qh, ai)
		}
		if !ok {
			a.tracked = true
			return false
		}
		if a.hasPermit {
			a.permit.IgnoreAt(wall(w.now()))
		}
		a.permit, a.hasPermit = old.permit, old.hasPermit
		old.hasPermit = false
		a.rep, a.qh, a.tracked = old.rep, old.qh, true
		old.tracked = false
		w.superseded(d.Old, v)
		return true
	case supersede.Join:
		if a.hasPermit {
			a.permit.IgnoreAt(wall(w.now()))
			a.hasPermit = false
		}
		a.decided = true // its fate is its twin's
		v.stats.total.Joined++
		return true
	case supersede.Refuse:
		w.reject(ai, v, v.spec.FailureCost.Refuse)
		return true
	}
	return false
}

// superseded answers a queued attempt a newer twin replaced.
func (w *world) superseded(ai int32, v *service) {
	a := &w.atts[ai]
	if a.hasPermit {
		a.permit.IgnoreAt(wall(w.now()))
		a.hasPermit = false
	}
	a.decided = true
	v.stats.total.Superseded++
	v.stats.superseded[w.binOf(int64(w.now()))]++
	w.reply(ai, v, codeSuperseded)
}

// settle answers the attempts that joined tracked attempt ai, now that it
// ended with code (codeNone: dropped without an answer).
// It is a guard small enough to inline: most attempts are not tracked.
func (w *world) settle(ai int32, v *service, code int) {
	if w.atts[ai].tracked {
		w.settleTracked(ai, v, code)
	}
}

// settleTracked is settle for a tracked attempt.
func (w *world) settleTracked(ai int32, v *service, code int) {
	a := &w.atts[ai]
	a.tracked = false
	for _, j := range v.sup.DoneAt(wall(w.now()), a.skey) {
		if code == codeNone {
			w.srvDone(j)
			continue
		}
		w.reply(j, v, code)
	}
}
