// Command fleetload measures the fleet budget (package fleet) at the scale
// of a real fleet: N processes sharing one budget on one real redis-server
// on 127.0.0.1, spread over several OS processes, each simulated process
// with its own Redis connection, fleet.Budget and retry.Retrier built from a
// preset, making requests at a given rate (20/s each by default).
//
// The run goes through five phases: a warm-up (1 % of attempts fail), a
// healthy phase (1 %), a storm (50 %), a recovery (1 %) and a phase in which
// ten processes fail every attempt among healthy ones. For each measured
// phase it prints, from Redis's own INFO commandstats and INFO cpu, the
// round trips the fleet made and what they cost Redis; the retries the fleet
// granted against what one shared bucket of the same spec would grant when
// fed the same plan (the same requests at their planned times, the same
// outcomes and backoff samples; see reference.go); and how long a request
// waited on the budget when it asked for a retry.
//
//	cd bench && go run ./fleetload -n 1000 -preset stormguard
//
// With -dials it measures the kill switch instead: n watchers (fleet.Watch,
// each with its own client), what they cost Redis while nothing changes,
// and how long a change takes to reach them all, announced on pub/sub
// (SetDials) or found by polling (written without an announcement).
//
// It starts its own redis-server (no persistence) unless -redis is given,
// and stops everything it started when it ends.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/fleet"
	"github.com/stormguard/stormguard/retry"
)

const workerEnv = "FLEETLOAD_WORKER"

func main() {
	switch os.Getenv(workerEnv) {
	case "1":
		workerMain()
		return
	case "dials":
		if err := dialsWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fleetload dials worker:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetload:", err)
		os.Exit(1)
	}
}

