package main

import (
	"hash/fnv"
	"time"

	"github.com/stormguard/stormguard/sim/engine"
)

// Params is the model: one FIFO server, Poisson arrivals, exponential
// service, a client timeout per attempt, attempts up to MaxAttempts with
// no backoff, statistics per bin of Bin.
type Params struct {
	Rate        float64       // arrivals per second
	Mean        time.Duration // mean service time
	Timeout     time.Duration // per attempt
	MaxAttempts int
	Horizon     time.Duration
	Bin         time.Duration
	Seed        uint64
	Client      string // names, for the random streams (see stream)
	Service     string
}

// Result is what a run counted.
type Result struct {
	Requests, Served, Failed int64
	LatencyS                 float64 // mean latency of the served requests
	Events                   int64   // events taken off the heap and handled (dropped timeouts not counted)
	// Per bin: served requests (by the bin they ended in), and the p50 and
	// p99 of their latencies in seconds.
	ServedBin []int64
	P50, P99  []float64
}

// The event kinds.
const (
	kArrive = iota
	kDone
	kRetry
	kBin
)

// ev is an event, a value in the heap or the timeout ring: its time, its
// scheduling number (ties fire in scheduling order) and what it is about.
type ev struct {
	at   int64
	seq  uint64
	req  int32  // the request (kDone, kTimeout, kRetry)
	gen  uint32 // the request's attempt it is about
	kind uint8
}

// req is one request across its attempts; gen counts its slot's attempts,
// so that a timeout or a completion of an attempt that is over is known.
type req struct {
	arrival int64
	gen     uint32
	attempt int32
	waiting bool
}

// item is a queued attempt.
type item struct {
	req int32
	gen uint32
}

// model is one run's state.
type model struct {
	p        Params
	now, end int64
	seq      uint64
	heap     []ev
	reqs     []req
	free     []int32
	ring     []item // FIFO of queued attempts, len a power of two
	head, n  int
	tos      []ev // FIFO of timeouts, len a power of two: each fires Timeout after it is set
	toHead   int
	toN      int
	busy     bool
	arr, svc engine.Rand
	nbins    int
	lat      []float64
	latSum   float64
	res      Result
}

// stream is the random stream a part of the model draws from: the same
// derivation as package sim's (an FNV-1a hash of the part's names, each
// followed by a zero byte, as the stream id), so that this program and the
// simulator draw the same numbers for the same scenario and seed.
func stream(seed uint64, parts ...string) engine.Rand {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return engine.Stream(seed, h.Sum64())
}

// Run simulates p from an empty system.
func Run(p Params) Result {
	s := &model{p: p, end: int64(p.Horizon), ring: make([]item, 1024), tos: make([]ev, 1024)}
	s.nbins = int((p.Horizon + p.Bin - 1) / p.Bin)
	s.res.ServedBin = make([]int64, s.nbins)
	s.res.P50 = make([]float64, s.nbins)
	s.res.P99 = make([]float64, s.nbins)
	s.arr = stream(p.Seed, "client", p.Client, "arrivals")
	s.svc = stream(p.Seed, "service", p.Service)
	s.arrival()
	s.push(int64(p.Bin), kBin, 0, 0)
	for {
		// The earliest event: the heap's or the timeout ring's. A timeout
		// of an attempt that was answered is dropped when it comes up.
		if s.toN > 0 {
			t := &s.tos[s.toHead]
			if len(s.heap) == 0 || t.before(&s.heap[0]) {
				if t.at > s.end {
					break
				}
				s.toHead = (s.toHead + 1) & (len(s.tos) - 1)
				s.toN--
				if r := &s.reqs[t.req]; r.gen != t.gen || !r.waiting {
					continue
				}
				s.now = t.at
				s.onTimeout(t.req)
				s.res.Events++
				continue
			}
		}
		if len(s.heap) == 0 || s.heap[0].at > s.end {
			break
		}
		e := &s.heap[0]
		kind, i, gen := e.kind, e.req, e.gen
		s.now = e.at
		s.pop()
		switch kind {
		case kArrive:
			s.onArrive()
		case kDone:
			s.onDone(i, gen)
		case kRetry:
			s.send(i)
		case kBin:
			s.onBin()
		}
		s.res.Events++
	}
	if s.res.Served > 0 {
		s.res.LatencyS = s.latSum / float64(s.res.Served)
	}
	return s.res
}

func (s *model) bin() int { return min(int(s.now/int64(s.p.Bin)), s.nbins-1) }

// arrival schedules the next arrival, if it comes before the end.
func (s *model) arrival() {
	next := s.now + int64(time.Duration(s.arr.ExpFloat64()/s.p.Rate*1e9))
	if next < s.end {
		s.push(next, kArrive, 0, 0)
	}
}

