package sim

import (
	"sync"

	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/engine"
)

// runBuffers is the memory a run grows as its load grows: the tables of
// attempts and requests with their free lists, the replicas' queues and the
// engine's heap and timeout rings. A sweep runs hundreds of runs one after
// another on each worker; each takes the buffers the last one gave back, so
// that it does not grow (allocate, copy, clear, and have the collector
// scan) the same arrays again.
//
// Reuse changes no result: a run starts its tables empty (appending to a
// reused array writes a zero slot, as growing a new one does), so slots,
// generation counters and handles take the values they would in a new
// array; the queues and the engine clear what they reuse themselves (see
// [shed.Queue.Reuse], [engine.Engine.Reuse]).
type runBuffers struct {
	atts    []attempt
	reqs    []request
	freeAtt []int32
	freeReq []int32
	queues  []*shed.Queue[uint64] // the replicas' queues, service by service
	eng     *engine.Storage
}

// buffers holds the buffers of finished runs. A sync.Pool lets the
// collector drop them: a program that ran one big simulation does not keep
// its memory for long.
var buffers sync.Pool

// takeBuffers gives w the buffers of a finished run, if there is one. It is
// called in newWorld before the engine makes its first fixed queue.
func (w *world) takeBuffers() *runBuffers {
	b, _ := buffers.Get().(*runBuffers)
	if b == nil {
		return nil
	}
	w.atts, w.reqs = b.atts[:0], b.reqs[:0]
	w.freeAtt, w.freeReq = b.freeAtt[:0], b.freeReq[:0]
	w.eng.Reuse(b.eng)
	return b
}

// reuseQueues hands the queues of b to w's replicas, in order.
func (w *world) reuseQueues(b *runBuffers) {
	if b == nil {
		return
	}
	k := 0
	for i := range w.services {
		for j := range w.services[i].reps {
			if k == len(b.queues) {
				return
			}
			w.services[i].reps[j].queue.Reuse(b.queues[k])
			k++
		}
	}
}

// release gives w's buffers back for the next run, once its result is
// made. w must not be used afterwards.
func (w *world) release() {
	b := &runBuffers{atts: w.atts, reqs: w.reqs, freeAtt: w.freeAtt, freeReq: w.freeReq, eng: w.eng.Release()}
	for i := range w.services {
		for _, r := range w.services[i].reps {
			b.queues = append(b.queues, r.queue)
		}
	}
	w.atts, w.reqs, w.freeAtt, w.freeReq = nil, nil, nil, nil
	buffers.Put(b)
}
