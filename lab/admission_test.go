package lab

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/shed"
	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/wire"
)

// TestLimiterRejectsAtItsLimit runs a real backend role (RoleMain, on
// 127.0.0.1) with a concurrency limit of 1 and four workers, and sends it
// three requests at once, each holding its slot for a second: a limiter
// that rejects at its limit (the scenario's default, as the simulator
// decides) serves one and refuses two at once with 503 and the
// instance-overload signal; a policy file's server block that queues at
// its limit serves all three, one after the other.
func TestLimiterRejectsAtItsLimit(t *testing.T) {
	fixed1 := limit.Spec{Kind: limit.KindFixed, Limit: 1}
	queueing := &admit.Config{Limit: fixed1, Queue: shed.Config{Capacity: 10}}
	svcTime := hostspeed.Scale(time.Second)
	tests := []struct {
		name     string
		svc      scenario.Service
		wantShed int
	}{
		{"limiter rejects at its limit", scenario.Service{Limiter: &fixed1}, 2},
		{"server block queues at its limit", scenario.Service{ServerRef: scenario.ServerRef{Server: queueing}}, 0},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.svc
			v.Name, v.Workers, v.ServiceTime = "db", 4, scenario.Dist{Kind: "constant", Mean: svcTime}
			sc := scenario.Scenario{Name: "limit", Duration: time.Minute,
				Clients: []scenario.Client{{Name: "users", Target: "db", Arrivals: scenario.Arrivals{Kind: "poisson", Rate: 10},
					Timeout: time.Minute}},
				Services: []scenario.Service{v}}
			p, err := NewPlan(sc)
			if err != nil {
				t.Fatal(err)
			}
			cfg := p.Backend
			cfg.Result = fmt.Sprintf("%s/backend-%d.json", dir, i)
			br := startRole(t, RoleBackend, cfg, dir)
			br.start(time.Now())
			type answer struct {
				code            int
				overload, after string
				at              time.Duration
			}
			const n = 3
			answers := make([]answer, n)
			begin := time.Now()
			var wg sync.WaitGroup
			for j := range n {
				wg.Go(func() {
					resp, err := http.Get("http://" + br.addr + "/")
					if err != nil {
						t.Errorf("request %d: %v", j, err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					answers[j] = answer{resp.StatusCode, resp.Header.Get(wire.HeaderOverload), resp.Header.Get(wire.HeaderRetryAfter), time.Since(begin)}
				})
			}
			wg.Wait()
			sort.Slice(answers, func(a, b int) bool { return answers[a].at < answers[b].at })
			var ok, shedN int
			for j, a := range answers {
				switch {
				case a.code == http.StatusOK:
					ok++
				case a.code == http.StatusServiceUnavailable && a.overload == wire.OverloadInstance.String() && a.after != "":
					shedN++
					if a.at >= svcTime {
						t.Errorf("answer %d: refused after %v, not at once (the slot is held for %v)", j, a.at, svcTime)
					}
				default:
					t.Errorf("answer %d: %d, %s %q, %s %q", j, a.code, wire.HeaderOverload, a.overload, wire.HeaderRetryAfter, a.after)
				}
			}
			if shedN != tt.wantShed || ok != n-tt.wantShed {
				t.Errorf("%d served, %d refused with the overload signal; want %d and %d (%+v)", ok, shedN, n-tt.wantShed, tt.wantShed, answers)
			}
			tot := br.stop(t).Service.Total
			if tot.Arrived != n || tot.Shed != int64(tt.wantShed) || tot.Completed != int64(n-tt.wantShed) {
				t.Errorf("backend's totals %+v: want %d arrived, %d shed, %d completed", tot, n, tt.wantShed, n-tt.wantShed)
			}
		})
	}
}
