// Alerts. Each is about the retry storms and metastable failures stormguard
// exists for, and stays silent on what a service's own error-rate and
// latency alerts already page on: a service answering 503 to half its
// requests, with no retries and no overload, fires none of them.
{
  local c = $._config,
  local svc = std.join(', ', [c.clusterLabel, c.namespaceLabel, c.jobLabel, 'target']),
  local series(metric) = if c.stormguardSelector == '' then metric else '%s{%s}' % [metric, c.stormguardSelector],
  local r(name) = 'job_target:stormguard_%s' % name,
  local ri = c.rateInterval,
  local runbook(alert) = c.runbookURLPattern % std.asciiLower(alert),

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'stormguard.alerts',
        rules: [
          {
            // Retries make up more than stormRetryShare of what a service is
            // offered while its goodput is below stormGoodputDrop of its best
            // over stormPeakWindow: the storm of the seeds, where retries add
            // load that makes requests fail or time out, which makes more
            // retries. A steady share of retries with goodput holding (a
            // healthy client retrying a flaky dependency) does not fire, nor
            // a fall of goodput without retries (the load dropped, or the
            // service fails: its own alerts say so).
            // for: 2m. The rates already cover rateInterval; 2 more minutes
            // of the same picture rule out one scrape's blip, and a storm —
            // which by definition outlives its trigger — pages within about
            // 7 minutes of starting.
            alert: 'StormguardRetryStorm',
            expr: |||
              %(retryShare)s > %(share)g
              and
              %(goodput)s < %(drop)g * max_over_time(%(goodput)s[%(peak)s])
            ||| % {
              retryShare: r('server_retry_share:ratio_rate' + ri),
              goodput: r('server_goodput:rate' + ri),
              share: c.stormRetryShare,
              drop: c.stormGoodputDrop,
              peak: c.stormPeakWindow,
            },
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Retry storm at {{ $labels.target }} ({{ $labels.job }}): retries up while goodput falls',
              description: '{{ $value | humanizePercentage }} of the requests offered to {{ $labels.target }} are retries, and its goodput is below %g %% of its best in the last %s. Turn retries off with the kill switch; if goodput does not come back, shed at the edge.' % [100 * c.stormGoodputDrop, c.stormPeakWindow],
              runbook_url: runbook('StormguardRetryStorm'),
            },
          },
          {
            // More than collapseWastedShare of the work a service finishes
            // is wasted — it finished after its caller stopped waiting —
            // while it does more than collapseMinThroughput requests a
            // second: it is busy on work nobody waits for, the metastable
            // state, from slow work and queues rather than retries (a storm
            // is StormguardRetryStorm's, so that one cause pages once).
            // Failed requests are not wasted: errors are the service's own
            // alerts'.
            // for: 5m. A burst of slow requests (a deploy, a pause) wastes
            // work for a minute or two and recovers by itself; a collapse
            // does not.
            alert: 'StormguardGoodputCollapsed',
            expr: |||
              %(wasted)s / %(throughput)s > %(share)g
              and
              %(throughput)s > %(min)g
              unless
              %(retryShare)s > %(stormShare)g
            ||| % {
              wasted: r('server_wasted:rate' + ri),
              throughput: r('server_throughput:rate' + ri),
              retryShare: r('server_retry_share:ratio_rate' + ri),
              share: c.collapseWastedShare,
              min: c.collapseMinThroughput,
              stormShare: c.stormRetryShare,
            },
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Goodput collapsed at {{ $labels.target }} ({{ $labels.job }}): busy on work nobody waits for',
              description: '{{ $value | humanizePercentage }} of the work {{ $labels.target }} finishes ends after its caller stopped waiting. Shed at the edge until goodput returns; check that deadlines propagate and expired work is dropped.',
              runbook_url: runbook('StormguardGoodputCollapsed'),
            },
          },
          {
            // A client's requests keep giving up because its retry budget is
            // empty: the budget is doing its job (bounding the retries), and
            // the dependency fails more often than the budget's share.
            // for: 15m. A budget that empties in a blip refills by itself;
            // one empty for a quarter of an hour says the dependency is in
            // sustained trouble, which someone should look at — no page.
            alert: 'StormguardRetryBudgetExhausted',
            expr: |||
              sum by (%(svc)s) (%(gaveUp)s{reason="budget-exhausted"}) > 0
            ||| % { svc: svc, gaveUp: r('client_gave_up:rate' + ri) },
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The retry budget of {{ $labels.job }} for {{ $labels.target }} is exhausted',
              description: 'Requests to {{ $labels.target }} have been giving up for 15 minutes because the retry budget is empty ({{ $value | humanize }}/s): the dependency fails more often than the budget allows retries. Look at the dependency; do not raise the budget.',
              runbook_url: runbook('StormguardRetryBudgetExhausted'),
            },
          },
          {
            // The kill switch turns retries off or sheds traffic in a
            // service, and its dials have not changed for
            // killSwitchLeftOnAfter seconds: a dial turned in an incident
            // and forgotten, which leaves the service without retries or
            // refusing traffic it could serve.
            // for: 5m. The condition already waits for the hour; 5 minutes
            // ride out a scrape gap or a restart that resets the dials.
            alert: 'StormguardKillSwitchLeftOn',
            expr: |||
              (
                max by (%(svc)s) (%(off)s) > 0
                or
                max by (%(svc)s) (%(shed)s) > 0
              )
              and on (%(svc)s)
              (time() - max by (%(svc)s) (%(changed)s)) > %(after)d
            ||| % {
              svc: svc,
              off: series('stormguard_dials_retries_off'),
              shed: series('stormguard_dials_shed_ratio'),
              changed: series('stormguard_dials_last_change_timestamp_seconds'),
              after: c.killSwitchLeftOnAfter,
            },
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'The kill switch of {{ $labels.job }} ({{ $labels.target }}) has been on for over %d minutes' % (c.killSwitchLeftOnAfter / 60),
              description: 'Retries are off or traffic is shed in {{ $labels.job }}, and nobody has turned the dials for over %d minutes. If the incident is over, turn them back in steps (shed first, then retries on); if not, say so in the incident channel.' % (c.killSwitchLeftOnAfter / 60),
              runbook_url: runbook('StormguardKillSwitchLeftOn'),
            },
          },
        ],
      },
    ],
  },
}
