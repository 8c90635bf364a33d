package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterDials registers, in reg, a collector that reads the kill
// switch's dials d on every scrape and exports them as the dials of
// l.Target (the service whose process they steer):
//
//	stormguard_dials_retries_off                     gauge  1 while retries are off
//	stormguard_dials_shed_ratio                      gauge  the fraction shed, in [0, 1]
//	stormguard_dials_limit_override_requests         gauge  the limit override, 0 for none
//	stormguard_dials_last_change_timestamp_seconds   gauge  when they last changed (Unix time), by origin:
//	                                                        local, fleet (none, 0, if never)
//
// The last change's series carries its origin as a label: one series at a
// time, the current origin's: fleet for the dials a fleet.Watcher applied
// (it records them so), local for the process's own admin endpoint or code.
// Nothing runs between scrapes.
// It returns the registry's error if reg refuses the collector;
// registering the same target twice is such an error.
func RegisterDials(reg prometheus.Registerer, l Labels, d *killswitch.Dials) error {
	return reg.Register(&dialsCollector{
		d:       d,
		off:     desc(schema.DialsRetriesOff, l),
		shed:    desc(schema.DialsShedRatio, l),
		limit:   desc(schema.DialsLimitOverride, l),
		changed: desc(schema.DialsLastChange, l),
	})
}

type dialsCollector struct {
	d                         *killswitch.Dials
	off, shed, limit, changed *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *dialsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.off, c.shed, c.limit, c.changed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *dialsCollector) Collect(ch chan<- prometheus.Metric) {
	s := schema.DialsValues(c.d)
	ch <- prometheus.MustNewConstMetric(c.off, prometheus.GaugeValue, s.RetriesOff)
	ch <- prometheus.MustNewConstMetric(c.shed, prometheus.GaugeValue, s.ShedRatio)
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, s.LimitOverride)
	ch <- prometheus.MustNewConstMetric(c.changed, prometheus.GaugeValue, s.ChangedAt, s.Origin)
}
