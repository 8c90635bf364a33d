package otelx

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/retry"
)

// ScopeName is the instrumentation scope of the meter this package uses.
const ScopeName = "github.com/stormguard/stormguard/otelx"

// meter returns the meter of mp (nil: the global provider).
func meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(ScopeName)
}

// attrs returns the attribute set of a series of m: target, then m's other
// labels with the values lv, those with an empty value left out (an empty
// label is an absent one, in Prometheus and here), then the caller's extra
// attributes (route, zone: what prometheus.WrapRegistererWith adds on the
// Prometheus side).
func attrs(m schema.Metric, target string, extra []attribute.KeyValue, lv ...string) attribute.Set {
	kv := []attribute.KeyValue{attribute.String(schema.LabelTarget, target)}
	for i, v := range lv {
		if v != "" {
			kv = append(kv, attribute.String(m.Labels[1+i], v))
		}
	}
	return attribute.NewSet(append(kv, extra...)...)
}

// RetryHooks returns hooks that record a retrier's attempts and requests as
// the client of target — stormguard_client_attempts_total (by try and
// class) and stormguard_client_request_duration_seconds (by outcome and
// reason), instruments of mp's meter — and add span events to the active
// span of each request's context (see the package documentation). Install
// them with retry.WithHooks; combine them with others with
// retry.JoinHooks.
//
// Every series is recorded at once, at zero. The hooks make the retrier
// read the clock at the start and the end of every request, so that its
// duration is known. Several retriers may share one target. RetryHooks
// returns the meter's error if it refuses an instrument.
func RetryHooks(mp metric.MeterProvider, target string, extra ...attribute.KeyValue) (retry.Hooks, error) {
	m := meter(mp)
	ca, cd := schema.ClientAttempts, schema.ClientRequestDuration
	attempts, err := m.Int64Counter(ca.Name, metric.WithDescription(ca.Help), metric.WithUnit(ca.Unit))
	if err != nil {
		return retry.Hooks{}, err
	}
	durations, err := m.Float64Histogram(cd.Name, metric.WithDescription(cd.Help), metric.WithUnit(cd.Unit),
		metric.WithExplicitBucketBoundaries(cd.Buckets...))
	if err != nil {
		return retry.Hooks{}, err
	}
	ctx := context.Background()
	var aOpts [schema.NumAttemptSeries][]metric.AddOption
	for i, lv := range schema.AttemptSeries() {
		aOpts[i] = []metric.AddOption{metric.WithAttributeSet(attrs(ca, target, extra, lv...))}
		attempts.Add(ctx, 0, aOpts[i]...)
	}
	// A histogram has no zero observation: its series appear with their
	// first request.
	var dOpts [schema.NumRequestSeries][]metric.RecordOption
	for i, lv := range schema.RequestSeries() {
		dOpts[i] = []metric.RecordOption{metric.WithAttributeSet(attrs(cd, target, extra, lv...))}
	}
	rec := schema.ClientRecorder{
		Attempt: func(ctx context.Context, i int) { attempts.Add(ctx, 1, aOpts[i]...) },
		Request: func(ctx context.Context, i int, seconds float64) { durations.Record(ctx, seconds, dOpts[i]...) },
	}
	return retry.JoinHooks(rec.Hooks(), spanHooks(target)), nil
}

// RegisterBudget registers, with mp's meter, gauges that read the retry
// budget b when collected, as the client of target:
// stormguard_client_retry_budget_tokens,
// stormguard_client_retry_budget_capacity_tokens and, for a budget shared
// by a fleet, stormguard_client_retry_budget_fallback — the budgets and
// readings package metrics exports (see schema.BudgetReaders). For a budget
// with no reading it registers nothing and returns a nil Registration.
// Unregister the returned Registration to stop.
func RegisterBudget(mp metric.MeterProvider, target string, b budget.Budget, extra ...attribute.KeyValue) (metric.Registration, error) {
	level, capacity, fallback := schema.BudgetReaders(b)
	if level == nil && capacity == nil && fallback == nil {
		return nil, nil
	}
	m := meter(mp)
	type reading struct {
		g metric.Float64ObservableGauge
		f func() float64
	}
	var rs []reading
	var obs []metric.Observable
	add := func(sm schema.Metric, f func() float64) error {
		if f == nil {
			return nil
		}
		g, err := m.Float64ObservableGauge(sm.Name, metric.WithDescription(sm.Help), metric.WithUnit(sm.Unit))
		if err != nil {
			return err
		}
		rs = append(rs, reading{g, f})
		obs = append(obs, g)
		return nil
	}
	var fb func() float64
	if fallback != nil {
		fb = func() float64 {
			if fallback() {
				return 1
			}
			return 0
		}
	}
	if err := errors.Join(add(schema.ClientBudgetTokens, level), add(schema.ClientBudgetCapacity, capacity),
		add(schema.ClientBudgetFallback, fb)); err != nil {
		return nil, err
	}
	opt := metric.WithAttributeSet(attrs(schema.ClientBudgetTokens, target, extra))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, r := range rs {
			o.ObserveFloat64(r.g, r.f(), opt)
		}
		return nil
	}, obs...)
}

