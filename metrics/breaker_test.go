package metrics_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

// gathered returns reg's samples whose name starts with prefix, as
// "name{label=value,…} value", sorted.
func gathered(t *testing.T, reg *prometheus.Registry, prefix string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "side" && lp.GetName() != "target" {
					ls = append(ls, lp.GetName()+"="+lp.GetValue())
				}
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out = append(out, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(ls, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

func TestRegisterBreaker(t *testing.T) {
	reg := prometheus.NewRegistry()
	zero := 0.0
	b := breaker.MustNew(breaker.Spec{Failures: 2, Delay: time.Hour, Jitter: &zero})
	l := metrics.Labels{Target: "payments"}
	if err := metrics.RegisterBreaker(reg, l, b); err != nil {
		t.Fatal(err)
	}
	r := retry.MustNew(retry.Policy{MaxAttempts: 1}, retry.WithBreaker(b), retry.WithHooks(metrics.RetryHooks(reg, l)))
	check := func(want ...string) {
		t.Helper()
		got := gathered(t, reg, "stormguard_breaker_")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	check(
		"stormguard_breaker_refused_total{} 0",
		"stormguard_breaker_state{} 0",
		"stormguard_breaker_transitions_total{to=closed} 0",
		"stormguard_breaker_transitions_total{to=half-open} 0",
		"stormguard_breaker_transitions_total{to=open} 0",
	)
	for range 3 {
		_ = retry.Do(context.Background(), r, func(context.Context) error { return classed(retry.Transient) })
	}
	check(
		"stormguard_breaker_refused_total{} 1",
		"stormguard_breaker_state{} 2",
		"stormguard_breaker_transitions_total{to=closed} 0",
		"stormguard_breaker_transitions_total{to=half-open} 0",
		"stormguard_breaker_transitions_total{to=open} 1",
	)
	// The refused call is a give-up for breaker-open.
	found := false
	for _, s := range gathered(t, reg, "stormguard_client_request_duration_seconds") {
		if strings.Contains(s, "reason=breaker-open") && strings.HasSuffix(s, " 1") {
			found = true
		}
	}
	if !found {
		t.Errorf("no give-up counted for breaker-open: %q", gathered(t, reg, "stormguard_client_request_duration_seconds"))
	}
	if err := metrics.RegisterBreaker(reg, l, b); err == nil {
		t.Error("registering the same target's breaker twice: no error")
	}
}
