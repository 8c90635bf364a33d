package lab

import (
	"slices"
	"sync"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/sim/result"
)

// clock maps wall-clock instants onto the bins of a run that starts at
// start.
type clock struct {
	start time.Time
	bin   time.Duration
	n     int
}

func newClock(start time.Time, bin, duration time.Duration) clock {
	return clock{start: start, bin: bin, n: int((duration + bin - 1) / bin)}
}

// binOf returns the bin of t, or -1 when t is outside the run.
func (c clock) binOf(t time.Time) int {
	d := t.Sub(c.start)
	if d < 0 {
		return -1
	}
	b := int(d / c.bin)
	if b >= c.n {
		return -1
	}
	return b
}

// serviceCounts counts a service's attempts per bin, as result.ServiceBin
// does, and in total. It is safe for concurrent use.
type serviceCounts struct {
	clk clock
	mu  sync.Mutex
	// per bin
	first, retries, completed, goodput, wasted, shed, expired []int64
	queue, busy, limit                                        []float64
	total                                                     result.ServiceTotal
}

func newServiceCounts(clk clock) *serviceCounts {
	s := &serviceCounts{clk: clk}
	for _, p := range []*[]int64{&s.first, &s.retries, &s.completed, &s.goodput, &s.wasted, &s.shed, &s.expired} {
		*p = make([]int64, clk.n)
	}
	s.queue = make([]float64, clk.n)
	s.busy = make([]float64, clk.n)
	s.limit = make([]float64, clk.n)
	return s
}

// add adds one to the bin of now in col, if now is in the run.
func (s *serviceCounts) add(col []int64, now time.Time) {
	if b := s.clk.binOf(now); b >= 0 {
		col[b]++
	}
}

// arrived counts an attempt that reached the service.
func (s *serviceCounts) arrived(now time.Time, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.Arrived++
	if attempt > 1 {
		s.add(s.retries, now)
	} else {
		s.add(s.first, now)
	}
}

// completedAt counts an attempt whose handler ran to the end, as its fate
// by admit's release rule says (admit.Classify): goodput only when it
// succeeded while its caller still waited, as the production gate and the
// simulator count it; a failure answered to a waiting caller is failed.
func (s *serviceCounts) completedAt(now time.Time, f admit.Fate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.Completed++
	s.add(s.completed, now)
	switch f {
	case admit.FateGoodput:
		s.total.Goodput++
		s.add(s.goodput, now)
	case admit.FateFailed:
		s.total.Failed++
	default:
		s.total.Wasted++
		s.add(s.wasted, now)
	}
}

// shedAt counts an attempt refused at admission.
func (s *serviceCounts) shedAt(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.Shed++
	s.add(s.shed, now)
}

// expiredAt counts an attempt dropped before it started because nobody
// waited for it any more (its deadline passed or its caller left).
func (s *serviceCounts) expiredAt(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.Expired++
	s.add(s.expired, now)
}

// gauge records the queue, busy workers and limit at the end of bin b.
func (s *serviceCounts) gauge(b int, queue, busy, limit int) {
	if b < 0 || b >= s.clk.n {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue[b], s.busy[b], s.limit[b] = float64(queue), float64(busy), float64(limit)
}

// series returns the counts as a result.ServiceSeries, rates per second.
// inSystem is the number of attempts still in the service.
func (s *serviceCounts) series(name string, inSystem int64) result.ServiceSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	perS := 1 / s.clk.bin.Seconds()
	out := result.ServiceSeries{Name: name, Bins: make([]result.ServiceBin, s.clk.n), Total: s.total}
	out.Total.InSystem = inSystem
	for b := range out.Bins {
		out.Bins[b] = result.ServiceBin{
			T:              float64(b) * s.clk.bin.Seconds(),
			OfferedFirst:   float64(s.first[b]) * perS,
			OfferedRetries: float64(s.retries[b]) * perS,
			Throughput:     float64(s.completed[b]) * perS,
			Goodput:        float64(s.goodput[b]) * perS,
			Wasted:         float64(s.wasted[b]) * perS,
			Shed:           float64(s.shed[b]) * perS,
			Expired:        float64(s.expired[b]) * perS,
			Queue:          s.queue[b],
			Busy:           s.busy[b],
			Limit:          s.limit[b],
		}
	}
	return out
}

// clientCounts counts a client's requests per bin, as result.ClientBin does,
// and their outcomes. It is safe for concurrent use.
type clientCounts struct {
	clk clock
	mu  sync.Mutex
	// per bin
	demand, goodput, degraded []int64
	okArr, failArr            []int64 // by the request's arrival bin
	gaveUp                    []result.GiveUps
	lat                       [][]float64
	budget                    []float64
	total                     result.ClientTotal
	outcomes                  Outcomes
}

