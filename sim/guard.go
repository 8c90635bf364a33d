package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/sim/result"
	"github.com/stormguard/stormguard/sim/scenario"
)

// Limits bound what a run may cost. [RunWithin] refuses a scenario whose
// [Estimate] exceeds them, before it allocates anything; [Run] uses
// [DefaultLimits]. A zero field takes the default; +Inf lifts the limit.
type Limits struct {
	// Events: the most events a run may simulate [DefaultMaxEvents].
	Events float64
	// Memory: the most bytes a run may hold at once [DefaultMaxMemory].
	Memory float64
}

// The default limits: some minutes of simulation on one core (the
// simulator handles 4 to 9 million events a second, BenchmarkHotOS and
// BenchmarkSeed004), and memory a laptop has to spare.
const (
	DefaultMaxEvents = 2e9
	DefaultMaxMemory = 4e9
)

// DefaultLimits are the limits of [Run].
var DefaultLimits = Limits{Events: DefaultMaxEvents, Memory: DefaultMaxMemory}

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.Events == 0 {
		l.Events = DefaultMaxEvents
	}
	if l.Memory == 0 {
		l.Memory = DefaultMaxMemory
	}
	return l
}

// Cost is what a run is estimated to cost, and what drives each figure:
// the scenario's keys and values, as "clients.app.arrivals.rate 1e+09/s ×
// duration 1000000h".
//
// Events counts first tries only (an arrival, and the delivery, the work
// and the reply of each hop of the call graph), the statistics bins and
// the triggers; retries add to it. Memory counts, at their peak, the time
// series (the counts while the run goes on, and its Result), the requests
// in flight (each hop of every request alive at once: for open-loop
// arrivals the peak rate × the client's timeout × its attempts), closed-loop
// users, bursts, one retrier per client process, the work queued at each
// service and the messages an outage in hold mode keeps.
type Cost struct {
	Events       float64
	EventsDriver string
	Memory       float64
	MemoryDriver string
	// Series is the part of Memory that the Result holds: its time series.
	Series float64
}

// Sizes the estimate counts, in bytes; measured on the simulator (a
// pending request's request and attempt slots, its events and its queue
// entry, with the slack of the growing slices).
const (
	bytesPerRequest = 1280 // one hop of a request in flight
	bytesPerProcess = 640  // a client process's retrier and budget
	// bytesPerReplica: a replica's state, its admission queue's and
	// limiter's (11.8 kB measured over 10,000 replicas, with the slack
	// of the growing slices when an autoscaler adds them).
	bytesPerReplica = 16 << 10
	// bytesPerKey and bytesPerKeyTTL: a keyed cache's arrays per key (its
	// popularity, LRU links, presence: 17 B measured; and the fill time
	// with a TTL: 25 B), with a margin.
	bytesPerKey    = 20
	bytesPerKeyTTL = 28
	bytesPerEvent  = 48 // an event in the heap or a held message
	eventsPerHop   = 3  // delivery, end of the work, reply
	// scheduleReadsPerEvent: steps of a schedule scan that cost one event.
	scheduleReadsPerEvent = 300
	maxEventRate          = 1e9 // constant arrivals closer than 1 ns never advance the clock
)

// term is one part of an estimate and what drives it.
type term struct {
	v   float64
	why string
}

// sum adds terms and names the largest.
func sum(ts []term) (float64, string) {
	total, top := 0.0, term{}
	for _, t := range ts {
		total += t.v
		if t.v > top.v || math.IsNaN(t.v) {
			top = t
		}
	}
	return total, top.why
}

// Estimate returns what a run of s would cost: events to simulate and
// memory to hold (see [Cost]). s must be valid (see [scenario.Scenario.Validate]).
// It takes microseconds and allocates nothing in proportion to the run.
func Estimate(s scenario.Scenario) Cost { return estimate(s, false) }

