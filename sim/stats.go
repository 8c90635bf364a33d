package sim

import (
	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/sim/result"
)

// clientStats counts one client's requests per bin. The per-bin arrays
// hold a bin in each of their places (see world.binOf): every bin of the
// run, or, when the run spools its bins (world.spool), the two that can
// be open at once, place b&1 for bin b. okArr and failArr, which count a
// request in the bin it arrived in when it ends, and which the verdict
// reads, hold every bin.
type clientStats struct {
	demand, goodput, degraded []int64
	okArr, failArr            []int64          // by the request's arrival bin
	gaveUp                    []result.GiveUps // counts, converted to rates at the end
	p50, p99, budget          []float64
	lat                       []float64 // latencies (s) of successes in the open bin
	total                     result.ClientTotal
}

// init makes the arrays for n bins, with places for places of them.
func (s *clientStats) init(n, places int) {
	s.demand = make([]int64, places)
	s.goodput = make([]int64, places)
	s.degraded = make([]int64, places)
	s.okArr = make([]int64, n)
	s.failArr = make([]int64, n)
	s.gaveUp = make([]result.GiveUps, places)
	s.p50 = make([]float64, places)
	s.p99 = make([]float64, places)
	s.budget = make([]float64, places)
}

// closeBin computes the bin's latency percentiles and resets the sample.
// The percentiles are the elements a sort would put at q × (n − 1); a
// selection finds them in linear time without sorting the bin (the p99
// selection works on the part above the median).
func (s *clientStats) closeBin(b int) {
	if n := len(s.lat); n > 0 {
		i50, i99 := int(0.50*float64(n-1)), int(0.99*float64(n-1))
		s.p50[b] = selectKth(s.lat, i50)
		s.p99[b] = selectKth(s.lat[i50:], i99-i50)
		s.lat = s.lat[:0]
	}
}

// selectKth reorders x so that x[k] is the element a sort would put there,
// everything before it no greater and everything after no smaller, and
// returns it (quickselect with a median-of-three pivot). The partitions
// are branch-free (Lomuto's scheme, the comparison added to the count):
// near the median each comparison with the pivot is a coin toss, which
// the branches of Hoare's scheme mispredicted half the time.
func selectKth(x []float64, k int) float64 {
	lo, hi := 0, len(x)-1
	for hi-lo >= 16 {
		m := lo + (hi-lo)/2
		a, b, c := x[lo], x[m], x[hi]
		if b < a {
			a, b = b, a
		}
		if c < b {
			b = c
			if b < a {
				b = a
			}
		}
		p := b
		// x[lo:s] < p ≤ x[s:hi+1]; p is in the range, so s ≤ hi.
		s := partitionLess(x[lo:hi+1], p) + lo
		if k < s {
			hi = s - 1
			continue
		}
		if s > lo {
			lo = s
			continue
		}
		// p is the least: move its copies to the front, where they are done.
		t := partitionLE(x[lo:hi+1], p) + lo
		if k < t {
			return x[k]
		}
		lo = t
	}
	for i := lo + 1; i <= hi; i++ {
		for j := i; j > lo && x[j] < x[j-1]; j-- {
			x[j], x[j-1] = x[j-1], x[j]
		}
	}
	return x[k]
}

// partitionLess moves the elements of x below p to its front, in one
// branch-free pass, and returns how many there are.
func partitionLess(x []float64, p float64) int {
	s := 0
	for i, v := range x {
		x[i] = x[s]
		x[s] = v
		s += b2i(v < p)
	}
	return s
}

// partitionLE is partitionLess for the elements no greater than p.
func partitionLE(x []float64, p float64) int {
	s := 0
	for i, v := range x {
		x[i] = x[s]
		x[s] = v
		s += b2i(v <= p)
	}
	return s
}

// b2i is 1 for true, 0 for false; the compiler makes it a SETcc, where an
// if around s++ stays a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gaveUpFor counts a request that ended in failure for reason, in bin b
// and in the total (see result.ReasonOf).
func (s *clientStats) gaveUpFor(b int, reason error) {
	r := result.ReasonOf(reason)
	s.gaveUp[b].Inc(r)
	s.total.GaveUp.Inc(r)
}

// serviceStats counts one service's attempts per bin.
type serviceStats struct {
	first, retries, completed, goodput, wasted, shed, expired  []int64
	hung, crashed, crashes, cacheHits, cacheMisses, superseded []int64
	overhead                                                   []int64 // ns of failure work
	queue, busy, limit, up                                     []float64
	total                                                      result.ServiceTotal
}

// completed1 counts a completion in bin place b that counted as f.
func (s *serviceStats) completed1(b int, f admit.Fate) {
	s.completed[b]++
	s.total.Completed++
	switch f {
	case admit.FateGoodput:
		s.goodput[b]++
		s.total.Goodput++
	case admit.FateFailed:
		s.total.Failed++
	default:
		s.wasted[b]++
		s.total.Wasted++
	}
}

