// Package otelx exports stormguard's accounting through OpenTelemetry: the
// metrics of package schema (metrics/schema) through
// go.opentelemetry.io/otel/metric, under the same names, units, label
// (attribute) names and meanings as package metrics gives Prometheus, and
// span events on the active span of a trace for attempts, retries,
// give-ups and the requests a server refuses. One schema, two exporters: a
// service that exports to Prometheus through an OpenTelemetry pipeline
// ends at the same series as one that uses package metrics, so the
// repository's dashboard and alert rules (deploy/) serve both.
//
// Only a service that wants OpenTelemetry imports this package: retry,
// httpx, grpcx and the other core packages import neither OpenTelemetry
// nor Prometheus.
//
//	client   a retrier's events          RetryHooks(mp, target), installed with retry.WithHooks:
//	                                     the metrics and the span events
//	         the retry budget's level    RegisterBudget(mp, target, r.Budget())
//	         a circuit breaker's state   RegisterBreaker(mp, target, br)
//	server   the servers' Stats          RegisterServer(mp, target, srv.Stats)
//	         time spent queued           QueueWait(mp, target), as the servers' ServerConfig.OnQueueWait
//	         refusals, as span events    ServerEvents(target), as the servers' ServerConfig.OnRefuse
//	any      a span event of the schema  AddEvent(ctx, name, attrs...); BreakerTransition (RetryHooks
//	                                     adds it when the retrier's breaker changes state)
//
// A nil metric.MeterProvider means the global one, otel.GetMeterProvider().
// The meter's instrumentation scope is this package's import path. Span
// events go to trace.SpanFromContext(ctx) and cost nothing but the lookup
// when that span is not recording.
//
// # Span events
//
//	event                          when                                   attributes (stormguard.…)
//	stormguard.attempt             an attempt ended (client)              target, attempt, try, class, duration
//	stormguard.retry               a retry was granted, before its wait   target, attempt, delay
//	stormguard.gave_up             a request ended in failure             target, attempt (the attempts made), reason,
//	                                                                      duration (the request's), error
//	stormguard.shed                the server refused it for overload     target, attempt, try, outcome, reason, answer
//	stormguard.expired             dropped: its deadline had passed       target, attempt, try, outcome, answer
//	stormguard.canceled            its caller left while it was queued    target, attempt, try, outcome, answer
//	stormguard.superseded          collapsed with a twin of its           target, attempt, try, outcome, reason
//	                               idempotency key (replaced, joined)     (replaced, joined), answer
//	stormguard.breaker.transition  a circuit breaker changed state        target, from, to
//
// Durations and delays are in seconds (float64). The names are constants
// of package schema (SpanAttempt, AttrTarget, …).
//
// # Extra attributes
//
// Every function that registers instruments takes optional extra
// attributes, put on every series it records: a route (the dashboard's
// per-route views group by it), a zone. They are what constant labels on a
// prometheus.WrapRegistererWith are to package metrics, and give the same
// series:
//
//	otelx.RegisterServer(mp, "shop", orders.Stats, attribute.String("route", "orders"))
package otelx
