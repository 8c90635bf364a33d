package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim/scenario"
)

// randomFastScenario draws a scenario of the fast path's shape (fastShape):
// one to three open-loop clients (poisson, constant, scheduled with steps
// and ramps, bursts) with any preset, attempt cap, timeout (some short
// enough to start storms), deadline, processes and idempotency keys, on one
// to three services with any number of workers, service-time distribution,
// run-queue discipline and capacity (some small enough to fill), error
// rate and defenses signal, at loads from idle to twice the capacity, for
// 4 to 30 s in bins of 0.5, 1 or 2 s.
func randomFastScenario(r *rand.Rand) scenario.Scenario {
	bins := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	s := scenario.Scenario{Name: "fast", Duration: time.Duration(4+r.IntN(27)) * time.Second,
		Bin: bins[r.IntN(len(bins))], Seed: r.Uint64()%1000 + 1}
	presets := retry.Presets()
	kinds := []string{"exponential", "constant", "uniform", "lognormal", "mixture"}
	disciplines := []string{"fifo", "lifo", "first-tries-first"}
	nsvc := 1 + r.IntN(3)
	capacity := make([]float64, nsvc) // attempts per second each can serve
	for i := range nsvc {
		mean := time.Duration(1+r.IntN(50)) * time.Millisecond
		v := scenario.Service{Name: fmt.Sprintf("s%d", i), Workers: 1 + r.IntN(20)}
		switch k := kinds[r.IntN(len(kinds))]; k {
		case "uniform":
			v.ServiceTime = scenario.Dist{Kind: k, Min: mean / 2, Max: mean * 3 / 2}
		case "lognormal":
			v.ServiceTime = scenario.Dist{Kind: k, Mean: mean, Sigma: 0.2 + r.Float64()}
		case "mixture":
			v.ServiceTime = scenario.Dist{Kind: k, Of: []scenario.Component{
				{Weight: 0.9, Dist: scenario.Dist{Kind: "exponential", Mean: mean / 2}},
				{Weight: 0.1, Dist: scenario.Dist{Kind: "constant", Mean: 5 * mean}}}}
		default:
			v.ServiceTime = scenario.Dist{Kind: k, Mean: mean}
		}
		v.Queue.Discipline = disciplines[r.IntN(len(disciplines))]
		if r.IntN(3) == 0 {
			v.Queue.Capacity = 1 + r.IntN(100)
		}
		if r.IntN(4) == 0 {
			v.ErrorRate = r.Float64() / 3
		}
		capacity[i] = float64(v.Workers) / mean.Seconds()
		s.Services = append(s.Services, v)
	}
	for i := range 1 + r.IntN(3) {
		t := r.IntN(nsvc)
		rate := capacity[t] * (0.1 + 1.9*r.Float64()) / 2
		c := scenario.Client{Name: fmt.Sprintf("c%d", i), Target: fmt.Sprintf("s%d", t),
			Policy:    scenario.PolicySpec{Preset: presets[r.IntN(len(presets))]},
			Timeout:   time.Duration(5+r.IntN(1000)) * time.Millisecond,
			Processes: 1 + r.IntN(3), PropagateDeadline: r.IntN(2) == 0, IdempotencyKey: r.IntN(3) == 0}
		c.Policy.Policy, _ = retry.Preset(c.Policy.Preset)
		c.Policy.MaxAttempts = 1 + r.IntN(4)
		if r.IntN(4) == 0 {
			c.Deadline = time.Duration(10+r.IntN(3000)) * time.Millisecond
		}
		switch r.IntN(5) {
		case 0:
			c.Arrivals = scenario.Arrivals{Kind: "constant", Rate: rate}
		case 1:
			c.Arrivals = scenario.Arrivals{Kind: "poisson", Rate: rate, Schedule: []scenario.RatePoint{
				{At: s.Duration / 3, Rate: 2 * rate}, {At: s.Duration / 2, Rate: rate / 2, Ramp: true}}}
		case 2:
			c.Arrivals = scenario.Arrivals{Kind: "burst", Count: 1 + r.IntN(500), At: time.Duration(r.Int64N(int64(s.Duration)))}
		default:
			c.Arrivals = scenario.Arrivals{Kind: "poisson", Rate: rate}
		}
		s.Clients = append(s.Clients, c)
	}
	return s
}

