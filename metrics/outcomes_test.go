package metrics_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/outcomes"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/retry"
)

// promExporter exports through the collectors of this package into reg and
// reads them back from a real /metrics endpoint.
func promExporter(t *testing.T, reg *prometheus.Registry) outcomes.Exporter {
	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(ms.Close)
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	return outcomes.Exporter{
		Client: func(target string) retry.Hooks { return metrics.RetryHooks(reg, metrics.Labels{Target: target}) },
		Budget: func(target string, b budget.Budget) {
			if err := metrics.RegisterBudget(reg, metrics.Labels{Target: target}, b); err != nil {
				t.Fatal(err)
			}
		},
		Configure: func(target string, cfg *httpx.ServerConfig) {
			cfg.OnQueueWait = metrics.QueueWait(reg, metrics.Labels{Target: target})
		},
		Register: func(target string, stats func() admit.Stats) {
			if err := metrics.RegisterServer(reg, metrics.Labels{Target: target}, stats); err != nil {
				t.Fatal(err)
			}
		},
		Read: func(t *testing.T) map[string]float64 { return scrapeSeries(t, client, ms.URL) },
	}
}

// scrapeSeries fetches url and returns its samples keyed by
// outcomes.Key, histogram buckets left out.
func scrapeSeries(t *testing.T, client *http.Client, url string) map[string]float64 {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, "stormguard_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series, value := line[:i], line[i+1:]
		name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		if strings.HasSuffix(name, "_bucket") {
			continue
		}
		var kv []string
		for _, l := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(l, "="); ok {
				kv = append(kv, k, strings.Trim(v, `"`))
			}
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out[outcomes.Key(name, kv...)] = f
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// N requests of every outcome through a real httpx client and server: each
// moves exactly the series the schema says, by exactly one per event, and
// nothing else (no double counting), on the client and on the server.
func TestEveryOutcomeCountedOnce(t *testing.T) {
	leakcheck.Check(t)
	reg := prometheus.NewRegistry()
	outcomes.Run(t, 3, promExporter(t, reg))
}
