package otelx

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterBreaker registers, with mp's meter, instruments that read the
// circuit breaker b when collected, as the client of target — the series
// package metrics' RegisterBreaker exports to Prometheus, with the same
// names, units and meanings:
//
//	stormguard_breaker_state              gauge    0 closed, 1 half-open, 2 open: b's state now
//	stormguard_breaker_transitions_total  counter  changes of state, by attribute to (the state changed to)
//	stormguard_breaker_refused_total      counter  calls refused, unsent
//
// They read b's own counters (breaker.Breaker.Stats), so the breaker's
// paths pay nothing for them. For the transitions as span events, call
// [BreakerTransition] where the request's context is at hand. Unregister
// the returned Registration to stop.
func RegisterBreaker(mp metric.MeterProvider, target string, b *breaker.Breaker, extra ...attribute.KeyValue) (metric.Registration, error) {
	m := meter(mp)
	state, err := m.Int64ObservableGauge(schema.BreakerState.Name,
		metric.WithDescription(schema.BreakerState.Help), metric.WithUnit(schema.BreakerState.Unit))
	if err != nil {
		return nil, err
	}
	trans, err := m.Int64ObservableCounter(schema.BreakerTransitions.Name,
		metric.WithDescription(schema.BreakerTransitions.Help), metric.WithUnit(schema.BreakerTransitions.Unit))
	if err != nil {
		return nil, err
	}
	refused, err := m.Int64ObservableCounter(schema.BreakerRefused.Name,
		metric.WithDescription(schema.BreakerRefused.Help), metric.WithUnit(schema.BreakerRefused.Unit))
	if err != nil {
		return nil, err
	}
	self := metric.WithAttributeSet(attrs(schema.BreakerState, target, extra))
	to := func(s breaker.State) metric.ObserveOption {
		return metric.WithAttributeSet(attrs(schema.BreakerTransitions, target, extra, s.String()))
	}
	toOpen, toHalf, toClosed := to(breaker.Open), to(breaker.HalfOpen), to(breaker.Closed)
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := b.Stats()
		o.ObserveInt64(state, int64(schema.BreakerStateValue(s.State.String())), self)
		o.ObserveInt64(trans, int64(s.Opens), toOpen)
		o.ObserveInt64(trans, int64(s.HalfOpens), toHalf)
		o.ObserveInt64(trans, int64(s.Closes), toClosed)
		o.ObserveInt64(refused, int64(s.Refused), self)
		return nil
	}, state, trans, refused)
}
