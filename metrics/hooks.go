package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/retry"
)

// RetryHooks returns hooks that count a retrier's attempts and time its
// requests in reg, as the client of target l.Target: the series
// stormguard_client_attempts_total (by try and class) and
// stormguard_client_request_duration_seconds (by outcome and reason) of the
// schema (see the package documentation). Install them with
// retry.WithHooks; combine them with others with retry.JoinHooks.
//
// Every series is created at once, at zero. The hooks allocate nothing;
// they make the retrier read the clock at the start and the end of every
// request (two time.Now calls) so that its duration is known, and cost a
// few atomic additions per attempt. Several retriers may share one target:
// the series registered first are reused. RetryHooks panics, as
// prometheus.MustRegister does, if reg refuses the collectors for any other
// reason (a name registered with other label names, say).
func RetryHooks(reg prometheus.Registerer, l Labels) retry.Hooks {
	attempts, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: schema.ClientAttempts.Name, Help: schema.ClientAttempts.Help, ConstLabels: constLabels(l),
	}, varLabels(schema.ClientAttempts)))
	if err != nil {
		panic(err)
	}
	durations, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: schema.ClientRequestDuration.Name, Help: schema.ClientRequestDuration.Help, ConstLabels: constLabels(l),
		Buckets: schema.ClientRequestDuration.Buckets,
	}, varLabels(schema.ClientRequestDuration)))
	if err != nil {
		panic(err)
	}
	var a [schema.NumAttemptSeries]prometheus.Counter
	for i, lv := range schema.AttemptSeries() {
		a[i] = attempts.WithLabelValues(lv...)
	}
	var h [schema.NumRequestSeries]prometheus.Observer
	for i, lv := range schema.RequestSeries() {
		h[i] = durations.WithLabelValues(lv...)
	}
	return schema.ClientRecorder{
		Attempt: func(_ context.Context, i int) { a[i].Inc() },
		Request: func(_ context.Context, i int, seconds float64) { h[i].Observe(seconds) },
	}.Hooks()
}

// JoinHooks is [retry.JoinHooks], where it lived first.
//
// Deprecated: use retry.JoinHooks, which joins hooks without importing
// Prometheus.
func JoinHooks(hs ...retry.Hooks) retry.Hooks { return retry.JoinHooks(hs...) }
