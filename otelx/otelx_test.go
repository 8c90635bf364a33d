package otelx_test

import (
	"context"
	"math"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpx"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/outcomes"
	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/metrics/schema"
	"github.com/stormguard/stormguard/otelx"
	"github.com/stormguard/stormguard/retry"
)

// otelExporter exports through this package into a meter provider read by
// an in-memory ManualReader.
func otelExporter(t *testing.T) (outcomes.Exporter, *sdkmetric.ManualReader) {
	exp, reader, _ := otelExporterMP(t)
	return exp, reader
}

// otelExporterMP is otelExporter with its meter provider.
func otelExporterMP(t *testing.T) (outcomes.Exporter, *sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	return outcomes.Exporter{
		Client: func(target string) retry.Hooks {
			h, err := otelx.RetryHooks(mp, target)
			must(err)
			return h
		},
		Budget: func(target string, b budget.Budget) {
			_, err := otelx.RegisterBudget(mp, target, b)
			must(err)
		},
		Configure: func(target string, cfg *httpx.ServerConfig) {
			wait, err := otelx.QueueWait(mp, target)
			must(err)
			cfg.OnQueueWait = wait
			cfg.OnRefuse = otelx.ServerEvents(target)
		},
		Register: func(target string, stats func() admit.Stats) {
			_, err := otelx.RegisterServer(mp, target, stats)
			must(err)
		},
		Read: func(t *testing.T) map[string]float64 { return collect(t, reader) },
	}, reader, mp
}

// collect reads every metric of reader, keyed by outcomes.Key.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key), a.Value.Emit())
		}
		return outcomes.Key(name, kv...)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name+"_count", p.Attributes)] = float64(p.Count)
					out[key(m.Name+"_sum", p.Attributes)] = p.Sum
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// N requests of every outcome through a real httpx client and server,
// recorded through OpenTelemetry: each moves exactly the series the schema
// says, by exactly one per event, and nothing else.
func TestEveryOutcomeCountedOnce(t *testing.T) {
	leakcheck.Check(t)
	exp, _ := otelExporter(t)
	outcomes.Run(t, 3, exp)
}

// One schema, two exporters: the same traffic recorded by both at once
// gives the same series with the same values (histogram sums within
// rounding), the only difference being that a Prometheus histogram's
// series exist at zero before their first observation.
func TestSameAsPrometheus(t *testing.T) {
	leakcheck.Check(t)
	reg := prometheus.NewRegistry()
	ms := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer ms.Close()
	oexp, reader := otelExporter(t)
	both := outcomes.Exporter{
		Client: func(target string) retry.Hooks {
			return retry.JoinHooks(metrics.RetryHooks(reg, metrics.Labels{Target: target}), oexp.Client(target))
		},
		Budget: func(target string, b budget.Budget) {
			if err := metrics.RegisterBudget(reg, metrics.Labels{Target: target}, b); err != nil {
				t.Fatal(err)
			}
			oexp.Budget(target, b)
		},
		Configure: func(target string, cfg *httpx.ServerConfig) {
			oexp.Configure(target, cfg)
			ow, pw := cfg.OnQueueWait, metrics.QueueWait(reg, metrics.Labels{Target: target})
			cfg.OnQueueWait = func(d time.Duration) { ow(d); pw(d) }
		},
		Register: func(target string, stats func() admit.Stats) {
			if err := metrics.RegisterServer(reg, metrics.Labels{Target: target}, stats); err != nil {
				t.Fatal(err)
			}
			oexp.Register(target, stats)
		},
		Read: func(t *testing.T) map[string]float64 { return collect(t, reader) },
	}
	last := outcomes.Run(t, 2, both)
	prom := promSeries(t, reg)
	for k, pv := range prom {
		ov, ok := last[k]
		switch {
		case !ok && pv == 0 && strings.Contains(k, "_seconds_"):
			// a histogram series not yet observed
		case !ok:
			t.Errorf("%s: exported to Prometheus (%v), not through OpenTelemetry", k, pv)
		case strings.Contains(k, "_sum{") && math.Abs(ov-pv) > 1e-9*math.Max(1, pv):
			t.Errorf("%s: OpenTelemetry %v, Prometheus %v", k, ov, pv)
		case !strings.Contains(k, "_sum{") && ov != pv:
			t.Errorf("%s: OpenTelemetry %v, Prometheus %v", k, ov, pv)
		}
	}
	for k := range last {
		if _, ok := prom[k]; !ok {
			t.Errorf("%s: exported through OpenTelemetry, not to Prometheus", k)
		}
	}
}

