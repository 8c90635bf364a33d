package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/metrics/schema"
)

// RegisterBreaker registers, in reg, series that read the circuit breaker b
// when scraped, as the client of l.Target (schema.BreakerState,
// schema.BreakerTransitions, schema.BreakerRefused):
//
//	stormguard_breaker_state              gauge    0 closed, 1 half-open, 2 open: b's state now
//	stormguard_breaker_transitions_total  counter  changes of state, by label to (the state changed to)
//	stormguard_breaker_refused_total      counter  calls refused, unsent
//
// Every series exists from the start. They read b's own counters
// ([breaker.Breaker.Stats]), so the breaker's paths pay nothing for them.
// Pass the breaker given to retry.WithBreaker. It returns the registry's
// error if reg refuses a collector (registering the same target's breaker
// twice, say).
func RegisterBreaker(reg prometheus.Registerer, l Labels, b *breaker.Breaker) error {
	cl := constLabels(l)
	state := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: schema.BreakerState.Name, Help: schema.BreakerState.Help, ConstLabels: cl},
		func() float64 { return float64(schema.BreakerStateValue(b.State().String())) })
	if err := reg.Register(state); err != nil {
		return err
	}
	for _, tr := range []struct {
		to    breaker.State
		count func(breaker.Stats) uint64
	}{
		{breaker.Open, func(s breaker.Stats) uint64 { return s.Opens }},
		{breaker.HalfOpen, func(s breaker.Stats) uint64 { return s.HalfOpens }},
		{breaker.Closed, func(s breaker.Stats) uint64 { return s.Closes }},
	} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: schema.BreakerTransitions.Name, Help: schema.BreakerTransitions.Help,
			ConstLabels: with(cl, "to", tr.to.String())}, func() float64 { return float64(tr.count(b.Stats())) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: schema.BreakerRefused.Name, Help: schema.BreakerRefused.Help, ConstLabels: cl},
		func() float64 { return float64(b.Stats().Refused) }))
}

// with returns a copy of labels with k=v added.
func with(labels prometheus.Labels, k, v string) prometheus.Labels {
	out := make(prometheus.Labels, len(labels)+1)
	for lk, lv := range labels {
		out[lk] = lv
	}
	out[k] = v
	return out
}
