package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterPolicy registers, in reg, a collector that reads a live policy
// file's state on every scrape (policyfile.Live.State) and exports it as
// the policy of l.Target:
//
//	stormguard_policy_version_info{version}   gauge    1 for the version running now (a hash of the file)
//	stormguard_policy_reloads_total{result}   counter  new versions read: applied, refused
//
// The version series changes label when a new version is applied: one
// series at a time. It returns the registry's error if reg refuses the
// collector.
func RegisterPolicy(reg prometheus.Registerer, l Labels, state func() schema.PolicyState) error {
	return reg.Register(&policyCollector{
		state:   state,
		version: desc(schema.PolicyVersion, l),
		reloads: desc(schema.PolicyReloads, l),
	})
}

type policyCollector struct {
	state            func() schema.PolicyState
	version, reloads *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.version
	ch <- c.reloads
}

// Collect implements prometheus.Collector.
func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	ch <- prometheus.MustNewConstMetric(c.version, prometheus.GaugeValue, 1, s.Version)
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(s.Applied), schema.ResultApplied)
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(s.Refused), schema.ResultRefused)
}
