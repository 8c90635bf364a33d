package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/retry"
)

// classes lists every retry class, so that their series exist from the
// start (a rate over a series that appears late misses its first
// increments).
var classes = [...]retry.Class{
	retry.Success, retry.Transient, retry.Throttling, retry.Timeout,
	retry.NeverRetry, retry.Canceled, retry.ServiceOverloaded, retry.RetriesExhausted,
}

// giveUpReasons are the give-up reasons and their label values; the label
// of any other reason is "other".
var giveUpReasons = [...]struct {
	err   error
	label string
}{
	{retry.ErrAttemptsExhausted, "attempts-exhausted"},
	{retry.ErrBudgetExhausted, "budget-exhausted"},
	{retry.ErrDeadline, "deadline"},
	{retry.ErrNotRetryable, "not-retryable"},
	{retry.ErrServerSaidStop, "server-said-stop"},
	{retry.ErrRetriesDisabled, "retries-disabled"},
	{retry.ErrCanceled, "canceled"},
	{retry.ErrRetryDeclined, "retry-declined"},
	{retry.ErrBreakerOpen, "breaker-open"},
}

// clientSeries are the series of one client target, resolved once so that
// the hooks only increment.
type clientSeries struct {
	attempts   [len(classes)]prometheus.Counter
	retries    prometheus.Counter
	goodput    prometheus.Counter
	throughput prometheus.Counter
	giveUps    [len(giveUpReasons) + 1]prometheus.Counter // the last: other
}

// RetryHooks returns hooks that count a retrier's attempts, retries and
// give-ups in reg, as the client side of target l.Target: the series
// stormguard_attempts_total, stormguard_retries_total,
// stormguard_goodput_total, stormguard_throughput_total and
// stormguard_giveups_total of the schema (see the package documentation).
// Install them with retry.WithHooks; combine them with others with
// retry.JoinHooks.
//
// Every series is created at once, at zero. The hooks allocate nothing and
// cost a few atomic additions per attempt. Several retriers may share one
// target: the series registered first are reused. RetryHooks panics, as
// prometheus.MustRegister does, if reg refuses the collectors for any other
// reason (a name registered with other label names, say).
func RetryHooks(reg prometheus.Registerer, l Labels) retry.Hooks {
	s, err := newClientSeries(reg, l)
	if err != nil {
		panic(err)
	}
	return retry.Hooks{
		OnAttempt: func(_ int, c retry.Class, _ time.Duration) {
			s.throughput.Inc()
			if c == retry.Success {
				s.goodput.Inc()
			}
			if int(c) < len(s.attempts) {
				s.attempts[c].Inc()
			}
		},
		OnRetry: func(int, time.Duration) { s.retries.Inc() },
		OnGiveUp: func(reason error, _ int, _ error) {
			s.giveUps[giveUpIndex(reason)].Inc()
		},
	}
}

func newClientSeries(reg prometheus.Registerer, l Labels) (*clientSeries, error) {
	cl := constLabels(sideClient, l)
	attempts, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameAttempts, Help: helpAttempts, ConstLabels: cl}, []string{"outcome"}))
	if err != nil {
		return nil, err
	}
	giveUps, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameGiveUps, Help: helpGiveUps, ConstLabels: cl}, []string{"reason"}))
	if err != nil {
		return nil, err
	}
	s := new(clientSeries)
	for _, c := range []struct {
		p          *prometheus.Counter
		name, help string
	}{
		{&s.retries, nameRetries, helpRetries},
		{&s.goodput, nameGoodput, helpGoodput},
		{&s.throughput, nameThroughput, helpThroughput},
	} {
		if *c.p, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: c.name, Help: c.help, ConstLabels: cl})); err != nil {
			return nil, err
		}
	}
	for i, c := range classes {
		s.attempts[i] = attempts.WithLabelValues(c.String())
	}
	for i, r := range giveUpReasons {
		s.giveUps[i] = giveUps.WithLabelValues(r.label)
	}
	s.giveUps[len(giveUpReasons)] = giveUps.WithLabelValues("other")
	return s, nil
}

// giveUpIndex returns the index in clientSeries.giveUps of reason's series.
func giveUpIndex(reason error) int {
	for i, r := range giveUpReasons {
		if reason == r.err {
			return i
		}
	}
	for i, r := range giveUpReasons { // a wrapped reason: the slow path
		if errors.Is(reason, r.err) {
			return i
		}
	}
	return len(giveUpReasons)
}

// JoinHooks is [retry.JoinHooks], where it lived first.
//
// Deprecated: use retry.JoinHooks, which joins hooks without importing
// Prometheus.
func JoinHooks(hs ...retry.Hooks) retry.Hooks { return retry.JoinHooks(hs...) }
