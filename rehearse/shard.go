package rehearse

import (
	"math"
	"slices"
	"sync"
	"time"
)

// The latencies of a shard's successes, kept per bin as a histogram so
// that Merge can give the percentiles of every shard together: 50 buckets
// a decade (each 4.7 % wide) from 10 µs to 1,000 s. A merged percentile
// is the upper edge of its bucket, within 4.7 % of the exact one.

const (
	histPerDecade = 50
	histMin       = 1e-5 // seconds
	histBuckets   = 8 * histPerDecade
)

// latencyHist holds, per bin, the count of successes per bucket, sparse:
// pairs of (bucket, count).
type latencyHist struct {
	Bins [][][2]int `json:"bins"`
}

func newLatencyHist(n int) *latencyHist { return &latencyHist{Bins: make([][][2]int, n)} }

// bucket is the bucket of a latency in seconds.
func bucket(s float64) int {
	if s <= histMin {
		return 0
	}
	return min(histBuckets-1, int(math.Ceil(math.Log10(s/histMin)*histPerDecade)))
}

// upper is a bucket's upper edge, seconds.
func upper(b int) float64 { return histMin * math.Pow(10, float64(b)/histPerDecade) }

// add counts a latency in bin b (ignored outside the run). Not safe for
// concurrent use: callers hold hmu.
func (h *latencyHist) add(b int, d time.Duration) {
	if b < 0 || b >= len(h.Bins) {
		return
	}
	hmu.Lock()
	defer hmu.Unlock()
	k := bucket(d.Seconds())
	bin := h.Bins[b]
	for i := range bin {
		if bin[i][0] == k {
			bin[i][1]++
			return
		}
	}
	h.Bins[b] = append(bin, [2]int{k, 1})
}

// merged adds o's counts into h (bins beyond h's are dropped).
func (h *latencyHist) merged(o *latencyHist) {
	for b := range min(len(h.Bins), len(o.Bins)) {
		for _, p := range o.Bins[b] {
			found := false
			for i := range h.Bins[b] {
				if h.Bins[b][i][0] == p[0] {
					h.Bins[b][i][1] += p[1]
					found = true
				}
			}
			if !found {
				h.Bins[b] = append(h.Bins[b], p)
			}
		}
	}
}

// quantile is the q-quantile of bin b by the simulator's rule (the
// element at q × (n − 1) of the sorted sample), as its bucket's upper
// edge; 0 when the bin holds nothing.
func (h *latencyHist) quantile(b int, q float64) float64 {
	bin := slices.Clone(h.Bins[b])
	slices.SortFunc(bin, func(x, y [2]int) int { return x[0] - y[0] })
	n := 0
	for _, p := range bin {
		n += p[1]
	}
	if n == 0 {
		return 0
	}
	want := int(q * float64(n-1))
	seen := 0
	for _, p := range bin {
		seen += p[1]
		if seen > want {
			return upper(p[0])
		}
	}
	return upper(bin[len(bin)-1][0])
}

// hmu guards every latencyHist of the process: successes are few enough
// that one lock does not matter.
var hmu sync.Mutex