// EstimateSpooled is [Estimate] for a run made with [RunSpooled], whose
// series go to a spool as they close: of them it holds, while it runs and
// in its Result, the counts of the requests that ended by the bin they
// arrived in (16 bytes a bin and client), and, while its verdict judges
// them, 24 bytes a bin and client and 32 a bin and service.
func EstimateSpooled(s scenario.Scenario) Cost { return estimate(s, true) }

func estimate(s scenario.Scenario, spooled bool) Cost {
	s = s.WithDefaults()
	nbins := math.Ceil(float64(s.Duration) / float64(s.Bin))
	if s.Duration == 0 {
		nbins = 0
	}
	perBin := float64(len(s.Clients))*float64(unsafe.Sizeof(result.ClientBin{})) +
		float64(len(s.Services))*float64(unsafe.Sizeof(result.ServiceBin{}))
	var c Cost
	c.Series = nbins * perBin
	binsWhy := fmt.Sprintf("duration %s / bin %s = %s bins × %d series", dur2s(s.Duration), dur2s(s.Bin), num(nbins), len(s.Clients)+len(s.Services))
	events := []term{{nbins, binsWhy}, {2 * float64(len(s.Triggers)), "triggers"}}
	// While the run goes on it keeps counts of the size of its Result,
	// and the Result is built from them: 2.5 × with the slack.
	memory := []term{{2.5 * c.Series, binsWhy}}
	if spooled {
		c.Series = nbins * 16 * float64(len(s.Clients))
		memory[0].v = c.Series + nbins*(24*float64(len(s.Clients))+32*float64(len(s.Services)))
	}

	idx := map[string]int{}
	for i, v := range s.Services {
		idx[v.Name] = i
	}
	g := graph{s: s, idx: idx, hops: map[int]float64{}, hold: map[int]float64{}}
	// Requests reaching each service over the run, and at the peak rate.
	arrived := make([]float64, len(s.Services))
	for _, cl := range s.Clients {
		ti, ok := idx[cl.Target]
		if !ok {
			continue
		}
		path := "clients." + cl.Name
		hops := g.hopsOf(ti)
		reqs, why := requests(s, cl, g.holdOf(ti)+2*meanS(cl.Network.Latency))
		events = append(events, term{reqs * (1 + eventsPerHop*hops), why})
		if n := len(cl.Arrivals.Schedule); n > 0 {
			// Every arrival reads the schedule from its start.
			events = append(events, term{reqs * float64(n) / scheduleReadsPerEvent,
				fmt.Sprintf("%s.arrivals.schedule of %d points, read at every one of about %s arrivals", path, n, num(reqs))})
		}
		// Every bin reads the budget of every process.
		events = append(events, term{float64(cl.Processes) * nbins,
			fmt.Sprintf("%s.processes %s × %s bins (every bin reads each process's budget)", path, num(float64(cl.Processes)), num(nbins))})
		g.flow(ti, reqs, arrived)

		inflight, mwhy := inFlight(s, cl)
		memory = append(memory, term{inflight * hops * bytesPerRequest, mwhy})
		memory = append(memory, term{float64(cl.Processes) * bytesPerProcess,
			fmt.Sprintf("%s.processes %s, one retrier each", path, num(float64(cl.Processes)))})
	}
	for i, v := range s.Services {
		cp := v.Queue.Capacity
		if cp == 0 {
			cp = scenario.DefaultQueueCapacity
		}
		if v.Capacity != nil {
			cp = 0 // no queue: admitted or refused at once
		}
		q := math.Min(float64(cp), arrived[i])
		memory = append(memory, term{q * bytesPerRequest,
			fmt.Sprintf("services.%s.queue.capacity %s of queued work", v.Name, num(float64(cp)))})
		n, why := replicasAtMost(s, v)
		memory = append(memory, term{n * bytesPerReplica, why})
		if c := v.Cache; c != nil && c.Keys > 0 {
			per, ttl := float64(bytesPerKey), ""
			if c.TTL > 0 {
				per, ttl = bytesPerKeyTTL, " with a TTL"
			}
			memory = append(memory, term{float64(c.Keys) * per,
				fmt.Sprintf("services.%s.cache.keys %s, %s B each%s", v.Name, num(float64(c.Keys)), num(per), ttl)})
		}
	}
	rate := 0.0
	for _, cl := range s.Clients {
		r, _ := peakRate(s, cl)
		rate += r
	}
	for i, t := range s.Triggers {
		if t.Kind != "outage" || t.Mode == "drop" {
			continue
		}
		held := rate * t.Duration.Seconds()
		memory = append(memory, term{held * (bytesPerEvent + bytesPerRequest),
			fmt.Sprintf("triggers.%d (an outage in hold mode) keeps %s/s × triggers.%d.duration %s of messages", i, num(rate), i, dur2s(t.Duration))})
	}
	c.Events, c.EventsDriver = sum(events)
	c.Memory, c.MemoryDriver = sum(memory)
	return c
}

