package result

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim/scenario"
)

// TestWilsonUpper checks the interval against hand-computed values.
func TestWilsonUpper(t *testing.T) {
	for _, c := range []struct{ s, m, z, lo, hi float64 }{
		{0, 20, 3, 0.25, 0.35},   // nothing succeeded: clearly below 0.9
		{20, 20, 3, 1, 1.000001}, // all succeeded
		{45, 50, 3, 0.96, 0.99},  // 90 % observed: cannot reject 0.9
	} {
		if got := wilsonUpper(c.s, c.m, c.z); got < c.lo || got > c.hi {
			t.Errorf("wilsonUpper(%v, %v, %v) = %.4f, want in [%v, %v]", c.s, c.m, c.z, got, c.lo, c.hi)
		}
	}
}

// TestJudgeRules judges hand-made series of 1 s bins, 100 requests each
// unless the segment says otherwise, to pin the rules on bins without
// evidence (nothing arrived, nothing ended) and on relapses.
func TestJudgeRules(t *testing.T) {
	// seg: bins [from, to) in which n requests arrived and ok of them
	// succeeded; n − ok failed unless pending, in which case they are still
	// in flight at the end.
	type seg struct {
		from, to, n, ok int
		pending         bool
	}
	build := func(n int, trig [][2]float64, segs ...seg) Result {
		r := Result{BinS: 1, DurationS: float64(n), TriggerS: trig}
		bins := make([]ClientBin, n)
		for i := range bins {
			bins[i].T = float64(i)
		}
		for _, s := range segs {
			for b := s.from; b < s.to; b++ {
				bins[b].Demand, bins[b].ArrivedOK = float64(s.n), float64(s.ok)
				if !s.pending {
					bins[b].ArrivedFailed = float64(s.n - s.ok)
				}
			}
		}
		r.Clients = []ClientSeries{{Bins: bins}}
		return r
	}
	type want struct {
		verdict                  string
		collapse, first, recover float64 // -1: null
		why                      string
	}
	tests := []struct {
		name string
		r    Result
		want want
	}{
		{"load stops while collapsed", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 60, 100, 0, false}),
			want{"metastable", 30, 30, -1, "still down when its load stopped at 60 s"}},
		{"load stops while collapsed, the last requests still in flight", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 60, 100, 0, false}, seg{60, 65, 5, 0, true}),
			want{"metastable", 30, 30, -1, "still down when its load stopped at 65 s"}},
		{"load stops after it came back", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 40, 100, 0, false}, seg{40, 60, 100, 100, false}),
			want{"recovered", 30, 30, 10, "again from 40 s, 10.0 s after the collapse began"}},
		{"a lull with no load is no evidence of recovery", build(80, nil, seg{0, 30, 100, 100, false}, seg{30, 40, 100, 0, false}, seg{50, 80, 100, 100, false}),
			want{"recovered", 30, 30, 20, "again from 50 s"}},
		{"a lull, then the collapse goes on", build(100, nil, seg{0, 30, 100, 100, false}, seg{30, 40, 100, 0, false}, seg{50, 100, 100, 0, false}),
			want{"metastable", 30, 30, -1, "had not come back by the end"}},
		{"a collapse in the last judged bins is not a recovery after them", build(140, nil, seg{0, 135, 100, 100, false}, seg{135, 137, 100, 0, false}, seg{137, 140, 100, 0, true}),
			want{"metastable", 135, 135, -1, "had not come back by the end"}},
		{"a relapse during a trigger counts from the first collapse", build(120, [][2]float64{{20, 110}},
			seg{0, 22, 100, 100, false}, seg{22, 40, 100, 0, false}, seg{40, 50, 100, 100, false}, seg{50, 60, 100, 0, false}, seg{60, 120, 100, 100, false}),
			want{"recovered", 50, 22, 38, "collapsed at 22 s (during a trigger), came back, and collapsed again at 50 s; requests succeeded ≥ 90% again from 60 s, 38.0 s after the first collapse began"}},
		{"two triggers: the second collapse is its own incident", build(120, [][2]float64{{20, 25}, {50, 110}},
			seg{0, 22, 100, 100, false}, seg{22, 40, 100, 0, false}, seg{40, 50, 100, 100, false}, seg{50, 60, 100, 0, false}, seg{60, 120, 100, 100, false}),
			want{"recovered", 50, 50, 10, "collapsed at 50 s (during a trigger); requests succeeded ≥ 90% again from 60 s, 10.0 s after the collapse began"}},
	}
	opt := func(f *float64) float64 {
		if f == nil {
			return -1
		}
		return *f
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			judge(&r, scenario.Scenario{Verdict: scenario.Verdict{Healthy: scenario.DefaultHealthy}}, 0)
			got := want{r.Verdict, opt(r.CollapseS), opt(r.FirstCollapseS), opt(r.RecoveryS), tt.want.why}
			if got != tt.want || !strings.Contains(r.Why, tt.want.why) {
				t.Errorf("got %+v (%s), want %+v", got, r.Why, tt.want)
			}
		})
	}
}

