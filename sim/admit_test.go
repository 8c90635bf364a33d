package sim

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admit"
	"github.com/stormguard/stormguard/limit"
	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/sim/scenario"
)

// serviceTime is the work of every request in TestServerBlockSameDecisions.
const serviceTime = time.Second

// TestServerBlockSameDecisions loads one policy file's server block into
// the production gate (admit.New, as httpx.Server builds it) and into a
// simulated service (a scenario whose service references the file, loaded
// and run as stormguard sim runs it), and offers both the same arrivals;
// each admitted request completes serviceTime after it was admitted. Every
// request must be decided alike: admitted at the same (virtual) instant,
// at once or after waiting in the queue, or shed.
func TestServerBlockSameDecisions(t *testing.T) {
	// Arrivals in ms, one request each (r1, r2, …): first tries. With lifo
	// a full queue evicts its oldest (served last), here r3, for r5.
	arrivals := []int{500, 600, 700, 800, 900, 2000, 2100}
	cases := []struct {
		name, server string
		want         []string
	}{
		{"fifo", "limit: {kind: fixed, limit: 2}\n  queue: {capacity: 2, order: fifo}", []string{
			"r1 admitted at 500ms", "r2 admitted at 600ms", "r3 admitted at 1.5s", "r4 admitted at 1.6s",
			"r5 shed", "r6 admitted at 2.5s", "r7 admitted at 2.6s"}},
		{"lifo", "limit: {kind: fixed, limit: 2}\n  queue: {capacity: 2, order: lifo}", []string{
			"r1 admitted at 500ms", "r2 admitted at 600ms", "r3 shed", "r4 admitted at 1.6s",
			"r5 admitted at 1.5s", "r6 admitted at 2.6s", "r7 admitted at 2.5s"}},
		{"limit 1, queue 1", "limit: {kind: fixed, limit: 1}\n  queue: {capacity: 1}", []string{
			"r1 admitted at 500ms", "r2 admitted at 1.5s", "r3 shed", "r4 shed",
			"r5 shed", "r6 admitted at 2.5s", "r7 shed"}},
		{"limit 3, queue 3", "limit: {kind: fixed, limit: 3}\n  queue: {capacity: 3}", []string{
			"r1 admitted at 500ms", "r2 admitted at 600ms", "r3 admitted at 700ms", "r4 admitted at 1.5s",
			"r5 admitted at 1.6s", "r6 admitted at 2s", "r7 admitted at 2.5s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			policy := filepath.Join(dir, "server.yaml")
			if err := os.WriteFile(policy, []byte("server:\n  max_timeout: 1m\n  "+tc.server+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			pf, err := policyfile.Load(policy)
			if err != nil {
				t.Fatal(err)
			}
			if got := gateDecisions(t, *pf.Server, arrivals); !slices.Equal(got, tc.want) {
				t.Errorf("admit gate:\n got %q\nwant %q", got, tc.want)
			}
			if got := simDecisions(t, dir, arrivals); !slices.Equal(got, tc.want) {
				t.Errorf("simulator:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// gateDecisions drives a production gate built from cfg on a virtual
// timeline: the arrivals, and each admitted request's release serviceTime
// later. After each step it waits until every request whose Admit has not
// returned is in the queue.
func gateDecisions(t *testing.T, cfg admit.Config, arrivals []int) []string {
	t.Helper()
	g, err := admit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type result struct {
		tk admit.Ticket
		d  admit.Decision
	}
	type pending struct {
		i  int
		ch chan result
	}
	out := make([]string, len(arrivals))
	var waiting []pending
	type release struct {
		at time.Duration
		tk admit.Ticket
	}
	var releases []release
	settle := func(now time.Duration) {
		for deadline := time.Now().Add(5 * time.Second); ; {
			for j := 0; j < len(waiting); j++ {
				select {
				case r := <-waiting[j].ch:
					i := waiting[j].i
					if r.d.Admitted() {
						out[i] = fmt.Sprintf("r%d admitted at %v", i+1, now)
						releases = append(releases, release{now + serviceTime, r.tk})
					} else {
						out[i] = fmt.Sprintf("r%d shed", i+1)
					}
					waiting = slices.Delete(waiting, j, j+1)
					j--
				default:
				}
			}
			if g.Stats().Queued == len(waiting) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("at %v: %d requests pending, %d queued", now, len(waiting), g.Stats().Queued)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	next := 0
	for next < len(arrivals) || len(releases) > 0 {
		slices.SortStableFunc(releases, func(a, b release) int { return int(a.at - b.at) })
		if next < len(arrivals) && (len(releases) == 0 || time.Duration(arrivals[next])*time.Millisecond < releases[0].at) {
			now := time.Duration(arrivals[next]) * time.Millisecond
			ch := make(chan result, 1)
			go func() {
				tk, d := g.Admit(ctx, time.Now(), admit.Request{Attempt: 1})
				ch <- result{tk, d}
			}()
			waiting = append(waiting, pending{next, ch})
			next++
			settle(now)
			continue
		}
		r := releases[0]
		releases = releases[1:]
		r.tk.Release(ctx, time.Now(), admit.Succeeded)
		settle(r.at)
	}
	return out
}

// simDecisions runs a scenario with one client per arrival (one request,
// no retry) to a service of ample workers whose admission is the server
// block of dir/server.yaml, and reads each request's fate from its
// client: shed (failed), or admitted at arrival + latency − serviceTime.
func simDecisions(t *testing.T, dir string, arrivals []int) []string {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: gate\nduration: 10s\nclients:\n")
	for i, at := range arrivals {
		fmt.Fprintf(&b, "  - name: r%d\n    target: s\n    arrivals: {kind: burst, count: 1, at: %dms}\n"+
			"    policy: {preset: naive, max_attempts: 1}\n    timeout: 30s\n", i+1, at)
	}
	fmt.Fprintf(&b, "services:\n  - name: s\n    workers: 100\n    service_time: {kind: constant, mean: %v}\n    policy_file: server.yaml\n", serviceTime)
	path := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, f.Runs[0].Scenario, "gate")
	out := make([]string, len(arrivals))
	for i, c := range r.Clients {
		switch tot := c.Total; {
		case tot.Succeeded == 1:
			ms := float64(arrivals[i]) + 1000*tot.SuccessLatencyS - float64(serviceTime/time.Millisecond)
			out[i] = fmt.Sprintf("r%d admitted at %v", i+1, time.Duration(math.Round(ms))*time.Millisecond)
		case tot.Failed == 1:
			out[i] = fmt.Sprintf("r%d shed", i+1)
		default:
			out[i] = fmt.Sprintf("r%d %+v", i+1, tot)
		}
	}
	return out
}

// TestServerRefLoad: a service's policy_file fills its Server (and its
// supersession) from the file's server block; problems are reported at the
// scenario's line, as a client's policy_file's are.
func TestServerRefLoad(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"server.yaml":  "server:\n  max_timeout: 2s\n  limit: {kind: fixed, limit: 4}\n  queue: {capacity: 8, order: lifo}\n  supersede: {max_waiters: 3}\n",
		"clients.yaml": "clients:\n  db: naive\n",
		"bad.yaml":     "server:\n  max_timeout: 0s\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parse := func(t *testing.T, service string) (scenario.File, error) {
		t.Helper()
		path := filepath.Join(dir, "s.yaml")
		scen := "name: s\nclients:\n  - name: app\n    target: db\n    arrivals: {rate: 10}\n" +
			"services:\n  - name: db\n    service_time: {mean: 10ms}\n" + service
		if err := os.WriteFile(path, []byte(scen), 0o644); err != nil {
			t.Fatal(err)
		}
		return scenario.Load(path)
	}

	t.Run("resolved", func(t *testing.T) {
		f, err := parse(t, "    policy_file: server.yaml\n")
		if err != nil {
			t.Fatal(err)
		}
		v := f.Runs[0].Scenario.Services[0]
		if v.Server == nil {
			t.Fatal("no server block")
		}
		tests := []struct {
			name      string
			got, want any
		}{
			{"max_timeout", v.Server.MaxTimeout, 2 * time.Second},
			{"limit", v.Server.Limit.Limit, 4},
			{"queue capacity", v.Server.Queue.Capacity, 8},
			{"supersede max_waiters", v.Supersede != nil && v.Supersede.MaxWaiters == 3, true},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
			}
		}
	})

	bad := []struct {
		name, service, want string
	}{
		{"no server block", "    policy_file: clients.yaml\n",
			"s.yaml:9: services.db.policy_file: clients.yaml has no server block"},
		{"bad block", "    policy_file: bad.yaml\n",
			"s.yaml:9: services.db.policy_file: " + filepath.Join(dir, "bad.yaml") + ":2: server.max_timeout: "},
		{"limiter too", "    policy_file: server.yaml\n    limiter: {kind: fixed, limit: 3}\n",
			"s.yaml:10: services.db.limiter: admission comes from the server block of policy_file server.yaml: remove limiter"},
		{"queue too", "    policy_file: server.yaml\n    queue: {capacity: 3}\n",
			"s.yaml:10: services.db.queue: admission comes from the server block"},
		{"supersede too", "    policy_file: server.yaml\n    supersede: {}\n",
			"s.yaml:10: services.db.supersede: admission comes from the server block"},
		{"missing file", "    policy_file: none.yaml\n",
			"s.yaml:9: services.db.policy_file: stat "},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.service)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestServerBlockExpires: a request whose deadline (arrival + max_timeout)
// passes while it waits in the gate's queue expires there, when it falls
// due, without running, as in production; the others run.
func TestServerBlockExpires(t *testing.T) {
	tests := []struct {
		name               string
		maxTimeout         time.Duration
		completed, expired int64
		expiredAt          float64 // s, the bin's start; -1: none
	}{
		// r1 runs 0.5–1.5 s, r2 1.5–2.5 s; r3 (arrived 0.7 s) would start
		// at 2.5 s, after its deadline of 2.2 s.
		{"max_timeout 1.5s", 1500 * time.Millisecond, 2, 1, 2.2},
		{"max_timeout 1m", time.Minute, 3, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := oneService(0, scenario.Service{Workers: 10, ServiceTime: scenario.Dist{Kind: "constant", Mean: time.Second}}, 10*time.Second, 1)
			s.Services[0].Server = &admit.Config{MaxTimeout: tt.maxTimeout, Limit: limit.Spec{Kind: limit.KindFixed, Limit: 1}}
			c := s.Clients[0]
			s.Clients = nil
			for i, at := range []int{500, 600, 700} {
				c.Name = fmt.Sprintf("r%d", i+1)
				c.Arrivals = scenario.Arrivals{Kind: "burst", Count: 1, At: time.Duration(at) * time.Millisecond}
				s.Clients = append(s.Clients, c)
			}
			s.Bin = 100 * time.Millisecond
			r := run(t, s).Services[0]
			if v := r.Total; v.Completed != tt.completed || v.Expired != tt.expired {
				t.Errorf("completed %d, expired %d; want %d, %d", v.Completed, v.Expired, tt.completed, tt.expired)
			}
			at := -1.0
			for _, b := range r.Bins {
				if b.Expired > 0 {
					at = math.Round(b.T*10) / 10
					break
				}
			}
			if at != tt.expiredAt {
				t.Errorf("expired in the bin at %v s, want %v s (its deadline; -1: none)", at, tt.expiredAt)
			}
		})
	}
}
