package sim

import (
	"math"
	"sort"

	"github.com/stormguard/stormguard/sim/engine"
	"github.com/stormguard/stormguard/sim/scenario"
)

// cache is a look-aside cache's state (see Cache). A keyed cache keeps an
// LRU as a doubly linked list threaded through arrays indexed by key, so
// that a lookup, a fill and an eviction are O(1) and a key draw O(log keys).
type cache struct {
	spec  scenario.Cache
	rng   engine.Rand
	cdf   []float64 // cdf[k] = P(key ≤ k); nil without keys
	in    []bool
	prev  []int32
	next  []int32
	fill  []engine.Time // time of each key's fill, with a TTL
	head  int32         // most recently used; noID when empty
	tail  int32         // least recently used
	count int
	down  int // active flush triggers on a cache without keys
}

func newCache(spec scenario.Cache, rng engine.Rand) *cache {
	c := &cache{spec: spec, rng: rng, head: noID, tail: noID}
	if spec.Keys == 0 {
		return c
	}
	n := spec.Keys
	c.cdf = make([]float64, n)
	s := *spec.Zipf
	sum := 0.0
	for k := range n {
		sum += math.Pow(float64(k+1), -s)
		c.cdf[k] = sum
	}
	for k := range c.cdf {
		c.cdf[k] /= sum
	}
	c.in = make([]bool, n)
	c.prev = make([]int32, n)
	c.next = make([]int32, n)
	if spec.TTL > 0 {
		c.fill = make([]engine.Time, n)
	}
	if !spec.Cold {
		// Warm: the Size most popular keys, the most popular most recent.
		for k := spec.Size - 1; k >= 0; k-- {
			c.insert(int32(k), 0)
		}
	}
	return c
}

// lookup draws the key of a request and reports whether the cache holds
// it. key is noID for a cache without keys.
func (c *cache) lookup(now engine.Time) (key int32, hit bool) {
	if c.cdf == nil {
		return noID, c.down == 0 && c.rng.Float64() < c.spec.HitRate
	}
	u := c.rng.Float64()
	k := int32(sort.SearchFloat64s(c.cdf, u))
	if int(k) >= len(c.cdf) {
		k = int32(len(c.cdf) - 1)
	}
	if !c.in[k] {
		return k, false
	}
	if c.fill != nil && now-c.fill[k] >= engine.Time(c.spec.TTL) {
		c.remove(k)
		return k, false
	}
	c.remove(k)
	c.insert(k, c.fillTime(k))
	return k, true
}

func (c *cache) fillTime(k int32) engine.Time {
	if c.fill == nil {
		return 0
	}
	return c.fill[k]
}

// store fills key k after a miss that succeeded in time.
func (c *cache) store(k int32, now engine.Time) {
	if k == noID {
		return
	}
	if c.in[k] {
		c.remove(k)
	} else if c.count >= c.spec.Size {
		c.remove(c.tail)
	}
	c.insert(k, now)
}

// flush drops the n most popular keys, or every key when n is 0.
func (c *cache) flush(n int) {
	if n == 0 || n > len(c.in) {
		n = len(c.in)
	}
	for k := range n {
		if c.in[k] {
			c.remove(int32(k))
		}
	}
}

// insert puts k at the head (most recent), filled at t.
func (c *cache) insert(k int32, t engine.Time) {
	c.in[k] = true
	c.prev[k], c.next[k] = noID, c.head
	if c.head != noID {
		c.prev[c.head] = k
	}
	c.head = k
	if c.tail == noID {
		c.tail = k
	}
	if c.fill != nil {
		c.fill[k] = t
	}
	c.count++
}

// remove unlinks k.
func (c *cache) remove(k int32) {
	p, n := c.prev[k], c.next[k]
	if p != noID {
		c.next[p] = n
	} else {
		c.head = n
	}
	if n != noID {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.in[k] = false
	c.count--
}
