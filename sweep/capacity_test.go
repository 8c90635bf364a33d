package sweep

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stormguard/stormguard/analyze"
	"github.com/stormguard/stormguard/sim"
)

// TestServiceCapacityAgreesWithAnalyze: sweep's capacity figure of every
// service of every run of every example is the one `stormguard analyze`
// reports, so that the sweep's default loads and the analysis speak of the
// same capacity.
func TestServiceCapacityAgreesWithAnalyze(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("examples: %v (%d files)", err, len(files))
	}
	compared := 0
	for _, path := range files {
		f, err := sim.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Runs {
			a, err := analyze.Scenario(r.Scenario)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, r.Name, err)
			}
			for _, sf := range a.Services {
				got := ServiceCapacity(r.Scenario, sf.Name)
				want := math.Inf(1)
				if sf.Bounded {
					want = sf.Capacity
				}
				if !(got == want || math.Abs(got-want) <= 1e-9*want) {
					t.Errorf("%s: run %s: service %s: sweep's capacity %v, analyze's %v", filepath.Base(path), r.Name, sf.Name, got, want)
				}
				compared++
			}
		}
	}
	t.Logf("%d services compared", compared)
}

func TestCapacity(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	s := sim.Scenario{Services: []sim.Service{
		{Name: "web", Workers: 10, ServiceTime: sim.Dist{Mean: ms(10)},
			Calls: []sim.Call{{Service: "db", Network: sim.Network{Latency: sim.Dist{Mean: ms(5)}}}}},
		{Name: "db", Workers: 2, ServiceTime: sim.Dist{Kind: "uniform", Min: ms(10), Max: ms(30)}},
		{Name: "tick", Capacity: &sim.TickCapacity{PerTick: 10, Tick: time.Second}},
		{Name: "free"},
		// A mixture's mean: 0.9 × 10 ms + 0.1 × 110 ms = 20 ms.
		{Name: "mix", Workers: 4, ServiceTime: sim.Dist{Kind: "mixture", Of: []sim.Component{
			{Weight: 0.9, Dist: sim.Dist{Mean: ms(10)}}, {Weight: 0.1, Dist: sim.Dist{Kind: "exponential", Mean: ms(110)}}}}},
		{Name: "replicated", Workers: 5, Replicas: 3, ServiceTime: sim.Dist{Mean: ms(50)}},
		// Processor sharing: 100 workers, but 2 cores of 20 ms each.
		{Name: "ps", Workers: 100, ServiceTime: sim.Dist{Mean: ms(20)}, Law: &sim.CapacityLaw{Kind: "processor-sharing", Cores: 2}},
		// Past a knee at 10 of 20 workers, half the speed: 20 ÷ 100 ms.
		{Name: "thrash", Workers: 20, ServiceTime: sim.Dist{Mean: ms(50)}, Law: &sim.CapacityLaw{Knee: 10, Drop: 0.5}},
		// Linear: 10 ms + 1 ms × 10 workers.
		{Name: "linear", Workers: 10, ServiceTime: sim.Dist{Mean: ms(10)}, Law: &sim.CapacityLaw{Kind: "linear", PerRequest: ms(1)}},
		// A 90 % cache in front of 300/s serves 3000 requests/s.
		{Name: "cached", Workers: 15, ServiceTime: sim.Dist{Mean: ms(50)}, Cache: &sim.Cache{HitRate: 0.9}},
		{Name: "allhits", Workers: 1, ServiceTime: sim.Dist{Mean: ms(50)}, Cache: &sim.Cache{HitRate: 1}},
		// Two calls to db per request: half of what db serves.
		{Name: "twice", Workers: 100, ServiceTime: sim.Dist{Mean: ms(1)}, Calls: []sim.Call{{Service: "db"}, {Service: "db"}}},
		// Calls into a cached service: its advertised capacity bounds them.
		{Name: "front", Workers: 1000, ServiceTime: sim.Dist{Mean: ms(1)}, Calls: []sim.Call{{Service: "cached"}}},
	}}
	for _, c := range []struct {
		target string
		want   float64
	}{
		{"db", 100},   // 2 workers ÷ 20 ms
		{"web", 100},  // 10 ÷ (10 + 2×5 + 20 ms) = 250, but db serves 100
		{"tick", 10},  // 10 per second
		{"free", 0},   // no service time: unknown
		{"absent", 0}, // no such service
		{"mix", 200},
		{"replicated", 300},
		{"ps", 100},
		{"thrash", 200},
		{"linear", 500},
		{"cached", 3000},
		{"allhits", 0},
		{"twice", 50},
		{"front", 3000},
	} {
		if got := Capacity(s, c.target); math.Abs(got-c.want) > 1e-6*math.Max(1, c.want) {
			t.Errorf("Capacity(%s) = %v, want %v", c.target, got, c.want)
		}
	}
}