func newClientCounts(clk clock) *clientCounts {
	c := &clientCounts{clk: clk, demand: make([]int64, clk.n), goodput: make([]int64, clk.n), degraded: make([]int64, clk.n),
		okArr: make([]int64, clk.n), failArr: make([]int64, clk.n),
		gaveUp: make([]result.GiveUps, clk.n), lat: make([][]float64, clk.n), budget: make([]float64, clk.n)}
	for b := range c.budget {
		c.budget[b] = -1
	}
	c.outcomes.Errors = map[string]int64{}
	return c
}

// sent counts a new request.
func (c *clientCounts) sent(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total.Requests++
	c.outcomes.Sent++
	if b := c.clk.binOf(now); b >= 0 {
		c.demand[b]++
	}
}

// attempts counts the attempts a request made.
func (c *clientCounts) attempts(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total.Attempts += int64(n)
	c.total.Retries += int64(max(0, n-1))
}

// ended counts a request's one outcome, at now, after latency. reason is
// the retrier's reason for giving up (nil for a success).
func (c *clientCounts) ended(now time.Time, latency time.Duration, o outcome, reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.clk.binOf(now)
	arr := c.clk.binOf(now.Add(-latency))
	if arr >= 0 {
		if o.kind == outcomeSuccess {
			c.okArr[arr]++
		} else {
			c.failArr[arr]++
		}
	}
	switch o.kind {
	case outcomeSuccess:
		c.outcomes.Succeeded++
		c.total.Succeeded++
		c.total.SuccessLatencyS += latency.Seconds()
		if b >= 0 {
			c.goodput[b]++
			c.lat[b] = append(c.lat[b], latency.Seconds())
		}
		if o.degraded {
			c.total.Degraded++
			if b >= 0 {
				c.degraded[b]++
			}
		}
		return
	case outcomeShed:
		c.outcomes.Shed++
	case outcomeTimeout:
		c.outcomes.TimedOut++
	default:
		c.outcomes.Errors[o.err]++
	}
	c.total.Failed++
	c.total.FailureLatencyS += latency.Seconds()
	r := result.ReasonOf(reason)
	c.total.GaveUp.Inc(r)
	if b >= 0 {
		c.gaveUp[b].Inc(r)
	}
}

// setBudget records the mean budget level at the end of bin b.
func (c *clientCounts) setBudget(b int, level float64) {
	if b < 0 || b >= c.clk.n {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget[b] = level
}

// series returns the counts as a result.ClientSeries, rates per second, and
// the outcomes.
func (c *clientCounts) series(name string, inFlight int64) (result.ClientSeries, Outcomes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	perS := 1 / c.clk.bin.Seconds()
	out := result.ClientSeries{Name: name, Bins: make([]result.ClientBin, c.clk.n), Total: c.total}
	out.Total.InFlight = inFlight
	if n := out.Total.Succeeded; n > 0 {
		out.Total.SuccessLatencyS /= float64(n)
	}
	if n := out.Total.Failed; n > 0 {
		out.Total.FailureLatencyS /= float64(n)
	}
	for b := range out.Bins {
		g := c.gaveUp[b]
		bin := result.ClientBin{
			T:        float64(b) * c.clk.bin.Seconds(),
			Demand:   float64(c.demand[b]) * perS,
			Goodput:  float64(c.goodput[b]) * perS,
			Degraded: float64(c.degraded[b]) * perS,
			GaveUp: result.GiveUps{Attempts: g.Attempts * perS, Budget: g.Budget * perS, Deadline: g.Deadline * perS,
				NotRetryable: g.NotRetryable * perS, ServerStop: g.ServerStop * perS, Disabled: g.Disabled * perS, Declined: g.Declined * perS, BreakerOpen: g.BreakerOpen * perS},
			Budget:        c.budget[b],
			ArrivedOK:     float64(c.okArr[b]) * perS,
			ArrivedFailed: float64(c.failArr[b]) * perS,
		}
		if l := c.lat[b]; len(l) > 0 {
			slices.Sort(l)
			bin.LatencyP50 = quantile(l, 0.50)
			bin.LatencyP99 = quantile(l, 0.99)
		}
		out.Bins[b] = bin
	}
	o := c.outcomes
	o.Errors = make(map[string]int64, len(c.outcomes.Errors))
	for k, v := range c.outcomes.Errors {
		o.Errors[k] = v
	}
	o.InFlight = inFlight
	return out, o
}

// quantile is the simulator's rule: the element at q × (n − 1), rounded
// down, of the sorted sample.
func quantile(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}
