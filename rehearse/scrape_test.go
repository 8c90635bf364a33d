package rehearse

import (
	"strings"
	"testing"
	"time"
)

const page = `# TYPE stormguard_server_offered_total counter
stormguard_server_offered_total{target="shop",try="first"} 100
stormguard_server_offered_total{target="shop",try="retry"} 20
stormguard_server_offered_total{target="other",try="first"} 999
# TYPE stormguard_server_requests_total counter
stormguard_server_requests_total{outcome="goodput",reason="",target="shop"} 80
stormguard_server_requests_total{outcome="wasted",reason="caller-left",target="shop"} 10
stormguard_server_requests_total{outcome="shed",reason="kill-switch",target="shop"} 5
stormguard_server_requests_total{outcome="shed",reason="queue-full",target="shop"} 5
# TYPE stormguard_server_queued_requests gauge
stormguard_server_queued_requests{target="shop"} 7
# TYPE stormguard_server_in_flight_requests gauge
stormguard_server_in_flight_requests{target="shop"} 3
`

func TestParseMetrics(t *testing.T) {
	r, err := parseMetrics(strings.NewReader(page), "shop")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"first": 100, "retry": 20, "goodput": 80, "wasted": 10, "shed": 10} {
		if got := r.counters[k]; got != want {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if r.gauges["queue"] != 7 || r.gauges["busy"] != 3 {
		t.Errorf("gauges %v", r.gauges)
	}
	if _, err := parseMetrics(strings.NewReader(page), "nobody"); err == nil {
		t.Error("a page without the target's series: no error")
	}
	if _, err := parseMetrics(strings.NewReader("not { a page"), "shop"); err == nil {
		t.Error("garbage: no error")
	}
}

func TestParseQuery(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"try":"first"},"value":[1,"12.5"]}]}}`, 1, true},
		{`{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, true},
		{`{"status":"error","error":"bad query"}`, 0, false},
		{`{"status":"success","data":{"resultType":"matrix","result":[]}}`, 0, false},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}`, 0, false},
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}`, 0, false},
		{`nope`, 0, false},
	} {
		got, err := parseQuery([]byte(c.in))
		if (err == nil) != c.ok || len(got) != c.want {
			t.Errorf("parseQuery(%s) = %v, %v", c.in, got, err)
		}
	}
}

// Counters become rates per bin, linear between readings, and a counter
// that starts again (a restart) is not a negative rate.
func TestScrapeSeries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rd := func(s float64, first float64, queue float64) reading {
		return reading{at: t0.Add(time.Duration(s * 1e9)), counters: map[string]float64{"first": first, "goodput": first}, gauges: map[string]float64{"queue": queue}}
	}
	s := &scraper{readings: []reading{rd(0, 0, 0), rd(1, 100, 5), rd(2, 300, 9), rd(3, 50, 1)}}
	ss, ok := s.series("x", t0, 500*time.Millisecond, 6)
	if !ok {
		t.Fatal("no series")
	}
	want := []float64{100, 100, 200, 200, 50, 50}
	for b, w := range want {
		if got := ss.Bins[b].OfferedFirst; got != w {
			t.Errorf("bin %d: %v/s, want %v", b, got, w)
		}
	}
	if ss.Bins[1].Queue != 5 || ss.Bins[3].Queue != 9 || ss.Bins[5].Queue != 1 {
		t.Errorf("queues %v %v %v", ss.Bins[1].Queue, ss.Bins[3].Queue, ss.Bins[5].Queue)
	}
	if ss.Total.Arrived != 350 {
		t.Errorf("arrived %d, want 350 (300, then 50 after the restart)", ss.Total.Arrived)
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add([]byte(page))
	f.Add([]byte("stormguard_server_offered_total{target=\"shop\"} 1e308\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseMetrics(strings.NewReader(string(data)), "shop")
		if err == nil && r.counters == nil {
			t.Fatal("nil counters without an error")
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	f.Add([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"try":"first"},"value":[1,"12.5"]}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		vs, err := parseQuery(data)
		if err != nil {
			return
		}
		for _, v := range vs {
			if v.value != v.value {
				t.Fatal("NaN accepted")
			}
		}
	})
}
