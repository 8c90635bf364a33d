// Package metrics exports stormguard's accounting to Prometheus
// (github.com/prometheus/client_golang), in the project's one vocabulary:
// offered load (first tries and retries apart), throughput, goodput,
// wasted work, shed, expired and gave-up, each with its reason. The series
// are those of package schema (metrics/schema), which package otelx exports to
// OpenTelemetry under the same names, units and meanings; one dashboard and
// one set of alert rules (deploy/ in the repository) serve both. The core
// packages know nothing of Prometheus: this package reads them through
// their own observation points.
//
//	client   retry.Hooks                    RetryHooks(reg, labels), installed with retry.WithHooks
//	         the retry budget's level       RegisterBudget(reg, labels, r.Budget())
//	server   the servers' Stats snapshots   RegisterServer(reg, labels, srv.Stats) (httpx.Server, grpcx.Server:
//	                                        both report in admit.Stats)
//	         time spent queued              QueueWait(reg, labels), as the servers' ServerConfig.OnQueueWait
//	process  the kill switch's dials        RegisterDials(reg, labels, dials)
//	         a live policy file             RegisterPolicy(reg, labels, live.State) (policyfile.Live)
//
// Nothing costs anything when no collector is registered: a retrier built
// without hooks does not even test for them on its hot path, and the
// server collectors read the servers' own counters only when scraped. The
// hooks RetryHooks returns do not allocate (see BenchmarkRetryHooks).
//
// # Schema
//
// Every series has the label target: on the client, the dependency called;
// on the server, the service itself. Client and server series have names
// of their own. Counters count since the process started; gauges are
// values now. docs/metrics.md has the full table, with units and label
// values.
//
//	name                                              type       labels          meaning
//	stormguard_client_attempts_total                  counter    try, class      attempts that ended, first tries and retries apart,
//	                                                                             by retry class: the load the client offers
//	stormguard_client_request_duration_seconds        histogram  outcome, reason from a request's first attempt to its outcome: success,
//	                                                                             or gave-up with the reason retrying stopped; its
//	                                                                             count is the requests that ended
//	stormguard_client_retry_budget_tokens             gauge                      tokens in the retry budget now
//	stormguard_client_retry_budget_capacity_tokens    gauge                      tokens in the retry budget when full
//	stormguard_client_retry_budget_fallback           gauge                      1 while a fleet budget uses its local fallback share
//	stormguard_server_offered_total                   counter    try             requests that arrived (offered load)
//	stormguard_server_requests_total                  counter    outcome, reason requests that ended, each once: goodput, failed,
//	                                                                             wasted (deadline, caller-left), shed (queue-full,
//	                                                                             evicted, queue-timeout, kill-switch, throttled,
//	                                                                             key-busy), expired (on-arrival, in-queue),
//	                                                                             canceled, superseded (replaced, joined)
//	stormguard_server_queue_wait_seconds              histogram                  how long admitted requests waited for a slot
//	stormguard_server_concurrency_limit_requests      gauge                      the concurrency limit now
//	stormguard_server_in_flight_requests              gauge                      handlers running now
//	stormguard_server_queued_requests                 gauge                      requests waiting in the admission queue now
//	stormguard_dials_retries_off                      gauge                      1 while the kill switch turns retries off
//	stormguard_dials_shed_ratio                       gauge                      the fraction the kill switch sheds
//	stormguard_dials_limit_override_requests          gauge                      the limit override, 0 for none
//	stormguard_dials_last_change_timestamp_seconds    gauge      origin          when the dials last changed: local or fleet
//	stormguard_policy_version_info                    gauge      version         1 for the policy file version running
//	stormguard_policy_reloads_total                   counter    result          new versions read: applied, refused
//
// Each event moves exactly one series: a request the server sheds is one
// increment of stormguard_server_requests_total{outcome="shed"} (with its
// reason) and nothing else. Throughput, goodput and wasted work are sums
// over outcome:
//
//	throughput  sum by (target) (rate(stormguard_server_requests_total{outcome=~"goodput|failed|wasted"}[1m]))
//	goodput     sum by (target) (rate(stormguard_server_requests_total{outcome="goodput"}[1m]))
//	retry share sum by (target) (rate(stormguard_server_offered_total{try="retry"}[1m]))
//	              / sum by (target) (rate(stormguard_server_offered_total[1m]))
//
// and once nothing is in progress
//
//	sum by (target) (stormguard_server_offered_total) = sum by (target) (stormguard_server_requests_total)
//
// (while requests run the difference is stormguard_server_in_flight_requests
// plus stormguard_server_queued_requests). The budget series exist only for
// budgets that have a level (the token bucket and the token ratio).
//
// Extra constant labels (instance, zone) go on a wrapping registerer,
// prometheus.WrapRegistererWith; all the collectors of one name registered
// in one registry must then carry the same label names.
package metrics
