package sim

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/examples"
	"github.com/stormguard/stormguard/internal/hostspeed"
)

// guardYAML is a scenario with one client and one service; %s is the
// client's fields after its name.
func guardYAML(top, client string) string {
	return "name: g\n" + top + "clients: [{name: app, target: db, " + client + "}]\n" +
		"services: [{name: db, workers: 4, service_time: {mean: 10ms}}]\n"
}

func parseOne(t *testing.T, y string) Scenario {
	t.Helper()
	f, err := Parse("g.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return f.Runs[0].Scenario
}

// TestRunRefusesHugeScenarios: every size the audit found running the
// machine out of memory (or never ending) is refused at once, by a
// *LimitError that names the key driving it, before anything is allocated.
func TestRunRefusesHugeScenarios(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		quantity   string // of the LimitError
		driver     string // in its message
	}{
		{"duration", guardYAML("duration: 1000000h\n", "arrivals: {rate: 280}"), "events", "clients.app.arrivals.rate 280/s × duration 1000000h"},
		{"bin", guardYAML("bin: 1ns\n", "arrivals: {rate: 280}"), "memory", "duration 1m / bin 1ns = 6e10 bins × 2 series"},
		{"rate", guardYAML("", "arrivals: {rate: 1e9}"), "memory", "clients.app.arrivals.rate 1e9/s × clients.app.timeout 1s × 3 attempts of requests in flight"},
		{"users", guardYAML("", "arrivals: {kind: closed, users: 1000000000, think: {mean: 1s}}"), "memory", "clients.app.arrivals.users 1e9, each with a request in flight"},
		{"burst", guardYAML("", "arrivals: {kind: burst, count: 1000000000000}"), "memory", "clients.app.arrivals.count 1e12 requests at once"},
		{"processes", guardYAML("", "processes: 1000000000, arrivals: {rate: 10}"), "memory", "clients.app.processes 1e9, one retrier each"},
		{"schedule", guardYAML("", "arrivals: {schedule: [{at: 0s, rate: 10}, {at: 30s, rate: 1e8}]}"), "memory", "clients.app.arrivals.schedule.1.rate 1e8/s × clients.app.timeout 1s"},
		{"schedule events", guardYAML("", "timeout: 1ms, policy: {preset: naive, max_attempts: 1}, arrivals: {schedule: [{at: 0s, rate: 10}, {at: 30s, rate: 1e8}]}"),
			"events", "clients.app.arrivals.schedule, up to 1e8/s, over duration 1m"},
		{"load trigger", guardYAML("triggers: [{kind: load, at: 10s, duration: 10s, factor: 1e7}]\n", "arrivals: {rate: 100}"),
			"memory", "clients.app.arrivals.rate 100/s × triggers.0.factor 1e7 × clients.app.timeout 1s"},
		{"load trigger events", guardYAML("triggers: [{kind: load, at: 10s, duration: 10s, factor: 1e7}]\n", "timeout: 1ms, arrivals: {rate: 100}"),
			"events", "triggers.0.factor 1e7 × 100/s of arrivals for triggers.0.duration 10s"},
		// Closed-loop users with nothing that takes time: virtual time
		// never advances, and before the guard nothing stopped the loop.
		{"zero time", "name: g\nclients: [{name: app, target: db, arrivals: {kind: closed, users: 1, think: {mean: 0s}}}]\nservices: [{name: db, workers: 1, service_time: {mean: 0s}}]\n",
			"events", "virtual time never advances"},
		{"constant 2e9/s", guardYAML("duration: 1s\n", "arrivals: {kind: constant, rate: 2e9}, timeout: 1ms"), "events", "less than 1ns apart"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := parseOne(t, c.yaml)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			start := time.Now()
			_, err := Run(t.Context(), s, "g", nil)
			took := time.Since(start)
			runtime.ReadMemStats(&m1)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a *LimitError", err)
			}
			if le.Quantity != c.quantity || !strings.Contains(err.Error(), c.driver) {
				t.Errorf("err = %q, want a limit on %s naming %q", err, c.quantity, c.driver)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("err has more than one line: %q", err)
			}
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<20 {
				t.Errorf("the refusal allocated %d bytes", alloc)
			}
			if took > hostspeed.Scale(100*time.Millisecond) {
				t.Errorf("the refusal took %v", took)
			}
		})
	}
}

