// Recording rules: the project's vocabulary per service (cluster,
// namespace, job) and target, over _config.rateInterval.
local sel(c, extra='') = std.join(', ', std.filter(function(s) s != '', [c.stormguardSelector, extra]));
// metric{matchers}, or the bare name when there are none.
local series(c, metric, extra='') = if sel(c, extra) == '' then metric else '%s{%s}' % [metric, sel(c, extra)];
{
  local c = $._config,
  local svc = std.join(', ', [c.clusterLabel, c.namespaceLabel, c.jobLabel, 'target']),
  local rate(metric, matchers='') =
    'rate(%s[%s])' % [series(c, metric, matchers), c.rateInterval],
  local sum(by, expr) = 'sum by (%s) (%s)' % [by, expr],

  prometheusRules+:: {
    groups+: [
      {
        name: 'stormguard.rules',
        rules: [
          // The server: what it is offered, first tries and retries apart,
          // and the share that is retries.
          {
            record: 'job_target:stormguard_server_offered:rate%s' % c.rateInterval,
            expr: sum(svc + ', try', rate('stormguard_server_offered_total')),
          },
          {
            record: 'job_target:stormguard_server_retry_share:ratio_rate%s' % c.rateInterval,
            expr: '%s\n  /\n%s\n' % [
              sum(svc, rate('stormguard_server_offered_total', 'try="retry"')),
              sum(svc, rate('stormguard_server_offered_total')),
            ],
          },
          // Throughput: the handlers that ran to the end, whatever their fate.
          {
            record: 'job_target:stormguard_server_throughput:rate%s' % c.rateInterval,
            expr: sum(svc, rate('stormguard_server_requests_total', 'outcome=~"goodput|failed|wasted"')),
          },
          // Goodput: succeeded while the caller was still waiting.
          {
            record: 'job_target:stormguard_server_goodput:rate%s' % c.rateInterval,
            expr: sum(svc, rate('stormguard_server_requests_total', 'outcome="goodput"')),
          },
          // Wasted work: finished after the deadline passed or the caller left.
          {
            record: 'job_target:stormguard_server_wasted:rate%s' % c.rateInterval,
            expr: sum(svc, rate('stormguard_server_requests_total', 'outcome="wasted"')),
          },
          // Refused before they ran, by outcome (shed, expired, canceled) and reason.
          {
            record: 'job_target:stormguard_server_refused:rate%s' % c.rateInterval,
            expr: sum(svc + ', outcome, reason', rate('stormguard_server_requests_total', 'outcome=~"shed|expired|canceled"')),
          },
          // The client: attempts per request ended, and the share of its
          // attempts that are retries.
          {
            record: 'job_target:stormguard_client_attempts_per_request:ratio_rate%s' % c.rateInterval,
            expr: '%s\n  /\n%s\n' % [
              sum(svc, rate('stormguard_client_attempts_total')),
              sum(svc, rate('stormguard_client_request_duration_seconds_count')),
            ],
          },
          {
            record: 'job_target:stormguard_client_retry_share:ratio_rate%s' % c.rateInterval,
            expr: '%s\n  /\n%s\n' % [
              sum(svc, rate('stormguard_client_attempts_total', 'try="retry"')),
              sum(svc, rate('stormguard_client_attempts_total')),
            ],
          },
          // Requests that gave up, by reason.
          {
            record: 'job_target:stormguard_client_gave_up:rate%s' % c.rateInterval,
            expr: sum(svc + ', reason', rate('stormguard_client_request_duration_seconds_count', 'outcome="gave-up"')),
          },
        ],
      },
    ],
  },
}
