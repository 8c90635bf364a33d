package limit

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// server is the deterministic test model of a server with a fixed
// concurrency capacity: a request admitted with n requests in flight (itself
// included) takes
//
//	RTT = base × max(1, n / capacity) × (1 + noise × u),  u uniform in [0, 1)
//
// that is, up to capacity requests run in parallel at the base latency, and
// beyond it they queue, so the RTT grows in proportion to the load.
type server struct {
	capacity int
	base     time.Duration
	noise    float64
}

func (s server) rtt(n int, u float64) time.Duration {
	f := max(1, float64(n)/float64(s.capacity)) * (1 + s.noise*u)
	return time.Duration(float64(s.base) * f)
}

// loop is a closed loop in virtual time: a Limiter in front of a server,
// with more demand than capacity. Whenever a request finishes, its permit
// is released with SuccessAt, and new requests are admitted until the
// limiter refuses one, so that as many requests are in flight as the limit
// allows.
type loop struct {
	lim     *Limiter
	srv     server
	rng     *rand.Rand
	now     time.Time
	pending pendingHeap
	seq     int // admissions so far, to break ties between equal end times
}

func newLoop(alg Algorithm, srv server, seed uint64) *loop {
	return &loop{
		lim: NewLimiter(alg),
		srv: srv,
		rng: rand.New(rand.NewPCG(seed, 0x5eed)),
		now: time.Unix(1_700_000_000, 0),
	}
}

type pending struct {
	end    time.Time
	seq    int
	permit Permit
}

type pendingHeap []pending

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	return h[i].end.Before(h[j].end) || h[i].end.Equal(h[j].end) && h[i].seq < h[j].seq
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// fill admits requests until the limiter refuses.
func (lp *loop) fill() {
	for {
		p, ok := lp.lim.AcquireAt(lp.now)
		if !ok {
			return
		}
		rtt := lp.srv.rtt(lp.lim.InFlight(), lp.rng.Float64())
		lp.seq++
		heap.Push(&lp.pending, pending{end: lp.now.Add(rtt), seq: lp.seq, permit: p})
	}
}

// run processes n completions and returns the limit after each.
func (lp *loop) run(n int) []int {
	limits := make([]int, 0, n)
	lp.fill()
	for range n {
		c := heap.Pop(&lp.pending).(pending)
		lp.now = c.end
		c.permit.SuccessAt(lp.now)
		limits = append(limits, lp.lim.Limit())
		lp.fill()
	}
	return limits
}

// stats summarises a run of limits.
type stats struct {
	min, max int
	mean     float64
}

func summarise(limits []int) stats {
	s := stats{min: limits[0], max: limits[0]}
	sum := 0
	for _, l := range limits {
		s.min = min(s.min, l)
		s.max = max(s.max, l)
		sum += l
	}
	s.mean = float64(sum) / float64(len(limits))
	return s
}
