package otelx_test

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"github.com/stormguard/stormguard/killswitch"
	"github.com/stormguard/stormguard/metrics"
	"github.com/stormguard/stormguard/otelx"
)

// The dials through both exporters give the same series with the same
// values, at each step of an incident: untouched, retries turned off here,
// then a shed set for the fleet. An extra label (a route) goes on every
// series the same way: prometheus.WrapRegistererWith on one side, extra
// attributes on the other.
func TestDialsSameAsPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, reader, mp := otelExporterMP(t)
	d := new(killswitch.Dials)
	route := prometheus.WrapRegistererWith(prometheus.Labels{"route": "orders"}, reg)
	if err := metrics.RegisterDials(route, metrics.Labels{Target: "shop"}, d); err != nil {
		t.Fatal(err)
	}
	if _, err := otelx.RegisterDials(mp, "shop", d, attribute.String("route", "orders")); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_800_000_000, 0)
	steps := []struct {
		name   string
		change func()
		want   map[string]float64
	}{
		{"untouched", func() {}, map[string]float64{
			`stormguard_dials_retries_off{route="orders",target="shop"}`: 0, `stormguard_dials_shed_ratio{route="orders",target="shop"}`: 0,
			`stormguard_dials_limit_override_requests{route="orders",target="shop"}`:                     0,
			`stormguard_dials_last_change_timestamp_seconds{origin="none",route="orders",target="shop"}`: 0,
		}},
		{"retries off here", func() {
			d.SetRetriesDisabled(true)
			d.NoteChange(killswitch.Change{At: at, Origin: killswitch.OriginLocal})
		}, map[string]float64{
			`stormguard_dials_retries_off{route="orders",target="shop"}`: 1, `stormguard_dials_shed_ratio{route="orders",target="shop"}`: 0,
			`stormguard_dials_limit_override_requests{route="orders",target="shop"}`:                      0,
			`stormguard_dials_last_change_timestamp_seconds{origin="local",route="orders",target="shop"}`: 1.8e9,
		}},
		{"fleet sheds", func() {
			_ = d.SetShedFraction(0.5)
			_ = d.SetLimitOverride(20)
			d.NoteChange(killswitch.Change{At: at.Add(90 * time.Second), Origin: killswitch.OriginFleet})
		}, map[string]float64{
			`stormguard_dials_retries_off{route="orders",target="shop"}`: 1, `stormguard_dials_shed_ratio{route="orders",target="shop"}`: 0.5,
			`stormguard_dials_limit_override_requests{route="orders",target="shop"}`:                      20,
			`stormguard_dials_last_change_timestamp_seconds{origin="fleet",route="orders",target="shop"}`: 1.8e9 + 90,
		}},
	}
	for _, s := range steps {
		s.change()
		prom, otel := promSeries(t, reg), collect(t, reader)
		if !maps.Equal(prom, s.want) {
			t.Errorf("%s: Prometheus %v; want %v", s.name, prom, s.want)
		}
		if !maps.Equal(otel, s.want) {
			t.Errorf("%s: OpenTelemetry %v; want %v", s.name, otel, s.want)
		}
	}
}