// replicasAtMost is the most replicas service v can have at once: its
// own, its autoscaler's maximum, the largest replicas step of the
// runbook; and the keys that set it.
func replicasAtMost(s scenario.Scenario, v scenario.Service) (float64, string) {
	n, why := float64(v.Replicas), fmt.Sprintf("services.%s.replicas %d", v.Name, v.Replicas)
	if a := v.Autoscale; a != nil && float64(a.Max) > n {
		n, why = float64(a.Max), fmt.Sprintf("services.%s.autoscale.max %d", v.Name, a.Max)
	}
	for i, a := range s.Actions {
		if a.Kind == "replicas" && a.Target == v.Name && math.Ceil(a.Value) > n {
			n, why = math.Ceil(a.Value), fmt.Sprintf("actions.%d.value %s (replicas of %s)", i, num(a.Value), v.Name)
		}
	}
	return n, why + fmt.Sprintf(" × %s per replica", bytesText(bytesPerReplica))
}

// graph walks the call graph of a valid (acyclic) scenario.
type graph struct {
	s    scenario.Scenario
	idx  map[string]int
	hops map[int]float64 // hops of one request into a service, its calls' included
	hold map[int]float64 // seconds a worker is held, its calls' included
}

func (g *graph) hopsOf(i int) float64 {
	if h, ok := g.hops[i]; ok {
		return h
	}
	g.hops[i] = 1 // a cycle (Validate rejects them) ends here
	h := 1.0
	for _, c := range g.s.Services[i].Calls {
		if j, ok := g.idx[c.Service]; ok {
			h += g.hopsOf(j)
		}
	}
	g.hops[i] = h
	return h
}

func (g *graph) holdOf(i int) float64 {
	if h, ok := g.hold[i]; ok {
		return h
	}
	g.hold[i] = 0
	v := g.s.Services[i]
	h := meanS(v.ServiceTime)
	for _, c := range v.Calls {
		if j, ok := g.idx[c.Service]; ok {
			h += 2*meanS(c.Network.Latency) + g.holdOf(j)
		}
	}
	g.hold[i] = h
	return h
}

// flow adds n requests into service i, and into what it calls.
func (g *graph) flow(i int, n float64, into []float64) {
	into[i] += n
	for _, c := range g.s.Services[i].Calls {
		if j, ok := g.idx[c.Service]; ok && j != i {
			g.flow(j, n, into)
		}
	}
}

// meanS is the mean of a distribution, seconds.
func meanS(d scenario.Dist) float64 { return d.Average().Seconds() }

