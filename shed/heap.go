package shed

import "time"

// The expiry heap is a 4-ary min-heap of the items that can expire, ordered
// by (due instant, push sequence), so that items due at the same instant
// leave in push order. Entries carry their sort key inline, so sifting
// touches the heap array and not the slots, except to record each slot's
// position for O(log n) removal.
//
// The key is the due instant as nanoseconds since the queue's epoch, the now
// of the first push that had a due instant: time.Time.Sub uses the monotonic
// clock when both readings carry it, so production keys are immune to
// wall-clock steps just as time.Time comparisons are. The slot keeps the
// due instant itself, which decides whether the item is due.

type heapEntry struct {
	key  int64 // due − epoch, in nanoseconds
	seq  uint64
	slot int32
}

func (e heapEntry) less(f heapEntry) bool {
	return e.key < f.key || e.key == f.key && e.seq < f.seq
}

// heapPush adds slot i, due at due and pushed at now.
func (q *Queue[T]) heapPush(now, due time.Time, i int32) {
	if !q.hasEpoch {
		q.epoch, q.hasEpoch = now, true
	}
	j := len(q.heap)
	q.heap = append(q.heap, heapEntry{key: int64(due.Sub(q.epoch)), seq: q.slots[i].seq, slot: i}) // grows with the slots, then never again
	q.slots[i].pos = int32(j)
	q.up(j)
}

func (q *Queue[T]) heapRemove(j int) {
	last := len(q.heap) - 1
	q.slots[q.heap[j].slot].pos = noSlot
	if j != last {
		q.heap[j] = q.heap[last]
		q.slots[q.heap[j].slot].pos = int32(j)
	}
	q.heap = q.heap[:last]
	if j != last && !q.down(j) {
		q.up(j)
	}
}

func (q *Queue[T]) up(j int) {
	h := q.heap
	e := h[j]
	for j > 0 {
		p := (j - 1) / 4
		if !e.less(h[p]) {
			break
		}
		h[j] = h[p]
		q.slots[h[j].slot].pos = int32(j)
		j = p
	}
	h[j] = e
	q.slots[e.slot].pos = int32(j)
}

// down sifts j down and reports whether it moved.
func (q *Queue[T]) down(j int) bool {
	h := q.heap
	e, start, n := h[j], j, len(h)
	for {
		c := 4*j + 1
		if c >= n {
			break
		}
		for k, last := c+1, min(c+4, n); k < last; k++ {
			if h[k].less(h[c]) {
				c = k
			}
		}
		if !h[c].less(e) {
			break
		}
		h[j] = h[c]
		q.slots[h[j].slot].pos = int32(j)
		j = c
	}
	h[j] = e
	q.slots[e.slot].pos = int32(j)
	return j != start
}
