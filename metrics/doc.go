// Package metrics exports stormguard's accounting to Prometheus
// (github.com/prometheus/client_golang), in the project's one vocabulary:
// offered load, throughput, goodput, wasted work, shed, expired-dropped and
// gave-up, each with its reason. Clients and servers share one schema,
// told apart by the side label, so that one dashboard shows both ends of a
// hop. The core packages know nothing of Prometheus: this package reads
// them through their own observation points.
//
//	client   retry.Hooks                    RetryHooks(reg, labels), installed with retry.WithHooks
//	         the retry budget's level       RegisterBudget(reg, labels, r.Budget())
//	server   the servers' Stats snapshots   RegisterServer(reg, labels, srv.Stats) (httpx.Server, grpcx.Server:
//	                                        both report in admit.Stats)
//	         time spent queued              QueueWait(reg, labels), as the servers' ServerConfig.OnQueueWait
//
// Nothing costs anything when no collector is registered: a retrier built
// without hooks does not even test for them on its hot path, and the
// server collectors read the servers' own counters only when scraped. The
// hooks RetryHooks returns do not allocate (see BenchmarkRetryHooks).
//
// # Schema
//
// Every series has the labels side ("client" or "server") and target; the
// table gives the others. target names the service the attempts are
// addressed to: on the client, the dependency called; on the server, the
// service itself. Counters count since the process started; gauges are
// values now.
//
//	name                               type       side     more labels  meaning
//	stormguard_attempts_total          counter    client   outcome      attempts that ended, by retry class: success, transient,
//	                                                                    throttling, timeout, never-retry, canceled,
//	                                                                    service-overloaded, retries-exhausted
//	                                              server   outcome      requests that ended, by fate: goodput, failed, wasted,
//	                                                                    shed, expired, canceled
//	stormguard_retries_total           counter    client                retries granted (each sent after its wait)
//	                                              server                requests that arrived with an attempt number above 1
//	stormguard_goodput_total           counter    client                calls that succeeded (the caller was waiting)
//	                                              server                handlers that succeeded while their caller was waiting
//	stormguard_throughput_total        counter    client                attempts that ended, whatever their fate
//	                                              server                handlers that returned, whatever their fate
//	stormguard_giveups_total           counter    client   reason       calls that ended in failure, by why retrying stopped:
//	                                                                    attempts-exhausted, budget-exhausted, deadline,
//	                                                                    not-retryable, server-said-stop, retries-disabled,
//	                                                                    canceled, breaker-open, other
//	stormguard_budget_level            gauge      client                tokens in the retry budget now
//	stormguard_budget_capacity         gauge      client                tokens in the retry budget when full
//	stormguard_budget_fallback         gauge      client                1 while a fleet budget uses its local fallback share
//	stormguard_offered_total           counter    server                requests that arrived (offered load)
//	stormguard_wasted_total            counter    server                handlers that returned after their caller left or their
//	                                                                    deadline passed: work nobody was waiting for
//	stormguard_shed_total              counter    server   reason       requests refused for overload: queue-full, evicted,
//	                                                                    queue-timeout, kill-switch, throttled
//	stormguard_expired_dropped_total   counter    server                requests dropped before starting because their
//	                                                                    deadline had passed (or left too little)
//	stormguard_concurrency_limit       gauge      server                the concurrency limit now
//	stormguard_in_flight               gauge      server                handlers running now
//	stormguard_queued                  gauge      server                requests waiting in the admission queue now
//	stormguard_queue_wait_seconds      histogram  server                how long admitted requests waited for a slot; 0 for
//	                                                                    those admitted at once
//
// On the server, every request that arrived ends in exactly one outcome,
// so once nothing is in progress
//
//	stormguard_offered_total = sum by (side, target) (stormguard_attempts_total)
//
// and while requests run the difference is stormguard_in_flight plus
// stormguard_queued. The budget series exist only for budgets that have a
// level (the token bucket and the token ratio).
//
// Extra constant labels (instance, zone) go on a wrapping registerer,
// prometheus.WrapRegistererWith; all the collectors of one name registered
// in one registry must then carry the same label names.
package metrics
