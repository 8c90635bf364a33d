package rehearse

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stormguard/stormguard/sim/scenario"
)

// The fitted model of --predict: before the run, a calm phase measures
// each endpoint the clients call with a closed-loop probe — c requests
// at a time, no retries, for c = 1, 2, 4 … while the throughput still
// grows — and fits the simulator's service to it:
//
//	service_time   the median latency at c = 1 (constant when the 90th
//	               percentile is within 20 % of it, else exponential)
//	workers        capacity × service time (Little's law at saturation)
//	capacity       the most successes per second a level reached
//	queue          unbounded, or, when more than 10 % of a level's
//	               requests failed (any error: a status of 400 or more,
//	               a timeout, a connection error), the concurrency of that
//	               level less the workers
//
// The probe's rate is capped at twice the scenario's peak (and the rate
// limit): beyond that the capacity is "at least" what it measured, and
// Fit says so. The probe is not part of the run's series.

// Fit is the model fitted to one endpoint.
type Fit struct {
	Endpoint string `json:"endpoint"`
	// ServiceTimeS is the median latency at one request at a time,
	// seconds; P90S its 90th percentile.
	ServiceTimeS float64 `json:"service_time_s"`
	P90S         float64 `json:"p90_s"`
	// CapacityPerS is the most successes per second measured; AtLeast is
	// set when the probe's rate cap stopped it first.
	CapacityPerS float64 `json:"capacity_per_s"`
	AtLeast      bool    `json:"at_least,omitempty"`
	Workers      int     `json:"workers"`
	// QueueCapacity is 0 for an unbounded queue.
	QueueCapacity int `json:"queue_capacity"`
	// Levels are the probe's measurements.
	Levels []FitLevel `json:"levels"`
	// Attempts counts the probe's requests.
	Attempts int64 `json:"attempts"`
}

// FitLevel is one level of the probe.
type FitLevel struct {
	Concurrency int     `json:"concurrency"`
	OKPerS      float64 `json:"ok_per_s"`
	ErrorsPerS  float64 `json:"errors_per_s"`
	P50S        float64 `json:"p50_s"`
}

// Probe bounds: levels up to maxLevel requests at a time.
const (
	maxLevel        = 256
	DefaultCalm     = 5 * time.Second
	minLevelSeconds = 0.3
)

// CalmWorstCase is the most attempts the calm phase of p may send:
// every level at its rate cap for its time.
func CalmWorstCase(p Plan) int64 {
	calm := calmOf(p)
	var n int64
	for _, i := range calledEndpoints(p) {
		n += int64(probeRate(p, i)*calm.Seconds()) + int64(maxLevel)*levels()
	}
	return n
}

func levels() int64 { return 9 } // 1, 2, 4 … 256

func calmOf(p Plan) time.Duration {
	if r := p.Scenario.Rehearse; r != nil && r.Calm > 0 {
		return r.Calm
	}
	return DefaultCalm
}

// calledEndpoints are the endpoints some client calls, in order.
func calledEndpoints(p Plan) []int {
	var out []int
	for _, c := range p.Clients {
		if !slices.Contains(out, c.Endpoint) {
			out = append(out, c.Endpoint)
		}
	}
	slices.Sort(out)
	return out
}

// probeRate is the probe's rate cap for endpoint i: twice the peak of the
// clients that call it, within the rate limit.
func probeRate(p Plan, i int) float64 {
	peak := 0.0
	for _, c := range p.Clients {
		if c.Endpoint == i {
			peak += c.Peak
		}
	}
	return min(p.Limits.MaxRate, max(20, 2*peak))
}

// Calibrate runs the calm phase: it probes every endpoint the clients
// call, one after the other, for the scenario's calm time in all, and
// fits a model to each.
func Calibrate(ctx context.Context, p Plan) ([]Fit, error) {
	g, err := NewGuard(CalmWorstCase(p), p.Limits.AllowRemote)
	if err != nil {
		return nil, err
	}
	eps := calledEndpoints(p)
	per := calmOf(p) / time.Duration(max(1, len(eps)))
	var fits []Fit
	for _, i := range eps {
		f, err := probe(ctx, p, i, g, per)
		if err != nil {
			return fits, err
		}
		fits = append(fits, f)
	}
	return fits, nil
}