// TestFastPathSameResult holds the fast path to the general model: on
// random scenarios of its shape, and on the benchmarks' M/M/1 calm and in
// a storm, both give the same Result, byte for byte as JSON. It checks
// that the scenarios reach what the fast path must get right: timeouts,
// retries, full queues and errors, and requests still open at the end.
func TestFastPathSameResult(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 40
	}
	r := rand.New(rand.NewPCG(27, 1))
	cases := []scenario.Scenario{mm1Bench(20 * time.Second), mm1Storm(20 * time.Second)}
	for range n {
		cases = append(cases, randomFastScenario(r))
	}
	var retries, shed, failed, inFlight, wasted int64
	ctx := context.Background()
	for i, s := range cases {
		if why := fastShape(ptr(s.WithDefaults())); why != "" {
			t.Fatalf("case %d: not the fast path's shape: %s", i, why)
		}
		fast, err := simulate(ctx, s, "run", runOpts{})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		general, err := simulate(ctx, s, "run", runOpts{general: true})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(general)
		if !bytes.Equal(a, b) {
			spec, _ := json.Marshal(s)
			t.Fatalf("case %d: the fast path's Result differs from the general model's\nscenario %s\nfast    %s\ngeneral %s", i, spec, firstDiffJSON(a, b), firstDiffJSON(b, a))
		}
		for _, c := range fast.Clients {
			retries += c.Total.Retries
			failed += c.Total.Failed
			inFlight += c.Total.InFlight
		}
		for _, v := range fast.Services {
			shed += v.Total.Shed
			wasted += v.Total.Wasted
		}
	}
	t.Logf("%d scenarios: %d retries, %d requests failed, %d in flight at the end; %d attempts shed, %d wasted", len(cases), retries, failed, inFlight, shed, wasted)
	if retries == 0 || shed == 0 || failed == 0 || inFlight == 0 || wasted == 0 {
		t.Error("the scenarios do not exercise retries, sheds, failures, open requests and wasted work")
	}
}

func ptr[T any](v T) *T { return &v }

// firstDiffJSON returns a's text around the first byte where it differs
// from b.
func firstDiffJSON(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo, hi := max(0, i-200), min(len(a), i+200)
	return fmt.Sprintf("…%s… (byte %d)", a[lo:hi], i)
}

// TestFastPathCancel checks that a run on the fast path stops when its
// context ends: at once when it has already ended, and soon after it is
// cancelled midway (from the first progress report, in a long storm,
// where a timeout that sends its retry at once delivers two events in
// one turn of the loop), with the context's error.
func TestFastPathCancel(t *testing.T) {
	for _, c := range []struct {
		name string
		s    scenario.Scenario
	}{{"calm", mm1Bench(2000 * time.Second)}, {"storm", mm1Storm(2000 * time.Second)}} {
		t.Run(c.name, func(t *testing.T) {
			if why := fastShape(ptr(c.s.WithDefaults())); why != "" {
				t.Fatalf("not the fast path's shape: %s", why)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := Run(ctx, c.s, "mm1", nil); err != context.Canceled {
				t.Errorf("cancelled before: got %v, want %v", err, context.Canceled)
			}
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			var last float64
			_, err := Run(ctx, c.s, "mm1", func(frac float64) {
				last = frac
				cancel()
			})
			if err != context.Canceled {
				t.Errorf("cancelled midway: got %v, want %v", err, context.Canceled)
			}
			if last > 0.05 {
				t.Errorf("the run went on to %.0f %% of its horizon after it was cancelled", 100*last)
			}
		})
	}
}