// requests estimates a client's first tries over the run; cycle is the
// least time a closed-loop user's request takes, seconds.
func requests(s scenario.Scenario, c scenario.Client, cycle float64) (float64, string) {
	a := c.Arrivals
	path := "clients." + c.Name + ".arrivals"
	switch a.Kind {
	case "burst":
		if a.At >= s.Duration {
			return 0, path + ".at"
		}
		return float64(a.Count), fmt.Sprintf("%s.count %s", path, num(float64(a.Count)))
	case "closed":
		cycle += meanS(a.Think)
		if cycle <= 0 {
			return math.Inf(1), fmt.Sprintf("%s.users %s with no think time and no service time: virtual time never advances", path, num(float64(a.Users)))
		}
		n := float64(a.Users) * s.Duration.Seconds() / cycle
		return n, fmt.Sprintf("%s.users %s × duration %s / %s per request (think time and service time)", path, num(float64(a.Users)), dur2s(s.Duration), secs(cycle))
	}
	peak, key := peakRate(s, c)
	if a.Kind == "constant" && peak > maxEventRate {
		return math.Inf(1), fmt.Sprintf("%s: constant arrivals less than 1ns apart never let virtual time advance", key)
	}
	n := integral(a, s.Duration)
	why := fmt.Sprintf("%s.rate %s/s × duration %s", path, num(a.Rate), dur2s(s.Duration))
	if len(a.Schedule) > 0 {
		why = fmt.Sprintf("%s.schedule, up to %s/s, over duration %s", path, num(peakOf(a)), dur2s(s.Duration))
	}
	// A load trigger multiplies the rate while it lasts.
	extra, top := 0.0, term{}
	for i, t := range s.Triggers {
		if t.Kind != "load" || !(t.Factor > 1) || t.At >= s.Duration {
			continue
		}
		d := min(t.Duration, s.Duration-t.At)
		e := (t.Factor - 1) * peakOf(a) * d.Seconds()
		extra += e
		if e > top.v {
			top = term{e, fmt.Sprintf("triggers.%d.factor %s × %s/s of arrivals for triggers.%d.duration %s", i, num(t.Factor), num(peakOf(a)), i, dur2s(t.Duration))}
		}
	}
	if top.v > n {
		why = top.why
	}
	return n + extra, why
}

// integral is the number of arrivals of an open-loop client in [0, end],
// following the schedule's steps and ramps.
func integral(a scenario.Arrivals, end time.Duration) float64 {
	total := 0.0
	prevT, prevR := time.Duration(0), a.Rate
	for _, p := range a.Schedule {
		at := min(p.At, end)
		if at > prevT {
			span := (at - prevT).Seconds()
			if p.Ramp && p.At > prevT {
				// Linear from prevR to p.Rate over [prevT, p.At]; cut at end.
				f := float64(at-prevT) / float64(p.At-prevT)
				total += span * (prevR + (prevR + f*(p.Rate-prevR))) / 2
			} else {
				total += span * prevR
			}
		}
		if p.At >= end {
			return total
		}
		prevT, prevR = p.At, p.Rate
	}
	return total + (end-prevT).Seconds()*prevR
}

// peakOf is the highest rate an open-loop client's arrivals reach.
func peakOf(a scenario.Arrivals) float64 {
	r := a.Rate
	for _, p := range a.Schedule {
		r = max(r, p.Rate)
	}
	return r
}

// peakRate is a client's highest arrival rate, with the load triggers
// applied as if they all overlapped, and the keys and values that set it
// ("clients.app.arrivals.rate 100/s × triggers.0.factor 3"). Closed and
// burst arrivals have none.
func peakRate(s scenario.Scenario, c scenario.Client) (float64, string) {
	a := c.Arrivals
	switch a.Kind {
	case "burst", "closed":
		return 0, ""
	}
	key := "clients." + c.Name + ".arrivals.rate"
	r := a.Rate
	for i, p := range a.Schedule {
		if p.Rate > r {
			r, key = p.Rate, fmt.Sprintf("clients.%s.arrivals.schedule.%d.rate", c.Name, i)
		}
	}
	key += " " + num(r) + "/s"
	for i, t := range s.Triggers {
		if t.Kind == "load" && t.Factor > 1 {
			r *= t.Factor
			key += fmt.Sprintf(" × triggers.%d.factor %s", i, num(t.Factor))
		}
	}
	return r, key
}

