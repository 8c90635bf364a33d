package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/breaker"
)

const (
	nameBreakerState       = "stormguard_breaker_state"
	nameBreakerTransitions = "stormguard_breaker_transitions_total"
	nameBreakerRefused     = "stormguard_breaker_refused_total"

	helpBreakerState       = "1 for the circuit breaker's state now (closed, open or half-open), 0 for the others."
	helpBreakerTransitions = "Changes of the circuit breaker's state, by the state it changed to."
	helpBreakerRefused     = "Calls the circuit breaker refused, unsent."
)

// RegisterBreaker registers, in reg, series that read the circuit breaker b
// when scraped, as the client side of l.Target:
//
//	stormguard_breaker_state              gauge    state        1 for b's state now (closed, open,
//	                                                            half-open), 0 for the other two
//	stormguard_breaker_transitions_total  counter  to           changes of state, by the state changed to
//	stormguard_breaker_refused_total      counter               calls refused, unsent
//
// Every series exists from the start. They read b's own counters
// ([breaker.Breaker.Stats]), so the breaker's paths pay nothing for them.
// Pass the breaker given to retry.WithBreaker. It returns the registry's
// error if reg refuses a collector (registering the same target's breaker
// twice, say).
func RegisterBreaker(reg prometheus.Registerer, l Labels, b *breaker.Breaker) error {
	cl := constLabels(sideClient, l)
	for _, s := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen} {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: nameBreakerState, Help: helpBreakerState,
			ConstLabels: with(cl, "state", s.String())}, func() float64 {
			if b.State() == s {
				return 1
			}
			return 0
		})
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	for _, tr := range []struct {
		to    breaker.State
		count func(breaker.Stats) uint64
	}{
		{breaker.Open, func(s breaker.Stats) uint64 { return s.Opens }},
		{breaker.HalfOpen, func(s breaker.Stats) uint64 { return s.HalfOpens }},
		{breaker.Closed, func(s breaker.Stats) uint64 { return s.Closes }},
	} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: nameBreakerTransitions, Help: helpBreakerTransitions,
			ConstLabels: with(cl, "to", tr.to.String())}, func() float64 { return float64(tr.count(b.Stats())) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: nameBreakerRefused, Help: helpBreakerRefused, ConstLabels: cl},
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