// TestLimitErrorText: the line a refusal prints.
func TestLimitErrorText(t *testing.T) {
	for _, c := range []struct {
		err  LimitError
		want string
	}{
		{LimitError{Quantity: "events", Estimate: 3.6e18, Limit: 2e9, Driver: "x"}, "the run would simulate about 3.6e18 events (x); the limit is 2e9"},
		{LimitError{Subject: "the sweep", Quantity: "memory", Estimate: 2.4e12, Limit: 4e9, Driver: "y"}, "the sweep would need about 2.4 TB of memory (y); the limit is 4 GB"},
		{LimitError{Quantity: "events", Estimate: math.Inf(1), Limit: 2e9, Driver: "z"}, "the run would simulate events without end (z)"},
		{LimitError{Quantity: "memory", Estimate: 5.12e11, Limit: 1.5e8, Driver: "w"}, "the run would need about 512 GB of memory (w); the limit is 150 MB"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// TestLimitsCheck: the quantity furthest beyond its limit is the one
// told; zero limits are the defaults; +Inf lifts a limit.
func TestLimitsCheck(t *testing.T) {
	for _, c := range []struct {
		l    Limits
		cost Cost
		want string // "" for no error
	}{
		{Limits{}, Cost{Events: 1e9, Memory: 1e9}, ""},
		{Limits{}, Cost{Events: 3e9, Memory: 1e9}, "events"},
		{Limits{}, Cost{Events: 3e9, Memory: 8e10}, "memory"},
		{Limits{}, Cost{Events: 4e11, Memory: 8e10}, "events"},
		{Limits{Events: math.Inf(1), Memory: math.Inf(1)}, Cost{Events: 4e11, Memory: 8e10}, ""},
		{Limits{Events: 10}, Cost{Events: 11}, "events"},
		{Limits{}, Cost{Events: math.NaN()}, "events"},
	} {
		err := c.l.Check(c.cost)
		var le *LimitError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v, %+v: %v, want none", c.l, c.cost, err)
		case c.want != "" && (!errors.As(err, &le) || le.Quantity != c.want):
			t.Errorf("%+v, %+v: %v, want a limit on %s", c.l, c.cost, err, c.want)
		}
	}
}

// TestExamplesWithinLimits: every shipped scenario runs well within the
// default limits (a tenth of them), so the guard never stands in a
// user's way on ordinary work.
func TestExamplesWithinLimits(t *testing.T) {
	names, _ := fs.Glob(examples.Scenarios, "*.yaml")
	for _, n := range names {
		data, _ := examples.Scenarios.ReadFile(n)
		f, err := Parse(n, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Runs {
			c := Estimate(r.Scenario)
			if c.Events > DefaultMaxEvents/10 || c.Memory > DefaultMaxMemory/10 || c.Events <= 0 || c.Memory <= 0 {
				t.Errorf("%s: run %s: events %v (%s), memory %v (%s)", n, r.Name, c.Events, c.EventsDriver, c.Memory, c.MemoryDriver)
			}
		}
	}
}

// peakHeap runs s and returns the largest heap it saw in use (sampled at
// every progress call and at the end) above the heap before the run, and
// the run's events.
func peakHeap(t *testing.T, s Scenario) (float64, uint64) {
	t.Helper()
	// Two collections empty the pool of arrays an earlier run gave back
	// (pool.go), so that the run allocates what it holds and the heap
	// counts it, as for a first run.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	peak := base
	sample := func(float64) {
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapAlloc)
	}
	r, err := RunWithin(t.Context(), s, "m", sample, Limits{Events: math.Inf(1), Memory: math.Inf(1)})
	if err != nil {
		t.Fatal(err)
	}
	return float64(peak - base), r.Events
}

// TestEstimateMatchesTheSimulator: the estimate of memory is never below
// what the simulator really holds, and not far above it; the estimate of
// events is of the right order for first tries.
func TestEstimateMatchesTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs of a million requests")
	}
	for _, c := range []struct {
		name, yaml string
	}{
		{"pending", "name: m\nduration: 2s\nclients: [{name: a, target: s, timeout: 1h, arrivals: {kind: burst, count: 60000, at: 0s}}]\n" +
			"services: [{name: s, workers: 1, service_time: {mean: 1h}, queue: {capacity: 1048576}}]\n"},
		{"two tiers", "name: m\nduration: 2s\nclients: [{name: a, target: s, timeout: 1h, arrivals: {kind: burst, count: 30000, at: 0s}}]\n" +
			"services: [{name: s, workers: 1000000, service_time: {mean: 0s}, calls: [{service: d, timeout: 1h}]}, {name: d, workers: 1, service_time: {mean: 1h}, queue: {capacity: 1048576}}]\n"},
		{"users", "name: m\nduration: 3s\nclients: [{name: a, target: s, timeout: 1h, arrivals: {kind: closed, users: 60000, think: {mean: 1s}}}]\n" +
			"services: [{name: s, workers: 1, service_time: {mean: 1h}, queue: {capacity: 1048576}}]\n"},
		{"processes", "name: m\nduration: 2s\nclients: [{name: a, target: s, processes: 60000, policy: stormguard, arrivals: {rate: 1}}]\n" +
			"services: [{name: s, workers: 1, service_time: {mean: 1ms}}]\n"},
		{"bins", "name: m\nduration: 100000s\nclients: [{name: a, target: s, arrivals: {rate: 0}}]\n" +
			"services: [{name: s, workers: 1, service_time: {mean: 1ms}}, {name: t, workers: 1, service_time: {mean: 1ms}}]\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := parseOne(t, c.yaml)
			est := Estimate(s)
			got, _ := peakHeap(t, s)
			if est.Memory < got || est.Memory > 6*got {
				t.Errorf("memory: estimate %s (%s), measured %s", bytesText(est.Memory), est.MemoryDriver, bytesText(got))
			}
			t.Logf("memory: estimate %s, measured %s", bytesText(est.Memory), bytesText(got))
		})
	}
	// Events: the default scenario's first tries, within a factor of 2.
	f, err := Parse(examples.DefaultName, examples.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Runs {
		est := Estimate(r.Scenario)
		res, err := Run(t.Context(), r.Scenario, r.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(res.Events); est.Events < got/2.5 || est.Events > 2*got {
			t.Errorf("run %s: events estimated %v, simulated %v", r.Name, est.Events, got)
		}
	}
}

// TestRunStopsSoonAfterCancel: a long run that the limits allow returns
// within half a second of its context's end. Before, the context was read
// once per 1 % of virtual time: here 36 s of it, about 10 s of work.
func TestRunStopsSoonAfterCancel(t *testing.T) {
	s := parseOne(t, guardYAML("duration: 1h\n", "arrivals: {rate: 100000}"))
	if err := DefaultLimits.Check(Estimate(s)); err != nil {
		t.Fatalf("the run must be within the default limits: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, s, "long", nil)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	bound := time.Duration(float64(500*time.Millisecond) * hostspeed.Measure())
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > bound {
			t.Errorf("the run returned %v after the cancel, want within %v", took, bound)
		}
	case <-time.After(hostspeed.Scale(30 * time.Second)):
		t.Fatal("the run did not return 30 s after the cancel")
	}
}

// TestRunStopsWithoutVirtualTime: a run whose clock never moves (lifted
// limits) still stops when its context ends.
func TestRunStopsWithoutVirtualTime(t *testing.T) {
	s := parseOne(t, "name: g\nclients: [{name: app, target: db, arrivals: {kind: closed, users: 1, think: {mean: 0s}}}]\n"+
		"services: [{name: db, workers: 1, service_time: {mean: 0s}}]\n")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := RunWithin(ctx, s, "spin", nil, Limits{Events: math.Inf(1), Memory: math.Inf(1)})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's", err)
		}
	case <-time.After(hostspeed.Scale(5 * time.Second)):
		t.Fatal("the run did not stop 5 s after its context ended")
	}
}