type options struct {
	n, workers, isolated int
	preset               string
	rate, scale          float64
	seed                 uint64
	redisAddr            string
	timeout              time.Duration
	jsonOut              bool
	dials                bool
	poll                 time.Duration
}

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("fleetload", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 100, "simulated processes sharing the budget")
	fs.IntVar(&o.workers, "workers", 4, "OS processes to spread them over")
	fs.IntVar(&o.isolated, "isolated", -1, "processes that fail every attempt in the last phase (-1: 10, or n/10 if fewer)")
	fs.StringVar(&o.preset, "preset", "stormguard", "retry preset (its budget is shared)")
	fs.Float64Var(&o.rate, "rate", 20, "requests per second per process")
	fs.Float64Var(&o.scale, "scale", 1, "multiply every phase's length by this")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the plan")
	fs.StringVar(&o.redisAddr, "redis", "", "use this Redis instead of starting one (its stats are reset)")
	fs.DurationVar(&o.timeout, "timeout", 0, "fleet.Config.Timeout (0: the default)")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON")
	fs.BoolVar(&o.dials, "dials", false, "measure the kill switch instead: n watchers (fleet.Watch) and how fast a change reaches them all")
	fs.DurationVar(&o.poll, "poll", fleet.DefaultWatchPoll, "with -dials: fleet.WatchConfig.PollInterval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.isolated == -1 {
		o.isolated = min(10, max(1, o.n/10))
	}
	if o.n < 1 || o.workers < 1 || o.rate <= 0 || o.scale <= 0 || o.isolated < 0 || o.isolated > o.n {
		return fmt.Errorf("bad flags: want n ≥ 1, workers ≥ 1, rate > 0, scale > 0, 0 ≤ isolated ≤ n")
	}
	o.workers = min(o.workers, o.n)
	policy, err := retry.Preset(o.preset)
	if err != nil {
		return err
	}
	ps := schedule(o.scale, o.isolated)

	addr := o.redisAddr
	if addr == "" {
		dir, err := os.MkdirTemp("", "fleetload")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		a, stop, err := startRedis(dir)
		if err != nil {
			return err
		}
		defer stop()
		addr = a
	}
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	if o.dials {
		return runDials(o, addr, admin, stdout)
	}
	key := fmt.Sprintf("fleetload-%d", time.Now().UnixNano())

	// The workers.
	ws := make([]*worker, o.workers)
	first := 0
	for i := range ws {
		count := share(o.n, o.workers, i)
		w, err := spawn("1")
		if err != nil {
			return err
		}
		defer w.cmd.Process.Kill()
		ws[i] = w
		cfg := workerConfig{Addr: addr, Key: key, Preset: o.preset, First: first, Count: count, FleetSize: o.n,
			Rate: o.rate, Seed: o.seed, Scale: o.scale, Isolated: o.isolated, Timeout: o.timeout}
		b, _ := json.Marshal(cfg)
		fmt.Fprintf(w.in, "%s\n", b)
		first += count
	}
	for i, w := range ws {
		if !w.out.Scan() || w.out.Text() != "ready" {
			return fmt.Errorf("worker %d did not start: %q", i, w.out.Text())
		}
	}
	t0 := time.Now().Add(500 * time.Millisecond)
	for _, w := range ws {
		fmt.Fprintf(w.in, "%d\n", t0.UnixNano())
	}

	// Redis's counters at each phase's start and at the end.
	snaps := make([]redisStats, len(ps)+1)
	for i := range snaps {
		at := t0.Add(total(ps))
		if i < len(ps) {
			at = t0.Add(phaseStart(ps, i))
		}
		time.Sleep(time.Until(at))
		s, err := readStats(ctx, admin)
		if err != nil {
			return err
		}
		snaps[i] = s
	}

	// The workers' counts.
	results := make([]workerResult, len(ws))
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !w.out.Scan() {
				errs[i] = fmt.Errorf("worker %d: no result", i)
				return
			}
			errs[i] = json.Unmarshal(w.out.Bytes(), &results[i])
			w.in.Close()
			_ = w.cmd.Wait()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	lv, _ := fleet.Peek(ctx, admin, key)

	ref, err := reference(policy, o.n, o.rate, o.seed, ps)
	if err != nil {
		return err
	}
	rep := report{N: o.n, Preset: o.preset, Workers: o.workers, Rate: o.rate, Date: time.Now().UTC().Format(time.DateOnly),
		Capacity: policy.Budget.Capacity, Processes: lv.Processes}
	for _, r := range results {
		rep.ClientRoundTrips += r.RoundTrips
		rep.Fallbacks += r.Fallbacks
		rep.FallbackAtEnd += r.Fallback
	}
	for i, ph := range ps {
		var c phaseCounts
		for _, r := range results {
			c.add(r.Phases[i])
		}
		d := diff(snaps[i], snaps[i+1])
		pr := phaseReport{Name: ph.Name, Measured: ph.Measured, Seconds: d.seconds,
			RoundTrips: d.roundTrips, ByCommand: d.byCommand, Commands: d.commands, RedisCPU: d.cpu / d.seconds,
			RoundTripsPerProcSec: float64(d.roundTrips) / float64(o.n) / d.seconds,
			RoundTripsPerSec:     float64(d.roundTrips) / d.seconds,
			Requests:             c.Requests, Rewards: c.FirstOK,
			Asks: c.Asks, Granted: c.Granted, RefAsks: ref[i].Asks, RefGranted: ref[i].Granted,
			IsoAsks: c.IsoAsks, IsoGranted: c.IsoGranted, RefIsoAsks: ref[i].IsoAsks, RefIsoGranted: ref[i].IsoGranted,
		}
		if c.Requests > 0 {
			pr.MeanLateMS = 1000 * c.LateSeconds / float64(c.Requests)
		}
		pr.Budget = c.Budget
		slices.Sort(c.Waits)
		pr.WaitP50MS, pr.WaitP99MS, pr.WaitMaxMS = 1000*quantile(c.Waits, 0.5), 1000*quantile(c.Waits, 0.99), 1000*quantile(c.Waits, 1)
		rep.Phases = append(rep.Phases, pr)
	}
	if o.jsonOut {
		return json.NewEncoder(stdout).Encode(rep)
	}
	rep.print(stdout)
	return nil
}

// worker is a child process of this program.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// spawn starts this program again as a worker of the given kind.
func spawn(kind string) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+kind)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	return &worker{cmd: cmd, in: in, out: sc}, nil
}

