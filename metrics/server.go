package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/admit"
)

// RegisterServer registers, in reg, a collector that takes one snapshot of
// a server's counters with stats on every scrape and exports it as the
// server side of l.Target: stormguard_offered_total,
// stormguard_attempts_total, stormguard_retries_total,
// stormguard_goodput_total, stormguard_throughput_total,
// stormguard_wasted_total, stormguard_shed_total,
// stormguard_expired_dropped_total, stormguard_concurrency_limit,
// stormguard_in_flight and stormguard_queued (see the package
// documentation).
//
// stats is the server's Stats method: httpx.Server.Stats,
// grpcx.Server.Stats or admit.Gate.Stats, which all report in
// [admit.Stats]. Nothing runs between
// scrapes. It returns the registry's error if reg refuses the collector;
// registering the same target twice is such an error.
func RegisterServer(reg prometheus.Registerer, l Labels, stats func() admit.Stats) error {
	return reg.Register(newServerCollector(l, stats))
}

// serverCollector exports a server's Stats snapshot.
type serverCollector struct {
	stats func() admit.Stats

	offered, attempts, retries, goodput, throughput, wasted *prometheus.Desc
	shed, expired, limit, inFlight, queued                  *prometheus.Desc
}

func newServerCollector(l Labels, stats func() admit.Stats) *serverCollector {
	cl := constLabels(sideServer, l)
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	return &serverCollector{
		stats:      stats,
		offered:    d(nameOffered, helpOffered),
		attempts:   d(nameAttempts, helpAttempts, "outcome"),
		retries:    d(nameRetries, helpRetries),
		goodput:    d(nameGoodput, helpGoodput),
		throughput: d(nameThroughput, helpThroughput),
		wasted:     d(nameWasted, helpWasted),
		shed:       d(nameShed, helpShed, "reason"),
		expired:    d(nameExpired, helpExpired),
		limit:      d(nameLimit, helpLimit),
		inFlight:   d(nameInFlight, helpInFlight),
		queued:     d(nameQueued, helpQueued),
	}
}

// Describe implements prometheus.Collector.
func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.offered, c.attempts, c.retries, c.goodput, c.throughput, c.wasted, c.shed, c.expired, c.limit, c.inFlight, c.queued} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot per scrape.
func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(c.offered, st.Arrived)
	counter(c.retries, st.Retries)
	counter(c.goodput, st.Goodput)
	counter(c.throughput, st.Goodput+st.Failed+st.Wasted)
	counter(c.wasted, st.Wasted)
	counter(c.expired, st.Expired)
	counter(c.attempts, st.Goodput, "goodput")
	counter(c.attempts, st.Failed, "failed")
	counter(c.attempts, st.Wasted, "wasted")
	counter(c.attempts, st.ShedTotal(), "shed")
	counter(c.attempts, st.Expired, "expired")
	counter(c.attempts, st.Canceled, "canceled")
	for r, v := range st.Shed {
		counter(c.shed, v, admit.ShedReason(r).String())
	}
	gauge(c.limit, st.Limit)
	gauge(c.inFlight, st.InFlight)
	gauge(c.queued, st.Queued)
}

// QueueWait registers, in reg, the histogram stormguard_queue_wait_seconds
// for the server side of l.Target and returns the function that observes
// it, to set as the OnQueueWait of httpx.ServerConfig, grpcx.ServerConfig
// or admit.Config. Its buckets run from
// 0.5 ms to about 16 s, doubling. It panics, as prometheus.MustRegister
// does, if reg refuses the histogram; registering the same target twice
// reuses the histogram registered first.
func QueueWait(reg prometheus.Registerer, l Labels) func(time.Duration) {
	h, err := register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        nameQueueWait,
		Help:        helpQueueWait,
		ConstLabels: constLabels(sideServer, l),
		Buckets:     prometheus.ExponentialBuckets(0.0005, 2, 16),
	}))
	if err != nil {
		panic(err)
	}
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}
