package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterServer registers, in reg, a collector that takes one snapshot of
// a server's counters with stats on every scrape and exports it as the
// server l.Target: stormguard_server_offered_total (by try),
// stormguard_server_requests_total (by outcome and reason),
// stormguard_server_concurrency_limit_requests,
// stormguard_server_in_flight_requests and
// stormguard_server_queued_requests (see the package documentation).
//
// stats is the server's Stats method: httpx.Server.Stats,
// grpcx.Server.Stats or admit.Gate.Stats, which all report in
// [admit.Stats]. Nothing runs between scrapes. It returns the registry's
// error if reg refuses the collector; registering the same target twice is
// such an error.
func RegisterServer(reg prometheus.Registerer, l Labels, stats func() admit.Stats) error {
	return reg.Register(newServerCollector(l, stats))
}

// serverCollector exports a server's Stats snapshot.
type serverCollector struct {
	stats                                     func() admit.Stats
	offered, requests, limit, inFlight, queue *prometheus.Desc
	outcomes                                  []schema.Labels
}

func newServerCollector(l Labels, stats func() admit.Stats) *serverCollector {
	return &serverCollector{
		stats:    stats,
		offered:  desc(schema.ServerOffered, l),
		requests: desc(schema.ServerRequests, l),
		limit:    desc(schema.ServerConcurrencyLimit, l),
		inFlight: desc(schema.ServerInFlight, l),
		queue:    desc(schema.ServerQueued, l),
		outcomes: schema.ServerOutcomes(),
	}
}

// Describe implements prometheus.Collector.
func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.offered, c.requests, c.limit, c.inFlight, c.queue} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one snapshot per scrape.
func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := schema.ServerValues(c.stats())
	for i, try := range schema.Tries {
		ch <- prometheus.MustNewConstMetric(c.offered, prometheus.CounterValue, float64(s.Offered[i]), try)
	}
	for i, lv := range c.outcomes {
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(s.Requests[i]), lv...)
	}
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(s.Limit))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(s.Queued))
}

// QueueWait registers, in reg, the histogram
// stormguard_server_queue_wait_seconds for the server l.Target and returns
// the function that observes it, to set as the OnQueueWait of
// httpx.ServerConfig, grpcx.ServerConfig or admit.Config. Its buckets run
// from 0.5 ms to about 16 s, doubling. It panics, as prometheus.MustRegister
// does, if reg refuses the histogram; registering the same target twice
// reuses the histogram registered first.
func QueueWait(reg prometheus.Registerer, l Labels) func(time.Duration) {
	m := schema.ServerQueueWait
	h, err := register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: m.Name, Help: m.Help, ConstLabels: constLabels(l), Buckets: m.Buckets,
	}))
	if err != nil {
		panic(err)
	}
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}