// probe measures endpoint i for d.
func probe(ctx context.Context, p Plan, i int, g *Guard, d time.Duration) (Fit, error) {
	e := p.Endpoints[i]
	timeout := time.Second
	for _, c := range p.Clients {
		if c.Endpoint == i {
			timeout = max(timeout, c.Timeout)
		}
	}
	call, closeCall, err := prober(e, g, timeout, UserAgent("probe"))
	if err != nil {
		return Fit{}, err
	}
	defer closeCall()
	rate := probeRate(p, i)
	per := max(time.Duration(minLevelSeconds*float64(time.Second)), d/time.Duration(levels()))
	f := Fit{Endpoint: e.Name}
	interval := time.Duration(float64(time.Second) / rate)
	var lat1 []float64
	for c := 1; c <= maxLevel; c *= 2 {
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
		lv, lats := level(ctx, call, c, per, interval, g)
		capped := lv.OKPerS+lv.ErrorsPerS >= 0.9*rate
		if c == 1 {
			lat1 = lats
		}
		f.Levels = append(f.Levels, lv)
		if lv.ErrorsPerS > 0.1*(lv.OKPerS+lv.ErrorsPerS) && f.QueueCapacity == 0 && c > 1 {
			f.QueueCapacity = c // refused at this concurrency
		}
		if lv.OKPerS > f.CapacityPerS {
			f.CapacityPerS = lv.OKPerS
		}
		n := len(f.Levels)
		if capped {
			f.AtLeast = true
			break
		}
		if n >= 2 && lv.OKPerS < 1.1*f.Levels[n-2].OKPerS || f.QueueCapacity > 0 {
			break // saturated
		}
	}
	f.Attempts = g.Sent()
	if len(lat1) == 0 {
		return f, fmt.Errorf("rehearse: --predict: services.%s answered no request of the calm phase with a success", e.Name)
	}
	slices.Sort(lat1)
	f.ServiceTimeS = lat1[len(lat1)/2]
	f.P90S = lat1[int(0.9*float64(len(lat1)-1))]
	f.Workers = max(1, int(f.CapacityPerS*f.ServiceTimeS+0.5))
	if f.QueueCapacity > 0 {
		f.QueueCapacity = max(1, f.QueueCapacity-f.Workers)
	}
	return f, nil
}

