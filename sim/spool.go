package sim

import (
	"github.com/stormguard/stormguard/sim/result"
)

// A run made with RunSpooled keeps two places in its per-bin arrays (see
// clientStats): the bins that can be open at once. An event at the instant
// a bin ends may count in the next bin before the bin event closes the
// first; once closed, a bin takes no more counts, except the last, which
// events at the end of the run still count in (binOf clamps to it). So a
// bin goes to the spool as its bin event closes it (the last: at the end
// of the run), and its place is cleared for the bin after next. A record
// is a bin of every series: each client's ClientBin without T, ArrivedOK
// and ArrivedFailed (clientValues values), then each service's ServiceBin
// without T (serviceValues), as result computes them; spooledSeries reads
// them back into the Result's series, with T and the arrival counts the
// run kept.

const (
	clientValues  = 14
	serviceValues = 18
)

// flushBins gives the spool the bins not given yet up to bin b, which
// closed, unless it is the last and the run is not over (end).
func (w *world) flushBins(b int, end bool) {
	if b == w.nbins-1 && !end {
		return
	}
	perS := 1 / w.bin.Seconds()
	rec := make([]float64, 0, clientValues*len(w.clients)+serviceValues*len(w.services))
	for ; w.flushed <= b; w.flushed++ {
		p := w.flushed & w.binMask
		rec = rec[:0]
		for i := range w.clients {
			st := &w.clients[i].stats
			g := st.gaveUp[p].Scale(perS)
			rec = append(rec, float64(st.demand[p])*perS, float64(st.goodput[p])*perS, float64(st.degraded[p])*perS,
				g.Attempts, g.Budget, g.Deadline, g.NotRetryable, g.ServerStop, g.Disabled, g.Declined, g.BreakerOpen,
				st.p50[p], st.p99[p], st.budget[p])
			st.demand[p], st.goodput[p], st.degraded[p], st.gaveUp[p] = 0, 0, 0, result.GiveUps{}
			st.p50[p], st.p99[p], st.budget[p] = 0, 0, 0
		}
		for i := range w.services {
			st := &w.services[i].stats
			rec = append(rec, float64(st.first[p])*perS, float64(st.retries[p])*perS, float64(st.completed[p])*perS,
				float64(st.goodput[p])*perS, float64(st.wasted[p])*perS, float64(st.shed[p])*perS, float64(st.expired[p])*perS,
				st.queue[p], st.busy[p], st.limit[p],
				float64(st.hung[p])*perS, float64(st.crashed[p])*perS, float64(st.crashes[p]), st.up[p],
				float64(st.cacheHits[p])*perS, float64(st.cacheMisses[p])*perS, float64(st.overhead[p])/1e9*perS,
				float64(st.superseded[p])*perS)
			for _, a := range []*[]int64{&st.first, &st.retries, &st.completed, &st.goodput, &st.wasted, &st.shed, &st.expired,
				&st.hung, &st.crashed, &st.crashes, &st.cacheHits, &st.cacheMisses, &st.overhead, &st.superseded} {
				(*a)[p] = 0
			}
			st.queue[p], st.busy[p], st.limit[p], st.up[p] = 0, 0, 0, 0
		}
		w.spool.Append(rec)
	}
}

// spooledSeries fills r's series with Streams that read the spool: the
// bins as result would build them from the per-bin arrays, each
// client's arrival counts from its okArr and failArr (perS: 1 / bin).
func (w *world) spooledSeries(r *result.Result, perS float64) {
	sp, binS := w.spool, w.bin.Seconds()
	nc := len(w.clients)
	for i := range w.clients {
		c := &w.clients[i]
		s := result.ClientSeries{Name: c.spec.Name, Total: c.stats.total}
		if n := s.Total.Succeeded; n > 0 {
			s.Total.SuccessLatencyS /= float64(n)
		}
		if n := s.Total.Failed; n > 0 {
			s.Total.FailureLatencyS /= float64(n)
		}
		okArr, failArr, at := c.stats.okArr, c.stats.failArr, clientValues*i
		s.Stream = func(yield func(result.ClientBin) bool) {
			b := 0
			for rec := range sp.Records() {
				x := rec[at : at+clientValues]
				bin := result.ClientBin{
					T:       float64(b) * binS,
					Demand:  x[0],
					Goodput: x[1], Degraded: x[2],
					GaveUp: result.GiveUps{Attempts: x[3], Budget: x[4], Deadline: x[5], NotRetryable: x[6],
						ServerStop: x[7], Disabled: x[8], Declined: x[9], BreakerOpen: x[10]},
					ArrivedOK:     float64(okArr[b]) * perS,
					ArrivedFailed: float64(failArr[b]) * perS,
					LatencyP50:    x[11],
					LatencyP99:    x[12],
					Budget:        x[13],
				}
				if !yield(bin) {
					return
				}
				b++
			}
		}
		r.Clients = append(r.Clients, s)
	}
	for i := range w.services {
		v := &w.services[i]
		s := result.ServiceSeries{Name: v.spec.Name, Total: v.stats.total}
		at := clientValues*nc + serviceValues*i
		s.Stream = func(yield func(result.ServiceBin) bool) {
			b := 0
			for rec := range sp.Records() {
				x := rec[at : at+serviceValues]
				bin := result.ServiceBin{T: float64(b) * binS,
					OfferedFirst: x[0], OfferedRetries: x[1], Throughput: x[2], Goodput: x[3], Wasted: x[4],
					Shed: x[5], Expired: x[6], Queue: x[7], Busy: x[8], Limit: x[9], Hung: x[10], Crashed: x[11],
					Crashes: x[12], ReplicasUp: x[13], CacheHits: x[14], CacheMisses: x[15], OverheadS: x[16],
					Superseded: x[17]}
				if !yield(bin) {
					return
				}
				b++
			}
		}
		r.Services = append(r.Services, s)
	}
}