// inFlight estimates the requests of a client alive at once, at the peak.
func inFlight(s scenario.Scenario, c scenario.Client) (float64, string) {
	a := c.Arrivals
	path := "clients." + c.Name
	switch a.Kind {
	case "burst":
		return float64(a.Count), fmt.Sprintf("%s.arrivals.count %s requests at once", path, num(float64(a.Count)))
	case "closed":
		return float64(a.Users), fmt.Sprintf("%s.arrivals.users %s, each with a request in flight", path, num(float64(a.Users)))
	}
	peak, key := peakRate(s, c)
	// A request lives until its last attempt times out, or its deadline.
	attempts := max(1, c.Policy.MaxAttempts)
	life := c.Timeout.Seconds() * float64(attempts)
	why := fmt.Sprintf("%s × %s.timeout %s", key, path, dur2s(c.Timeout))
	if attempts > 1 {
		why += fmt.Sprintf(" × %d attempts", attempts)
	}
	if c.Deadline > 0 && c.Deadline.Seconds() < life {
		life = c.Deadline.Seconds()
		why = fmt.Sprintf("%s × %s.deadline %s", key, path, dur2s(c.Deadline))
	}
	return peak * life, why + " of requests in flight"
}

// LimitError is a run refused because its [Estimate] exceeds a limit.
type LimitError struct {
	// Subject is what would run: "the run", "the runs", "the sweep".
	Subject string
	// Quantity is "events" or "memory".
	Quantity string
	// Estimate and Limit, in events or bytes.
	Estimate, Limit float64
	// Driver names the scenario's keys (or flags) that drive the estimate.
	Driver string
}

func (e *LimitError) Error() string {
	subject := e.Subject
	if subject == "" {
		subject = "the run"
	}
	if e.Quantity == "memory" {
		return fmt.Sprintf("%s would need about %s of memory (%s); the limit is %s", subject, bytesText(e.Estimate), e.Driver, bytesText(e.Limit))
	}
	if math.IsInf(e.Estimate, 1) {
		return fmt.Sprintf("%s would simulate events without end (%s)", subject, e.Driver)
	}
	return fmt.Sprintf("%s would simulate about %s events (%s); the limit is %s", subject, num(e.Estimate), e.Driver, num(e.Limit))
}

// Check returns a *LimitError if c exceeds l (zero fields: the defaults):
// the quantity furthest beyond its limit.
func (l Limits) Check(c Cost) error {
	l = l.WithDefaults()
	ratio := func(v, limit float64) float64 {
		if math.IsInf(limit, 1) {
			return 0 // no limit
		}
		return v / limit
	}
	ev, mem := ratio(c.Events, l.Events), ratio(c.Memory, l.Memory)
	switch {
	case (ev > 1 || math.IsNaN(ev)) && (ev >= mem || math.IsNaN(ev)):
		return &LimitError{Quantity: "events", Estimate: c.Events, Limit: l.Events, Driver: c.EventsDriver}
	case mem > 1 || math.IsNaN(mem):
		return &LimitError{Quantity: "memory", Estimate: c.Memory, Limit: l.Memory, Driver: c.MemoryDriver}
	}
	return nil
}

// num writes a number briefly: 0.5, 1.01, 280, 33250, 3.6e9.
func num(x float64) string {
	a := math.Abs(x)
	var s string
	switch {
	case a < 100:
		s = strconv.FormatFloat(x, 'g', 3, 64)
	case a < 1e6:
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	default:
		s = strconv.FormatFloat(x, 'g', 2, 64)
	}
	return strings.NewReplacer("e+0", "e", "e+", "e", "e-0", "e-").Replace(s)
}

// secs writes seconds as a duration.
func secs(s float64) string {
	return dur2s(time.Duration(min(s*1e9, math.MaxInt64)))
}

// dur2s writes a duration without the zero units Go adds: 1000000h, 2m10s.
func dur2s(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return strings.Replace(s, "h0m", "h", 1)
}

// bytesText writes a number of bytes with a decimal unit: 830 MB, 2.4 TB.
func bytesText(b float64) string {
	for _, u := range []struct {
		v    float64
		name string
	}{{1e15, "PB"}, {1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}} {
		if b >= u.v {
			if b >= 1e18 {
				return num(b) + " bytes"
			}
			return num(b/u.v) + " " + u.name
		}
	}
	return num(b) + " bytes"
}
