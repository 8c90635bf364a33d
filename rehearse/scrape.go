package rehearse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stormguard/stormguard/sim/result"
)

// The service's side of a rehearsal: stormguard's server metrics
// (docs/metrics.md), read every second during the run — scraped from the
// service's own /metrics, or queried from a Prometheus server — and
// turned into the simulator's service series: offered load (first tries
// and retries), throughput, goodput, wasted, shed and expired work per
// bin, and the queue, the requests in service and the limit at each bin's
// end. Counters are read as they stand; a bin's count is the counter's
// rise across it, interpolated linearly between two readings, so a bin
// narrower than the readings' interval shows their average rate.

// ScrapePeriod is how often the service's metrics are read.
const ScrapePeriod = time.Second

// maxScrape bounds a metrics page or a query's answer.
const maxScrape = 8 << 20

// reading is a service's metrics at one instant.
type reading struct {
	at time.Time
	// counters by series: "first", "retry", and the outcomes of
	// stormguard_server_requests_total.
	counters map[string]float64
	// gauges: "queue", "busy", "limit".
	gauges map[string]float64
}

// The outcomes of stormguard_server_requests_total (docs/metrics.md).
var outcomes = []string{"goodput", "failed", "wasted", "shed", "expired", "canceled", "superseded"}

// scraper reads one service's metrics.
type scraper struct {
	e        EndpointPlan
	client   *http.Client
	target   string
	readings []reading
	// errs counts the readings that failed; lastErr is the last failure.
	errs    int
	lastErr string
}

func newScraper(e EndpointPlan, g *Guard) *scraper {
	t := e.Metrics.Target
	if t == "" {
		t = e.Name
	}
	return &scraper{e: e, target: t, client: &http.Client{Transport: g.transport(), Timeout: 900 * time.Millisecond}}
}

// run reads the metrics at start and every ScrapePeriod until end (one
// last reading at end), or until ctx ends.
func (s *scraper) run(ctx context.Context, start, end time.Time) {
	timer := time.NewTimer(time.Until(start))
	defer timer.Stop()
	next := start
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		s.read(ctx)
		if !next.Before(end) {
			return
		}
		next = next.Add(ScrapePeriod)
		if next.After(end) {
			next = end
		}
		timer.Reset(time.Until(next))
	}
}

// read takes one reading.
func (s *scraper) read(ctx context.Context) {
	at := time.Now()
	var r reading
	var err error
	if s.e.Metrics.Scrape != "" {
		r, err = s.scrape(ctx)
	} else {
		r, err = s.query(ctx)
	}
	if err != nil {
		s.errs++
		s.lastErr = err.Error()
		return
	}
	r.at = at
	s.readings = append(s.readings, r)
}

// scrape reads the service's /metrics page.
func (s *scraper) scrape(ctx context.Context) (reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.e.Metrics.Scrape, nil)
	if err != nil {
		return reading{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return reading{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return reading{}, fmt.Errorf("GET %s: %s", s.e.Metrics.Scrape, resp.Status)
	}
	return parseMetrics(io.LimitReader(resp.Body, maxScrape), s.target)
}

// parseMetrics reads stormguard's server series of target from a page
// in the Prometheus text format.
func parseMetrics(r io.Reader, target string) (reading, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return reading{}, fmt.Errorf("metrics: %w", err)
	}
	out := reading{counters: map[string]float64{}, gauges: map[string]float64{}}
	found := false
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["target"] != target {
				continue
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			switch name {
			case "stormguard_server_offered_total":
				out.counters[labels["try"]] += v
				found = true
			case "stormguard_server_requests_total":
				out.counters[labels["outcome"]] += v
			case "stormguard_server_queued_requests":
				out.gauges["queue"] += v
			case "stormguard_server_in_flight_requests":
				out.gauges["busy"] += v
			case "stormguard_server_concurrency_limit_requests":
				out.gauges["limit"] += v
			}
		}
	}
	if !found {
		return reading{}, fmt.Errorf("metrics: no stormguard_server_offered_total{target=%q} on the page", target)
	}
	return out, nil
}

// query reads the series from a Prometheus server: one instant query per
// quantity.
func (s *scraper) query(ctx context.Context) (reading, error) {
	m := s.e.Metrics
	sel := fmt.Sprintf("target=%q", s.target)
	if m.Selector != "" {
		sel += "," + m.Selector
	}
	out := reading{counters: map[string]float64{}, gauges: map[string]float64{}}
	qs := []struct {
		q, by string
		into  map[string]float64
		key   string
	}{
		{"sum by (try) (stormguard_server_offered_total{" + sel + "})", "try", out.counters, ""},
		{"sum by (outcome) (stormguard_server_requests_total{" + sel + "})", "outcome", out.counters, ""},
		{"sum(stormguard_server_queued_requests{" + sel + "})", "", out.gauges, "queue"},
		{"sum(stormguard_server_in_flight_requests{" + sel + "})", "", out.gauges, "busy"},
		{"sum(stormguard_server_concurrency_limit_requests{" + sel + "})", "", out.gauges, "limit"},
	}
	for i, q := range qs {
		vec, err := s.instant(ctx, q.q)
		if err != nil {
			return reading{}, err
		}
		if i == 0 && len(vec) == 0 {
			return reading{}, fmt.Errorf("prometheus: no stormguard_server_offered_total{%s}", sel)
		}
		for _, v := range vec {
			key := q.key
			if q.by != "" {
				key = v.labels[q.by]
			}
			q.into[key] += v.value
		}
	}
	return out, nil
}