func (s *model) onArrive() {
	s.res.Requests++
	var i int32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		s.reqs = append(s.reqs, req{})
		i = int32(len(s.reqs) - 1)
	}
	r := &s.reqs[i]
	r.arrival, r.attempt = s.now, 0
	s.send(i)
	s.arrival()
}

// send makes request i's next attempt: its timeout, then the server at
// once if it is idle, else the queue.
func (s *model) send(i int32) {
	r := &s.reqs[i]
	r.gen++
	r.attempt++
	r.waiting = true
	s.seq++
	if s.toN == len(s.tos) {
		s.tos = grow(s.tos, s.toHead, s.toN)
		s.toHead = 0
	}
	s.tos[(s.toHead+s.toN)&(len(s.tos)-1)] = ev{at: s.now + int64(s.p.Timeout), seq: s.seq, req: i, gen: r.gen}
	s.toN++
	if !s.busy {
		s.start(i, r.gen)
		return
	}
	if s.n == len(s.ring) {
		s.ring = grow(s.ring, s.head, s.n)
		s.head = 0
	}
	s.ring[(s.head+s.n)&(len(s.ring)-1)] = item{i, r.gen}
	s.n++
}

// grow returns a ring twice as long holding ring's n entries from head
// on, from 0 on.
func grow[T any](ring []T, head, n int) []T {
	r := make([]T, 2*len(ring))
	for k := range n {
		r[k] = ring[(head+k)&(len(ring)-1)]
	}
	return r
}

func (s *model) start(i int32, gen uint32) {
	s.busy = true
	s.push(s.now+int64(time.Duration(s.svc.ExpFloat64()*float64(s.p.Mean))), kDone, i, gen)
}

// onDone: the server finished an attempt; if its caller still waits, the
// request is served. Then the next queued attempt starts.
func (s *model) onDone(i int32, gen uint32) {
	s.busy = false
	if r := &s.reqs[i]; r.gen == gen && r.waiting {
		r.waiting = false
		l := time.Duration(s.now - r.arrival).Seconds()
		s.res.Served++
		s.res.ServedBin[s.bin()]++
		s.latSum += l
		s.lat = append(s.lat, l)
		s.free = append(s.free, i)
	}
	if s.n > 0 {
		it := s.ring[s.head]
		s.head = (s.head + 1) & (len(s.ring) - 1)
		s.n--
		s.start(it.req, it.gen)
	}
}

// onTimeout: the caller stops waiting for request i's attempt; it retries
// at once (as an event now) while attempts are left, else fails.
func (s *model) onTimeout(i int32) {
	r := &s.reqs[i]
	r.waiting = false
	if int(r.attempt) < s.p.MaxAttempts {
		s.push(s.now, kRetry, i, 0)
		return
	}
	s.res.Failed++
	s.free = append(s.free, i)
}

// onBin closes the bin that ends now: the p50 and p99 of its latencies.
func (s *model) onBin() {
	b := min(int((s.now-1)/int64(s.p.Bin)), s.nbins-1)
	if n := len(s.lat); n > 0 {
		s.res.P50[b] = kth(s.lat, int(0.50*float64(n-1)))
		s.res.P99[b] = kth(s.lat, int(0.99*float64(n-1)))
		s.lat = s.lat[:0]
	}
	if next := s.now + int64(s.p.Bin); next <= s.end {
		s.push(next, kBin, 0, 0)
	}
}

// kth returns the element a sort of x would put at k (quickselect with
// the middle element as pivot; x is reordered).
func kth(x []float64, k int) float64 {
	lo, hi := 0, len(x)-1
	for lo < hi {
		p := x[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for x[i] < p {
				i++
			}
			for x[j] > p {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return x[k]
		}
	}
	return x[k]
}

// push adds an event to the binary heap.
func (s *model) push(at int64, kind uint8, i int32, gen uint32) {
	s.seq++
	h := s.heap
	j := len(h)
	if j == cap(h) {
		h = append(h, ev{})
	}
	h = h[:j+1]
	for j > 0 {
		p := (j - 1) / 2
		if at > h[p].at || at == h[p].at && s.seq > h[p].seq {
			break
		}
		h[j] = h[p]
		j = p
	}
	h[j] = ev{at: at, seq: s.seq, req: i, gen: gen, kind: kind}
	s.heap = h
}

// pop removes the earliest event.
func (s *model) pop() {
	h := s.heap
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	j := 0
	for {
		c := 2*j + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].before(&h[c]) {
			c++
		}
		if !h[c].before(&last) {
			break
		}
		h[j] = h[c]
		j = c
	}
	if n > 0 {
		h[j] = last
	}
	s.heap = h
}

func (e *ev) before(f *ev) bool { return e.at < f.at || e.at == f.at && e.seq < f.seq }