// TestReadCapsTheInput: a file larger than MaxFileSize, or an endless
// one, is refused once MaxFileSize bytes are read.
func TestReadCapsTheInput(t *testing.T) {
	big := strings.NewReader("# " + strings.Repeat("x", MaxFileSize) + "\n")
	if _, err := Read("big.yaml", big); !errors.Is(err, ErrFileTooLarge) || !strings.HasPrefix(err.Error(), "big.yaml: ") {
		t.Errorf("a file of 1 MiB + 3 bytes: %v", err)
	}
	if _, err := Read("fits.yaml", strings.NewReader("# "+strings.Repeat("x", MaxFileSize-3)+"\n")); err == nil || errors.Is(err, ErrFileTooLarge) {
		t.Errorf("a file of 1 MiB is read (and has no scenario): %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		start := time.Now()
		if _, err := Load("/dev/zero"); !errors.Is(err, ErrFileTooLarge) {
			t.Errorf("/dev/zero: %v", err)
		}
		if took := time.Since(start); took > hostspeed.Scale(time.Second) {
			t.Errorf("/dev/zero took %v to refuse", took)
		}
	}
}

// TestLoadStandardInput: path - reads standard input.
func TestLoadStandardInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = old; r.Close() })
	go func() {
		w.WriteString(guardYAML("", "arrivals: {rate: 10}"))
		w.Close()
	}()
	f, err := Load("-")
	if err != nil || f.Path != "stdin" || len(f.Runs) != 1 || f.Runs[0].Scenario.Clients[0].Arrivals.Rate != 10 {
		t.Errorf("Load(-) = %+v, %v", f, err)
	}
	if _, err := Parse("stdin", []byte("name: g\nfoo: 1\n")); err == nil || !strings.HasPrefix(err.Error(), "stdin:2: ") {
		t.Errorf("errors name stdin: %v", err)
	}
}

