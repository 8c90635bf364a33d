package otelx

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterPolicy registers, with mp's meter, instruments that read a live
// policy file's state when collected (policyfile.Live.State), as the
// policy of target — the series package metrics' RegisterPolicy exports:
// stormguard_policy_version_info (attribute version, the hash of the file
// running now) and stormguard_policy_reloads_total (attribute result:
// applied, refused). Unregister the returned Registration to stop.
func RegisterPolicy(mp metric.MeterProvider, target string, state func() schema.PolicyState, extra ...attribute.KeyValue) (metric.Registration, error) {
	m := meter(mp)
	pv, pr := schema.PolicyVersion, schema.PolicyReloads
	version, err1 := m.Int64ObservableGauge(pv.Name, metric.WithDescription(pv.Help), metric.WithUnit(pv.Unit))
	reloads, err2 := m.Int64ObservableCounter(pr.Name, metric.WithDescription(pr.Help), metric.WithUnit(pr.Unit))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	applied := metric.WithAttributeSet(attrs(pr, target, extra, schema.ResultApplied))
	refused := metric.WithAttributeSet(attrs(pr, target, extra, schema.ResultRefused))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := state()
		o.ObserveInt64(version, 1, metric.WithAttributeSet(attrs(pv, target, extra, s.Version)))
		o.ObserveInt64(reloads, int64(s.Applied), applied)
		o.ObserveInt64(reloads, int64(s.Refused), refused)
		return nil
	}, version, reloads)
}
