package sim

import (
	"github.com/stormguard/stormguard/sim/engine"
)

// People who tap again (Paper 08's banking app: "swipe down to refresh or
// tap the transfer button five or six times in a row"). The server defense
// against them, request supersession, is the admission core's (admit.go).

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
	if p := sample(&c.spec.Humans.Patience, &c.rng); it.taps < int32(c.spec.Humans.Taps) {
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
		w.clientOutcome(c, it.arrival, w.now(), true, degraded, nil)
	case it.taps < int32(c.spec.Humans.Taps):
		w.tap(id) // an error on the screen: the person taps again
		return
	case it.pending == 0:
		it.live = false
		w.clientOutcome(c, it.arrival, w.now(), false, false, reason)
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