// sampleValue is one element of an instant vector.
type sampleValue struct {
	labels map[string]string
	value  float64
}

// instant runs an instant query.
func (s *scraper) instant(ctx context.Context, q string) ([]sampleValue, error) {
	u := strings.TrimSuffix(s.e.Metrics.Prometheus, "/") + "/api/v1/query?query=" + url.QueryEscape(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxScrape))
	if err != nil {
		return nil, err
	}
	return parseQuery(data)
}

// parseQuery reads a Prometheus API answer holding an instant vector.
func parseQuery(data []byte) ([]sampleValue, error) {
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s %s", ans.Status, ans.Error)
	}
	if ans.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus: a %q, not a vector", ans.Data.ResultType)
	}
	out := make([]sampleValue, 0, len(ans.Data.Result))
	for _, r := range ans.Data.Result {
		if len(r.Value) != 2 {
			return nil, fmt.Errorf("prometheus: a value of %d parts", len(r.Value))
		}
		str, ok := r.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("prometheus: a value that is not a string")
		}
		v, err := strconv.ParseFloat(str, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("prometheus: value %q", str)
		}
		out = append(out, sampleValue{labels: r.Metric, value: v})
	}
	return out, nil
}

// series turns the readings into the simulator's service series of a run
// that starts at start, in bins of bin; ok is false when fewer than two
// readings came (nothing measured).
func (s *scraper) series(name string, start time.Time, bin time.Duration, n int) (result.ServiceSeries, bool) {
	out := result.ServiceSeries{Name: name, Bins: make([]result.ServiceBin, n)}
	for b := range out.Bins {
		out.Bins[b].T = float64(b) * bin.Seconds()
	}
	if len(s.readings) < 2 {
		return out, false
	}
	// Counters as piecewise-linear functions of the time, resets undone.
	keys := append([]string{"first", "retry"}, outcomes...)
	curves := map[string]curve{}
	for _, k := range keys {
		var c curve
		offset, last := 0.0, 0.0
		for i, r := range s.readings {
			v := r.counters[k]
			if i > 0 && v < last {
				offset += last // the service restarted: its counter began again
			}
			last = v
			c = append(c, point{r.at.Sub(start).Seconds(), v + offset})
		}
		curves[k] = c
	}
	per := 1 / bin.Seconds()
	rise := func(k string, b int) float64 {
		t0 := float64(b) * bin.Seconds()
		return curves[k].at(t0+bin.Seconds()) - curves[k].at(t0)
	}
	j := 0
	for b := range out.Bins {
		x := &out.Bins[b]
		x.OfferedFirst = rise("first", b) * per
		x.OfferedRetries = rise("retry", b) * per
		x.Goodput = rise("goodput", b) * per
		x.Wasted = rise("wasted", b) * per
		x.Throughput = x.Goodput + x.Wasted + rise("failed", b)*per
		x.Shed = rise("shed", b) * per
		x.Expired = (rise("expired", b) + rise("canceled", b)) * per
		x.Superseded = rise("superseded", b) * per
		end := start.Add(time.Duration(b+1) * bin)
		for j+1 < len(s.readings) && !s.readings[j+1].at.After(end) {
			j++
		}
		g := s.readings[j].gauges
		x.Queue, x.Busy, x.Limit = g["queue"], g["busy"], g["limit"]
	}
	whole := func(k string) int64 {
		c := curves[k]
		return int64(math.Round(c[len(c)-1].v - c[0].v))
	}
	t := &out.Total
	t.Arrived = whole("first") + whole("retry")
	t.Goodput = whole("goodput")
	t.Wasted = whole("wasted")
	t.Completed = t.Goodput + t.Wasted + whole("failed")
	t.Shed = whole("shed")
	t.Expired = whole("expired") + whole("canceled")
	t.Superseded = whole("superseded")
	last := s.readings[len(s.readings)-1].gauges
	t.InSystem = int64(last["queue"] + last["busy"])
	return out, true
}

// point is a counter's value v at t seconds of the run.
type point struct{ t, v float64 }

// curve is a counter's readings, in time order.
type curve []point

// at is the counter's value at t, linear between readings, flat before
// the first and after the last.
func (c curve) at(t float64) float64 {
	if t <= c[0].t {
		return c[0].v
	}
	for i := 1; i < len(c); i++ {
		if t <= c[i].t {
			a, b := c[i-1], c[i]
			if b.t == a.t {
				return b.v
			}
			return a.v + (b.v-a.v)*(t-a.t)/(b.t-a.t)
		}
	}
	return c[len(c)-1].v
}