// share is how many of n processes worker i of k runs.
func share(n, k, i int) int {
	if i < n%k {
		return n/k + 1
	}
	return n / k
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

type phaseReport struct {
	Name                 string           `json:"name"`
	Measured             bool             `json:"measured"`
	Seconds              float64          `json:"seconds"`
	RoundTrips           int64            `json:"round_trips"`
	Commands             int64            `json:"commands"`
	RedisCPU             float64          `json:"redis_cpu_cores"`
	RoundTripsPerProcSec float64          `json:"round_trips_per_process_s"`
	RoundTripsPerSec     float64          `json:"round_trips_per_s"`
	Requests             int64            `json:"requests"`
	Rewards              int64            `json:"first_try_successes"`
	Asks                 int64            `json:"asks"`
	Granted              int64            `json:"granted"`
	RefAsks              int64            `json:"ref_asks"`
	RefGranted           int64            `json:"ref_granted"`
	IsoAsks              int64            `json:"isolated_asks"`
	IsoGranted           int64            `json:"isolated_granted"`
	RefIsoAsks           int64            `json:"ref_isolated_asks"`
	RefIsoGranted        int64            `json:"ref_isolated_granted"`
	WaitP50MS            float64          `json:"wait_p50_ms"`
	WaitP99MS            float64          `json:"wait_p99_ms"`
	WaitMaxMS            float64          `json:"wait_max_ms"`
	MeanLateMS           float64          `json:"mean_late_ms"`
	ByCommand            map[string]int64 `json:"by_command"`
	Budget               budgetCounts     `json:"budget"`
}

type report struct {
	N                int           `json:"n"`
	Preset           string        `json:"preset"`
	Workers          int           `json:"workers"`
	Rate             float64       `json:"rate"`
	Date             string        `json:"date"`
	Capacity         float64       `json:"capacity"`
	Processes        int           `json:"processes_in_redis_at_end"`
	ClientRoundTrips uint64        `json:"client_round_trips"`
	Fallbacks        uint64        `json:"fallbacks"`
	FallbackAtEnd    int           `json:"fallback_at_end"`
	Phases           []phaseReport `json:"phases"`
}

func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(a)/float64(b))
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "N = %d, preset %s (capacity %g), %d OS processes, %g requests/s each, %s\n",
		r.N, r.Preset, r.Capacity, r.Workers, r.Rate, r.Date)
	fmt.Fprintf(w, "budgets' own count of round trips: %d; fallbacks: %d, in fallback at the end: %d\n",
		r.ClientRoundTrips, r.Fallbacks, r.FallbackAtEnd)
	fmt.Fprintln(w, strings.Join([]string{"phase", "s", "rt/proc/s", "rt/s", "cmds/s", "redis cpu",
		"granted/asked", "shared bucket", "ratio", "isolated granted/asked", "shared bucket", "ratio",
		"wait p50/p99/max ms", "late ms"}, "\t"))
	for _, p := range r.Phases {
		fmt.Fprintf(w, "%s\t%.1f\t%.3f\t%.0f\t%.0f\t%.3f\t%d/%d\t%d/%d\t%s\t%d/%d\t%d/%d\t%s\t%.2f/%.2f/%.1f\t%.2f\n",
			p.Name, p.Seconds, p.RoundTripsPerProcSec, p.RoundTripsPerSec, float64(p.Commands)/p.Seconds, p.RedisCPU,
			p.Granted, p.Asks, p.RefGranted, p.RefAsks, ratio(p.Granted, p.RefGranted),
			p.IsoGranted, p.IsoAsks, p.RefIsoGranted, p.RefIsoAsks, ratio(p.IsoGranted, p.RefIsoGranted),
			p.WaitP50MS, p.WaitP99MS, p.WaitMaxMS, p.MeanLateMS)
	}
	for _, p := range r.Phases {
		b := p.Budget
		fmt.Fprintf(w, "%s: top-level commands %v; budgets: %d round trips (%d failed), %d fallbacks; refused: %d told to wait, %d no answer in time, %d pool short, %d in fallback; %.0f tokens of credit lost to a full pool\n",
			p.Name, p.ByCommand, b.RoundTrips, b.Failures, b.Fallbacks, b.RefusedBackoff, b.RefusedSlow, b.RefusedShort, b.RefusedFallback, b.Capped)
	}
}
