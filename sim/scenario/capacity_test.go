package scenario

import (
	"math"
	"testing"
	"time"
)

// TestCapacity: the requests per second a target serves, from its own
// figure, its callees' and its cache (each case says why).
func TestCapacity(t *testing.T) {
	s := capacityFixture()
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

// TestFigures: a service's holding time counts its calls, and a
// thrashing curve leaves Peak above Capacity.
func TestFigures(t *testing.T) {
	s := capacityFixture()
	want := map[string]Figure{
		"web":    {Hold: ms(40), Capacity: 250, Peak: 250}, // 10 + 2 × 5 + db's 20 ms
		"db":     {Hold: ms(20), Capacity: 100, Peak: 100},
		"thrash": {Hold: ms(50), Capacity: 200, Peak: 400}, // half speed past the knee
		"tick":   {Capacity: 10, Peak: 10},
		"free":   {Capacity: math.Inf(1), Peak: math.Inf(1)},
	}
	got := Figures(s)
	for i, v := range s.Services {
		w, ok := want[v.Name]
		if g := got[i]; ok && (g.Hold != w.Hold || !near(g.Capacity, w.Capacity) || !near(g.Peak, w.Peak)) {
			t.Errorf("%s: %+v, want %+v", v.Name, g, w)
		}
	}
	if got := ServiceCapacity(s, "thrash"); got != 200 {
		t.Errorf("ServiceCapacity(thrash) = %v, want 200", got)
	}
}

func near(got, want float64) bool {
	return got == want || math.Abs(got-want) <= 1e-9*want
}

// capacityFixture holds a service of each kind the capacity figures
// tell apart; the comments give their figures.
func capacityFixture() Scenario {
	return Scenario{Services: []Service{
		{Name: "web", Workers: 10, ServiceTime: Dist{Mean: ms(10)},
			Calls: []Call{{Service: "db", Network: Network{Latency: Dist{Mean: ms(5)}}}}},
		{Name: "db", Workers: 2, ServiceTime: Dist{Kind: "uniform", Min: ms(10), Max: ms(30)}},
		{Name: "tick", Capacity: &TickCapacity{PerTick: 10, Tick: time.Second}},
		{Name: "free"},
		// A mixture's mean: 0.9 × 10 ms + 0.1 × 110 ms = 20 ms.
		{Name: "mix", Workers: 4, ServiceTime: Dist{Kind: "mixture", Of: []Component{
			{Weight: 0.9, Dist: Dist{Mean: ms(10)}}, {Weight: 0.1, Dist: Dist{Kind: "exponential", Mean: ms(110)}}}}},
		{Name: "replicated", Workers: 5, Replicas: 3, ServiceTime: Dist{Mean: ms(50)}},
		// Processor sharing: 100 workers, but 2 cores of 20 ms each.
		{Name: "ps", Workers: 100, ServiceTime: Dist{Mean: ms(20)}, Law: &CapacityLaw{Kind: "processor-sharing", Cores: 2}},
		// Past a knee at 10 of 20 workers, half the speed: 20 ÷ 100 ms.
		{Name: "thrash", Workers: 20, ServiceTime: Dist{Mean: ms(50)}, Law: &CapacityLaw{Knee: 10, Drop: 0.5}},
		// Linear: 10 ms + 1 ms × 10 workers.
		{Name: "linear", Workers: 10, ServiceTime: Dist{Mean: ms(10)}, Law: &CapacityLaw{Kind: "linear", PerRequest: ms(1)}},
		// A 90 % cache in front of 300/s serves 3000 requests/s.
		{Name: "cached", Workers: 15, ServiceTime: Dist{Mean: ms(50)}, Cache: &Cache{HitRate: 0.9}},
		{Name: "allhits", Workers: 1, ServiceTime: Dist{Mean: ms(50)}, Cache: &Cache{HitRate: 1}},
		// Two calls to db per request: half of what db serves.
		{Name: "twice", Workers: 100, ServiceTime: Dist{Mean: ms(1)}, Calls: []Call{{Service: "db"}, {Service: "db"}}},
		// Calls into a cached service: its advertised capacity bounds them.
		{Name: "front", Workers: 1000, ServiceTime: Dist{Mean: ms(1)}, Calls: []Call{{Service: "cached"}}},
	}}
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