// level runs c closed-loop workers for d, paced to one request per
// interval in all.
func level(ctx context.Context, call func(context.Context) error, c int, d, interval time.Duration, g *Guard) (FitLevel, []float64) {
	var (
		mu     sync.Mutex
		lats   []float64
		ok, ko atomic.Int64
		next   atomic.Int64
	)
	start := time.Now()
	end := start.Add(d)
	next.Store(start.UnixNano())
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for ctx.Err() == nil {
				at := time.Unix(0, next.Add(int64(interval))-int64(interval))
				if !at.Before(end) {
					return
				}
				if w := time.Until(at); w > 0 {
					time.Sleep(w)
				}
				if !g.Take() {
					return
				}
				t0 := time.Now()
				err := call(ctx)
				if err != nil {
					ko.Add(1)
					continue
				}
				ok.Add(1)
				mu.Lock()
				lats = append(lats, time.Since(t0).Seconds())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	lv := FitLevel{Concurrency: c, OKPerS: float64(ok.Load()) / secs, ErrorsPerS: float64(ko.Load()) / secs}
	if len(lats) > 0 {
		s := slices.Clone(lats)
		slices.Sort(s)
		lv.P50S = s[len(s)/2]
	}
	return lv, lats
}

// prober returns one attempt of the endpoint's request, without retries,
// sent with the User-Agent ua.
func prober(e EndpointPlan, g *Guard, timeout time.Duration, ua string) (func(context.Context) error, func(), error) {
	body, headers, err := e.Request.render(TemplateData{Client: "calm", Tap: 1})
	if err != nil {
		return nil, nil, err
	}
	switch e.Kind {
	case scenario.EndpointGRPC:
		dial := g.Dialer()
		conn, err := grpc.NewClient("passthrough:///"+e.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDisableRetry(), grpc.WithUserAgent(ua), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return dial.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var reply rawMessage
			return conn.Invoke(ctx, e.Path, rawMessage(body), &reply, grpc.ForceCodecV2(rawCodec{}))
		}, func() { conn.Close() }, nil
	}
	tr := g.transport()
	client := &http.Client{Transport: tr, Timeout: timeout}
	url := "http://" + e.Addr + e.Path
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, e.Request.Method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		for _, h := range headers {
			req.Header.Add(h[0], h[1])
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header.Set("User-Agent", ua)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}, tr.CloseIdleConnections, nil
}

// Model returns the plan's scenario as the simulator runs it, each called
// endpoint replaced by its fitted service (the others, the tcp
// dependencies, dropped), with notes on what of the scenario the model
// has no counterpart for.
func Model(p Plan, fits []Fit) (scenario.Scenario, []string) {
	sc := p.Scenario
	sc.Rehearse = nil
	var notes []string
	byName := map[string]Fit{}
	for _, f := range fits {
		byName[f.Endpoint] = f
	}
	sc.Services = nil
	kept := map[string]bool{}
	for _, e := range p.Endpoints {
		f, ok := byName[e.Name]
		if !ok {
			if e.Kind == scenario.EndpointTCP {
				notes = append(notes, fmt.Sprintf("%s, a dependency, is inside its caller's fitted model, not a service of its own", e.Name))
			}
			continue
		}
		kept[e.Name] = true
		v := scenario.Service{Name: e.Name, Workers: f.Workers,
			ServiceTime: scenario.Dist{Kind: "constant", Mean: time.Duration(f.ServiceTimeS * float64(time.Second))}}
		if f.P90S > 1.2*f.ServiceTimeS {
			v.ServiceTime.Kind = "exponential"
		}
		v.Queue.Capacity = f.QueueCapacity
		sc.Services = append(sc.Services, v)
	}
	sc.Clients = append([]scenario.Client(nil), sc.Clients...)
	for i := range sc.Clients {
		sc.Clients[i].FleetDials = ""
	}
	var ts []scenario.Trigger
	for _, t := range sc.Triggers {
		if t.Kind != "load" && !kept[t.Target] {
			notes = append(notes, fmt.Sprintf("the %s trigger on %s has no counterpart in the model", t.Kind, t.Target))
			continue
		}
		ts = append(ts, t)
	}
	sc.Triggers = ts
	var as []scenario.Action
	for _, a := range sc.Actions {
		isClient := false
		for _, c := range sc.Clients {
			isClient = isClient || c.Name == a.Target
		}
		if !isClient && (a.Kind == "retries-off" || a.Kind == "retries-on" || a.Kind == "limit" || !kept[a.Target]) {
			notes = append(notes, fmt.Sprintf("the step %q has no counterpart in the model (a fitted service makes no calls and has no limiter)", a.Name()))
			continue
		}
		as = append(as, a)
	}
	sc.Actions = as
	return sc, notes
}

// String is the fit in one line.
func (f Fit) String() string {
	var b strings.Builder
	at := ""
	if f.AtLeast {
		at = "at least "
	}
	fmt.Fprintf(&b, "%s: service time %.1f ms (p90 %.1f ms), capacity %s%.0f/s, %d workers", f.Endpoint, 1000*f.ServiceTimeS, 1000*f.P90S, at, f.CapacityPerS, f.Workers)
	if f.QueueCapacity > 0 {
		fmt.Fprintf(&b, ", a queue of %d (refusals past it)", f.QueueCapacity)
	} else {
		b.WriteString(", an unbounded queue")
	}
	fmt.Fprintf(&b, "; %d probe requests", f.Attempts)
	return b.String()
}
