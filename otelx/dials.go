package otelx

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterDials registers, with mp's meter, gauges that read the kill
// switch's dials d when collected, as the dials of target — the series
// package metrics' RegisterDials exports to Prometheus, with the same
// names, units and meanings: stormguard_dials_retries_off,
// stormguard_dials_shed_ratio, stormguard_dials_limit_override_requests
// and stormguard_dials_last_change_timestamp_seconds (with attribute
// origin: none, local or fleet). Unregister the returned Registration to
// stop.
func RegisterDials(mp metric.MeterProvider, target string, d *killswitch.Dials, extra ...attribute.KeyValue) (metric.Registration, error) {
	m := meter(mp)
	gauge := func(sm schema.Metric) (metric.Float64ObservableGauge, error) {
		return m.Float64ObservableGauge(sm.Name, metric.WithDescription(sm.Help), metric.WithUnit(sm.Unit))
	}
	off, err1 := gauge(schema.DialsRetriesOff)
	shed, err2 := gauge(schema.DialsShedRatio)
	limit, err3 := gauge(schema.DialsLimitOverride)
	changed, err4 := gauge(schema.DialsLastChange)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	self := metric.WithAttributeSet(attrs(schema.DialsRetriesOff, target, extra))
	var byOrigin [len(schema.Origins)]metric.ObserveOption
	for i, o := range schema.Origins {
		byOrigin[i] = metric.WithAttributeSet(attrs(schema.DialsLastChange, target, extra, o))
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := schema.DialsValues(d)
		o.ObserveFloat64(off, s.RetriesOff, self)
		o.ObserveFloat64(shed, s.ShedRatio, self)
		o.ObserveFloat64(limit, s.LimitOverride, self)
		for i, name := range schema.Origins {
			if name == s.Origin {
				o.ObserveFloat64(changed, s.ChangedAt, byOrigin[i])
			}
		}
		return nil
	}, off, shed, limit, changed)
}