// TestJudgeParts judges hand-made runs of 1 s bins with several clients
// and services, to pin the rules that judge each part apart: the headline
// is the worst part, a service down decides when its callers did not see
// it, open fates are not judged unless older than the patience, a burst
// is judged on its requests, and a steady fault is degraded.
func TestJudgeParts(t *testing.T) {
	// cseg: client bins [from, to) with n requests, ok of them succeeded,
	// the rest failed (or still open when open is set).
	type cseg struct {
		from, to, n, ok int
		open            bool
	}
	client := func(name string, bins int, segs ...cseg) ClientSeries {
		c := ClientSeries{Name: name, Bins: make([]ClientBin, bins)}
		for i := range c.Bins {
			c.Bins[i].T = float64(i)
		}
		for _, s := range segs {
			for b := s.from; b < s.to; b++ {
				c.Bins[b].Demand, c.Bins[b].ArrivedOK, c.Bins[b].Goodput = float64(s.n), float64(s.ok), float64(s.ok)
				if !s.open {
					c.Bins[b].ArrivedFailed = float64(s.n - s.ok)
				}
			}
		}
		return c
	}
	// sseg: service bins [from, to) that completed done attempts, wasted
	// of them, with queue q growing by dq per bin.
	type sseg struct {
		from, to     int
		done, wasted float64
		q, dq        float64
	}
	service := func(name string, bins int, segs ...sseg) ServiceSeries {
		v := ServiceSeries{Name: name, Bins: make([]ServiceBin, bins)}
		for i := range v.Bins {
			v.Bins[i].T = float64(i)
		}
		for _, s := range segs {
			for b := s.from; b < s.to; b++ {
				v.Bins[b].Throughput, v.Bins[b].Wasted, v.Bins[b].OfferedFirst = s.done, s.wasted, s.done
				v.Bins[b].Queue = s.q + s.dq*float64(b-s.from)
			}
		}
		return v
	}
	spec := func(name string) scenario.Client {
		return scenario.Client{Name: name, Target: "db", Arrivals: scenario.Arrivals{Rate: 1}}
	}
	sc := func(d time.Duration, clients ...scenario.Client) scenario.Scenario {
		return scenario.Scenario{Duration: d, Clients: clients, Services: []scenario.Service{{Name: "db"}}}
	}
	type want struct {
		verdict, by string
		why         string
		parts       []string // the parts' verdicts, clients then services
	}
	tests := []struct {
		name string
		r    Result
		s    scenario.Scenario
		want want
	}{
		{"a small client's collapse beside a big one",
			Result{DurationS: 200, TriggerS: [][2]float64{{60, 80}},
				Clients:  []ClientSeries{client("users", 200, cseg{0, 200, 2000, 2000, false}), client("readers", 200, cseg{0, 60, 10, 10, false}, cseg{60, 200, 10, 0, false})},
				Services: []ServiceSeries{service("db", 200, sseg{0, 200, 2010, 0, 0, 0})}},
			sc(200*time.Second, spec("users"), spec("readers")),
			want{"metastable", "clients.readers", "client readers: collapsed at 60 s (during a trigger) and had not come back", []string{"stable", "metastable", "stable"}}},
		{"a collapse behind a cache: the service decides",
			Result{DurationS: 200, TriggerS: [][2]float64{{20, 30}},
				Clients:  []ClientSeries{client("app", 200, cseg{0, 200, 1000, 1000, false})},
				Services: []ServiceSeries{service("db", 200, sseg{0, 20, 100, 0, 0, 0}, sseg{20, 200, 100, 100, 500, 0})}},
			sc(200*time.Second, spec("app")),
			want{"metastable", "services.db", "service db: collapsed at 20 s (during a trigger) and had not come back 170 s after the trigger ended: 0% of the work it completed from 20 s on was for a caller still waiting", []string{"stable", "metastable"}}},
		{"callers that wait while the queue grows",
			Result{DurationS: 200,
				Clients:  []ClientSeries{client("app", 200, cseg{0, 200, 12, 0, true})},
				Services: []ServiceSeries{service("db", 200, sseg{0, 200, 0, 0, 0, 2})}},
			sc(200*time.Second, scenario.Client{Name: "app", Target: "db", Timeout: time.Hour}),
			want{"degraded", "services.db", "service db: its queue grew without bound, from ", []string{"not judged", "degraded"}}},
		{"fates open: not judged",
			Result{DurationS: 100, Clients: []ClientSeries{client("app", 100, cseg{0, 100, 5, 0, true})}},
			sc(100*time.Second, scenario.Client{Name: "app", Target: "db", Timeout: time.Hour}),
			want{"not judged", "clients.app", "their fates are open", []string{"not judged"}}},
		{"fates open, older than the users' patience: failed",
			Result{DurationS: 100, Clients: []ClientSeries{client("app", 100, cseg{0, 100, 5, 0, true})}},
			func() scenario.Scenario {
				s := sc(100*time.Second, scenario.Client{Name: "app", Target: "db", Timeout: time.Hour})
				s.Verdict.Patience = 10 * time.Second
				return s
			}(),
			want{"degraded", "clients.app", "requests succeeded below 90% from the start", []string{"degraded"}}},
		{"a burst, a quarter served",
			Result{DurationS: 35, Clients: []ClientSeries{client("devices", 35, cseg{0, 1, 4000, 1000, false})}},
			sc(35*time.Second, scenario.Client{Name: "devices", Target: "db", Arrivals: scenario.Arrivals{Kind: "burst", Count: 4000}}),
			want{"degraded", "clients.devices", "the burst of 4000 requests at 0 s: only 25% succeeded", []string{"degraded"}}},
		{"a burst, all served",
			Result{DurationS: 35, Clients: []ClientSeries{client("devices", 35, cseg{0, 1, 4000, 4000, false})}},
			sc(35*time.Second, scenario.Client{Name: "devices", Target: "db", Arrivals: scenario.Arrivals{Kind: "burst", Count: 4000}}),
			want{"stable", "clients.devices", "100% succeeded", []string{"stable"}}},
		{"a burst, the open ones decide",
			Result{DurationS: 35, Clients: []ClientSeries{client("devices", 35, cseg{0, 1, 4000, 3000, true})}},
			sc(35*time.Second, scenario.Client{Name: "devices", Target: "db", Timeout: time.Hour, Arrivals: scenario.Arrivals{Kind: "burst", Count: 4000}}),
			want{"not judged", "clients.devices", "the open ones decide", []string{"not judged"}}},
		{"a steady error rate from the start: degraded, not metastable",
			Result{DurationS: 100, Clients: []ClientSeries{client("app", 100, cseg{0, 100, 100, 50, false})}},
			sc(100*time.Second, spec("app")),
			want{"degraded", "clients.app", "not a collapse that outlived its cause", []string{"degraded"}}},
		{"85 % throughout, each window too small to tell: degraded",
			Result{DurationS: 100, Clients: []ClientSeries{client("app", 100, cseg{0, 100, 40, 34, false})}},
			sc(100*time.Second, spec("app")),
			want{"degraded", "clients.app", "85% of those that ended", []string{"degraded"}}},
		{"the same fault after a trigger at 50 s: metastable",
			Result{DurationS: 100, TriggerS: [][2]float64{{50, 55}}, Clients: []ClientSeries{client("app", 100, cseg{0, 50, 100, 100, false}, cseg{50, 100, 100, 50, false})}},
			sc(100*time.Second, spec("app")),
			want{"metastable", "clients.app", "collapsed at 50 s (during a trigger)", []string{"metastable"}}},
		{"a collapse at 1 request/s is dated where its requests began to fail",
			Result{DurationS: 300, TriggerS: [][2]float64{{100, 110}}, Clients: []ClientSeries{client("app", 300, cseg{0, 100, 1, 1, false}, cseg{100, 200, 1, 0, false}, cseg{200, 300, 1, 1, false})}},
			sc(300*time.Second, spec("app")),
			want{"recovered", "clients.app", "collapsed at 100 s (during a trigger); requests succeeded ≥ 90% again from 200 s", []string{"recovered"}}},
		{"a client back near the end: the service's backlog still draining does not decide",
			Result{DurationS: 200, TriggerS: [][2]float64{{20, 30}},
				Clients:  []ClientSeries{client("app", 200, cseg{0, 20, 100, 100, false}, cseg{20, 186, 100, 0, false}, cseg{186, 200, 100, 100, false})},
				Services: []ServiceSeries{service("db", 200, sseg{0, 20, 100, 0, 0, 0}, sseg{20, 200, 100, 100, 0, 0})}},
			sc(200*time.Second, spec("app")),
			want{"recovered", "clients.app", "client app: collapsed at 20 s", []string{"recovered", "metastable"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			r.BinS = 1
			Judge(&r, tt.s)
			var parts []string
			for _, c := range r.Clients {
				parts = append(parts, c.Verdict)
			}
			for _, v := range r.Services {
				parts = append(parts, v.Verdict)
			}
			if r.Verdict != tt.want.verdict || r.DecidedBy != tt.want.by || !strings.Contains(r.Why, tt.want.why) || !slices.Equal(parts, tt.want.parts) {
				t.Errorf("got %s by %s, parts %v (%s)\nwant %s by %s, parts %v, why with %q", r.Verdict, r.DecidedBy, parts, r.Why, tt.want.verdict, tt.want.by, tt.want.parts, tt.want.why)
				for _, c := range r.Clients {
					t.Logf("client %s: %s", c.Name, c.Why)
				}
				for _, v := range r.Services {
					t.Logf("service %s: %s", v.Name, v.Why)
				}
			}
		})
	}
}
