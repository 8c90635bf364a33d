package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/internal/outcomes"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/metrics/schema"
)

// Requests collapsed by supersession are counted under outcome superseded,
// by reason, and a request refused for a busy key as shed: nothing else
// moves.
func TestServerSuperseded(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := admit.Stats{Arrived: 9, Goodput: 1, Superseded: 4, Joined: 3}
	st.Shed[admit.ShedKeyBusy] = 1
	if err := metrics.RegisterServer(reg, metrics.Labels{Target: "bank"}, func() admit.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(ms.Close)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	got := scrapeSeries(t, client, ms.URL)
	series := func(outcome, reason string) string {
		return outcomes.Key(schema.ServerRequests.Name, "target", "bank", "outcome", outcome, "reason", reason)
	}
	want := map[string]float64{
		series("goodput", ""): 1,
		series(schema.OutcomeSuperseded, schema.ReasonReplaced): 4,
		series(schema.OutcomeSuperseded, schema.ReasonJoined):   3,
		series(schema.OutcomeShed, "key-busy"):                  1,
	}
	var sum float64
	for _, lv := range schema.ServerOutcomes() {
		k := series(lv[0], lv[1])
		v, ok := got[k]
		if !ok {
			t.Errorf("%s: not exported", k)
		}
		if v != want[k] {
			t.Errorf("%s = %v; want %v", k, v, want[k])
		}
		sum += v
	}
	if sum != float64(st.Arrived) {
		t.Errorf("the outcomes add up to %v; want the %d requests that arrived", sum, st.Arrived)
	}
}