// TestMaxRuns: a file asking for more runs than MaxRuns is refused at
// once, in one line, instead of decoding every one of them.
func TestMaxRuns(t *testing.T) {
	var runs, values strings.Builder
	for i := range 100 {
		runs.WriteString("  - name: r" + strconv.Itoa(i) + "\n")
		values.WriteString(strconv.Itoa(i+1) + ", ")
	}
	y := guardYAML("", "arrivals: {rate: 10}") + "runs:\n" + runs.String() +
		"sweep: {set: clients.app.arrivals.rate, values: [" + values.String() + "]}\n"
	start := time.Now()
	_, err := Parse("many.yaml", []byte(y))
	if err == nil || err.Error() != "many.yaml:105: the file asks for 10000 runs (100 × 100 sweep values); the most is 1000" {
		t.Errorf("err = %v", err)
	}
	if took := time.Since(start); took > hostspeed.Scale(time.Second) {
		t.Errorf("the refusal took %v", took)
	}
}

// quickMinimize bounds, unless -fuzzminimizetime is given, how long the
// fuzzer spends minimizing each input that finds new coverage: 60 s by
// default, during which it fuzzes nothing else (0 execs/s). A scenario of
// a kilobyte takes a few hundred microseconds to parse and its
// minimization tries up to n²/2 cuts: it ran out the 60 s, again and
// again. Call it at the top of a Fuzz function.
func quickMinimize() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		flag.Set("test.fuzzminimizetime", "3s")
	}
}