// promSeries gathers reg's stormguard series keyed by outcomes.Key.
func promSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var kv []string
			for _, lp := range m.GetLabel() {
				kv = append(kv, lp.GetName(), lp.GetValue())
			}
			switch {
			case m.Counter != nil:
				out[outcomes.Key(mf.GetName(), kv...)] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[outcomes.Key(mf.GetName(), kv...)] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[outcomes.Key(mf.GetName()+"_count", kv...)] = float64(m.GetHistogram().GetSampleCount())
				out[outcomes.Key(mf.GetName()+"_sum", kv...)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// Every instrument has its schema metric's name, description, unit and
// kind, and buckets for a histogram.
func TestInstruments(t *testing.T) {
	exp, reader, mp := otelExporterMP(t)
	if _, err := otelx.RegisterDials(mp, "web", new(killswitch.Dials)); err != nil {
		t.Fatal(err)
	}
	if _, err := otelx.RegisterPolicy(mp, "web", func() schema.PolicyState { return schema.PolicyState{Version: "v"} }); err != nil {
		t.Fatal(err)
	}
	b := fleetLike{}
	exp.Budget("db", b)
	hooks := exp.Client("db")
	r := retry.MustNew(retry.Policy{MaxAttempts: 1}, retry.WithHooks(hooks))
	_ = retry.Do(context.Background(), r, func(context.Context) error { return nil })
	cfg := httpx.ServerConfig{}
	exp.Configure("web", &cfg)
	cfg.OnQueueWait(time.Millisecond)
	exp.Register("web", func() admit.Stats { return admit.Stats{} })

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelx.ScopeName {
			t.Errorf("scope %q; want %q", sm.Scope.Name, otelx.ScopeName)
		}
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}
	for _, sm := range schema.All() {
		m, ok := got[sm.Name]
		if sm.External {
			if ok {
				t.Errorf("%s: exported, but the breaker's collector owns it", sm.Name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: not exported", sm.Name)
			continue
		}
		if m.Description != sm.Help || m.Unit != sm.Unit {
			t.Errorf("%s: description %q, unit %q; want %q, %q", sm.Name, m.Description, m.Unit, sm.Help, sm.Unit)
		}
		var kind schema.Kind
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			if d.IsMonotonic && d.Temporality == metricdata.CumulativeTemporality {
				kind = schema.Counter
			}
		case metricdata.Gauge[int64], metricdata.Gauge[float64]:
			kind = schema.Gauge
		case metricdata.Histogram[float64]:
			kind = schema.Histogram
			if len(d.DataPoints) == 0 || !slices.Equal(d.DataPoints[0].Bounds, sm.Buckets) {
				t.Errorf("%s: bounds differ from the schema's %v", sm.Name, sm.Buckets)
			}
		}
		if kind != sm.Kind {
			t.Errorf("%s: data %T; want a %v", sm.Name, m.Data, sm.Kind)
		}
		delete(got, sm.Name)
	}
	for name := range got {
		t.Errorf("%s: exported but not in the schema", name)
	}
}

type fleetLike struct{ budget.Unlimited }

func (fleetLike) Fallback() bool    { return false }
func (fleetLike) Level() float64    { return 3 }
func (fleetLike) Capacity() float64 { return 4 }

// The packages a user imports for retries, and the core packages, import
// neither OpenTelemetry nor Prometheus: only this package and package
// metrics do.
func TestCorePackagesImportNoExporter(t *testing.T) {
	pkgs := []string{"retry", "httpx", "grpcx", "admit", "backoff", "budget", "deadline", "limit", "shed", "killswitch", "wire", "metrics/schema"}
	for _, p := range pkgs {
		out, err := exec.Command("go", "list", "-deps", "github.com/stormguard/stormguard/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.opentelemetry.io/") || strings.HasPrefix(dep, "github.com/prometheus/") {
				t.Errorf("%s depends on %s", p, dep)
			}
		}
	}
}

// With the SDK's meter and no span recording, a request that succeeds at
// once allocates nothing.
func TestHooksCost(t *testing.T) {
	exp, _ := otelExporter(t)
	r := retry.MustNew(retry.Policy{MaxAttempts: 1}, retry.WithHooks(exp.Client("t")))
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	n := testing.AllocsPerRun(1000, func() { _ = retry.Do(ctx, r, ok) })
	t.Logf("retry.Do with the OpenTelemetry hooks, SDK meter, no span: %v allocations per call", n)
	if n != 0 {
		t.Errorf("%v allocations per call; want 0", n)
	}
}