// init makes the arrays for places bins (see clientStats).
func (s *serviceStats) init(places int) {
	for _, p := range []*[]int64{&s.first, &s.retries, &s.completed, &s.goodput, &s.wasted, &s.shed, &s.expired,
		&s.hung, &s.crashed, &s.crashes, &s.cacheHits, &s.cacheMisses, &s.overhead, &s.superseded} {
		*p = make([]int64, places)
	}
	s.queue = make([]float64, places)
	s.busy = make([]float64, places)
	s.limit = make([]float64, places)
	s.up = make([]float64, places)
}

// binOf returns the place in the per-bin arrays of the bin of virtual time
// t, clamped to the last bin: the bin itself (binMask is all ones), or,
// when the run spools its bins, the bin & 1. Most calls ask about the bin
// the last one did: it is kept, clamped, with its bounds [binLo, binHi),
// and a t within them skips the division and the clamp.
func (w *world) binOf(t int64) int {
	if t >= w.binLo && t < w.binHi {
		return w.binAt
	}
	return w.binOfNew(t)
}

// binOfNew is binOf for a t outside the kept bin: t / bin clamped to the
// last bin; a t ≥ 0 becomes the kept bin.
func (w *world) binOfNew(t int64) int {
	b := t / int64(w.bin)
	c := int(b)
	if c >= w.nbins {
		c = w.nbins - 1
	}
	if t >= 0 {
		w.binAt, w.binNum, w.binLo, w.binHi = c&w.binMask, c, b*int64(w.bin), (b+1)*int64(w.bin)
	}
	return c & w.binMask
}

// binIndex returns the bin of virtual time t, clamped to the last bin: its
// number, not its place (see binOf).
func (w *world) binIndex(t int64) int {
	if t >= w.binLo && t < w.binHi {
		return w.binNum
	}
	b := t / int64(w.bin)
	return int(min(b, int64(w.nbins-1)))
}

// result turns the counts into a Result with rates per second.
func (w *world) result(name string) result.Result {
	perS := 1 / w.bin.Seconds()
	r := result.Result{
		Name:      name,
		Seed:      w.sc.Seed,
		BinS:      w.bin.Seconds(),
		DurationS: w.sc.Duration.Seconds(),
		TriggerS:  w.triggerS,
		Events:    w.eng.Fired() + w.fastFired,
	}
	if r.TriggerS == nil {
		r.TriggerS = [][2]float64{}
	}
	r.Actions = w.actions
	if w.spool != nil {
		w.spooledSeries(&r, perS)
		return r
	}
	for i := range w.clients {
		c := &w.clients[i]
		s := result.ClientSeries{Name: c.spec.Name, Bins: make([]result.ClientBin, w.nbins), Total: c.stats.total}
		if n := s.Total.Succeeded; n > 0 {
			s.Total.SuccessLatencyS /= float64(n)
		}
		if n := s.Total.Failed; n > 0 {
			s.Total.FailureLatencyS /= float64(n)
		}
		for b := range s.Bins {
			s.Bins[b] = result.ClientBin{
				T:             float64(b) * w.bin.Seconds(),
				Demand:        float64(c.stats.demand[b]) * perS,
				Goodput:       float64(c.stats.goodput[b]) * perS,
				Degraded:      float64(c.stats.degraded[b]) * perS,
				GaveUp:        c.stats.gaveUp[b].Scale(perS),
				ArrivedOK:     float64(c.stats.okArr[b]) * perS,
				ArrivedFailed: float64(c.stats.failArr[b]) * perS,
				LatencyP50:    c.stats.p50[b],
				LatencyP99:    c.stats.p99[b],
				Budget:        c.stats.budget[b],
			}
		}
		r.Clients = append(r.Clients, s)
	}
	for i := range w.services {
		v := &w.services[i]
		s := result.ServiceSeries{Name: v.spec.Name, Bins: make([]result.ServiceBin, w.nbins), Total: v.stats.total}
		st := &v.stats
		for b := range s.Bins {
			s.Bins[b] = result.ServiceBin{
				T:              float64(b) * w.bin.Seconds(),
				OfferedFirst:   float64(st.first[b]) * perS,
				OfferedRetries: float64(st.retries[b]) * perS,
				Throughput:     float64(st.completed[b]) * perS,
				Goodput:        float64(st.goodput[b]) * perS,
				Wasted:         float64(st.wasted[b]) * perS,
				Shed:           float64(st.shed[b]) * perS,
				Expired:        float64(st.expired[b]) * perS,
				Queue:          st.queue[b],
				Busy:           st.busy[b],
				Limit:          st.limit[b],
				Hung:           float64(st.hung[b]) * perS,
				Crashed:        float64(st.crashed[b]) * perS,
				Crashes:        float64(st.crashes[b]),
				ReplicasUp:     st.up[b],
				CacheHits:      float64(st.cacheHits[b]) * perS,
				CacheMisses:    float64(st.cacheMisses[b]) * perS,
				OverheadS:      float64(st.overhead[b]) / 1e9 * perS,
				Superseded:     float64(st.superseded[b]) * perS,
			}
		}
		r.Services = append(r.Services, s)
	}
	return r
}