// RegisterServer registers, with mp's meter, instruments that take one
// snapshot of a server's counters with stats on every collection and
// report it as the server target: stormguard_server_offered_total (by
// try), stormguard_server_requests_total (by outcome and reason),
// stormguard_server_concurrency_limit_requests,
// stormguard_server_in_flight_requests and
// stormguard_server_queued_requests, as package metrics does. stats is
// httpx.Server.Stats, grpcx.Server.Stats or admit.Gate.Stats. Nothing runs
// between collections. Unregister the returned Registration to stop.
func RegisterServer(mp metric.MeterProvider, target string, stats func() admit.Stats, extra ...attribute.KeyValue) (metric.Registration, error) {
	m := meter(mp)
	counter := func(sm schema.Metric) (metric.Int64ObservableCounter, error) {
		return m.Int64ObservableCounter(sm.Name, metric.WithDescription(sm.Help), metric.WithUnit(sm.Unit))
	}
	gauge := func(sm schema.Metric) (metric.Int64ObservableGauge, error) {
		return m.Int64ObservableGauge(sm.Name, metric.WithDescription(sm.Help), metric.WithUnit(sm.Unit))
	}
	offered, err1 := counter(schema.ServerOffered)
	requests, err2 := counter(schema.ServerRequests)
	lim, err3 := gauge(schema.ServerConcurrencyLimit)
	inFlight, err4 := gauge(schema.ServerInFlight)
	queued, err5 := gauge(schema.ServerQueued)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return nil, err
	}
	var offeredOpts [len(schema.Tries)]metric.ObserveOption
	for i, try := range schema.Tries {
		offeredOpts[i] = metric.WithAttributeSet(attrs(schema.ServerOffered, target, extra, try))
	}
	var requestOpts [schema.NumServerOutcomes]metric.ObserveOption
	for i, lv := range schema.ServerOutcomes() {
		requestOpts[i] = metric.WithAttributeSet(attrs(schema.ServerRequests, target, extra, lv...))
	}
	gaugeOpt := metric.WithAttributeSet(attrs(schema.ServerInFlight, target, extra))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := schema.ServerValues(stats())
		for i, v := range s.Offered {
			o.ObserveInt64(offered, int64(v), offeredOpts[i])
		}
		for i, v := range s.Requests {
			o.ObserveInt64(requests, int64(v), requestOpts[i])
		}
		o.ObserveInt64(lim, int64(s.Limit), gaugeOpt)
		o.ObserveInt64(inFlight, int64(s.InFlight), gaugeOpt)
		o.ObserveInt64(queued, int64(s.Queued), gaugeOpt)
		return nil
	}, offered, requests, lim, inFlight, queued)
}

// QueueWait returns the function that records, in mp's meter's histogram
// stormguard_server_queue_wait_seconds for the server target, how long an
// admitted request waited: set it as the OnQueueWait of
// httpx.ServerConfig, grpcx.ServerConfig or admit.Config. Its buckets run
// from 0.5 ms to about 16 s, doubling, as package metrics' do.
func QueueWait(mp metric.MeterProvider, target string, extra ...attribute.KeyValue) (func(time.Duration), error) {
	sm := schema.ServerQueueWait
	h, err := meter(mp).Float64Histogram(sm.Name, metric.WithDescription(sm.Help), metric.WithUnit(sm.Unit),
		metric.WithExplicitBucketBoundaries(sm.Buckets...))
	if err != nil {
		return nil, err
	}
	opts := []metric.RecordOption{metric.WithAttributeSet(attrs(sm, target, extra))}
	ctx := context.Background()
	return func(d time.Duration) { h.Record(ctx, d.Seconds(), opts...) }, nil
}
