package alloc

import (
	"container/heap"
	"sort"
)

// zset is a sorted set of members scored by a time, ordered as Redis orders
// a sorted set (by score, then by the member's bytes), so that the core
// visits members in the order the Lua script does. A map holds each
// member's score; a min-heap with lazy deletion finds the lowest.
type zset struct {
	score map[string]int64
	h     zheap
}

type zentry struct {
	score  int64
	member string
}

type zheap []zentry

func (h zheap) Len() int { return len(h) }
func (h zheap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].member < h[j].member
}
func (h zheap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *zheap) Push(x any)   { *h = append(*h, x.(zentry)) }
func (h *zheap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// add sets member's score (ZADD).
func (z *zset) add(member string, score int64) {
	if z.score == nil {
		z.score = make(map[string]int64)
	}
	if s, ok := z.score[member]; ok && s == score {
		return
	}
	z.score[member] = score
	heap.Push(&z.h, zentry{score, member})
	if len(z.h) > 64 && len(z.h) > 4*len(z.score) {
		z.compact()
	}
}

// compact drops the heap's stale entries.
func (z *zset) compact() {
	h := make(zheap, 0, len(z.score))
	for m, s := range z.score {
		h = append(h, zentry{s, m})
	}
	heap.Init(&h)
	z.h = h
}

// remove deletes member (ZREM).
func (z *zset) remove(member string) { delete(z.score, member) }

// has reports whether member is in the set, and its score.
func (z *zset) get(member string) (int64, bool) {
	s, ok := z.score[member]
	return s, ok
}

// card is the number of members (ZCARD).
func (z *zset) card() int64 { return int64(len(z.score)) }

// top drops stale heap entries and reports the lowest live one.
func (z *zset) top() (zentry, bool) {
	for len(z.h) > 0 {
		e := z.h[0]
		if s, ok := z.score[e.member]; ok && s == e.score {
			return e, true
		}
		heap.Pop(&z.h)
	}
	return zentry{}, false
}

// popUpTo removes and returns, in order, up to limit members scored at most
// x (ZRANGEBYSCORE key -inf x LIMIT 0 limit, then ZREM of each); limit ≤ 0
// means no limit (ZREMRANGEBYSCORE).
func (z *zset) popUpTo(x int64, limit int) []string {
	var out []string
	for limit <= 0 || len(out) < limit {
		e, ok := z.top()
		if !ok || e.score > x {
			break
		}
		heap.Pop(&z.h)
		delete(z.score, e.member)
		out = append(out, e.member)
	}
	return out
}

// popMin removes and returns the n lowest members (ZPOPMIN key n).
func (z *zset) popMin(n int64) []string {
	var out []string
	for int64(len(out)) < n {
		e, ok := z.top()
		if !ok {
			break
		}
		heap.Pop(&z.h)
		delete(z.score, e.member)
		out = append(out, e.member)
	}
	return out
}

// members returns the members in Redis's order, for tests and dumps.
func (z *zset) members() []zentry {
	out := make([]zentry, 0, len(z.score))
	for m, s := range z.score {
		out = append(out, zentry{s, m})
	}
	sort.Slice(out, func(i, j int) bool { return zheap(out).Less(i, j) })
	return out
}
