package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/sim"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// stormguardBinary builds this command once per test binary and returns
// its path; STORMGUARD_BIN names another build to test instead (an older
// one, to see a regression test fail).
func stormguardBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STORMGUARD_BIN"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stormguard-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "stormguard")
		gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gotool); err != nil {
			gotool = "go"
		}
		if out, err := exec.Command(gotool, "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("building stormguard: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestMain removes the binary stormguardBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// outcome is what a run of the binary did.
type outcome struct {
	code           int
	stdout, stderr string
	took           time.Duration
	maxRSS         int64 // bytes
}

// runBinary runs the built command with args (stdin from stdin, if not
// nil) in dir, its address space capped at 4 GB so that a guard that does
// not hold cannot take the machine down, and kills it after limit.
func runBinary(t *testing.T, dir string, stdin []byte, limit time.Duration, args ...string) outcome {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to cap the address space with ulimit")
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	// GNU time, when there is one, reports the peak memory of the binary
	// alone: a direct child of this test inherits the test's own peak in
	// its rusage (it starts as a vfork of it).
	script := `ulimit -v 4000000 && exec "$0" "$@"`
	rss := filepath.Join(t.TempDir(), "maxrss")
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		script = `ulimit -v 4000000 && exec /usr/bin/time -q -f %M -o "` + rss + `" "$0" "$@"`
	}
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, stormguardBinary(t)}, args...)...)
	// On the deadline, kill the binary too, not just GNU time.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	o := outcome{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.code = ee.ExitCode()
	default:
		t.Fatalf("%q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Errorf("%q: still running after %v, killed", args, limit)
	}
	o.maxRSS = -1
	if b, err := os.ReadFile(rss); err == nil {
		fmt.Sscan(string(b), &o.maxRSS)
		o.maxRSS <<= 10 // kilobytes
	}
	return o
}

// schedule writes a scenario whose client has a schedule of n points.
func schedule(n int) []byte {
	var b strings.Builder
	b.WriteString("name: big\nclients:\n  - name: app\n    target: db\n    arrivals:\n      schedule:\n")
	for i := range n {
		fmt.Fprintf(&b, "        - {at: %ds, rate: %d}\n", i, i%300)
	}
	b.WriteString("services: [{name: db, workers: 4, service_time: {mean: 10ms}}]\n")
	return []byte(b.String())
}

// guarded is a scenario of one client and one service, with top-level
// keys top and the client's fields client.
func guarded(top, client string) []byte {
	return []byte("name: g\n" + top + "clients: [{name: app, target: db, " + client + "}]\n" +
		"services: [{name: db, workers: 4, service_time: {mean: 10ms}}]\n")
}

// TestRefusals: every size that the audit saw run the machine out of
// memory, or run for minutes deaf to Ctrl-C, is refused at once by the
// built binary: exit status 2, one line that names the estimate and the
// key or flag that drives it, well under a second and a few tens of MB
// (most of them the Go runtime's and the binary's own).
func TestRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	sweepFile := filepath.Join(dir, "sweep.yaml")
	if err := os.WriteFile(sweepFile, []byte(sweepYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		file  []byte // written to FILE.yaml; args name it
		stdin []byte
		args  []string
		want  string // the one line on stderr
	}{
		{"duration", guarded("duration: 1000000h\n", "arrivals: {rate: 280}"), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the run would simulate about 4e12 events (clients.app.arrivals.rate 280/s × duration 1000000h); the limit is 2e9; raise it with --max-events"},
		{"bin", guarded("bin: 1ns\n", "arrivals: {rate: 280}"), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the run would need about 40.8 TB of memory (duration 1m / bin 1ns = 6e10 bins × 2 series); the limit is 4 GB; raise it with --max-memory"},
		{"rate", guarded("", "arrivals: {rate: 1e9}"), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the run would need about 3.84 TB of memory (clients.app.arrivals.rate 1e9/s × clients.app.timeout 1s × 3 attempts of requests in flight); the limit is 4 GB; raise it with --max-memory"},
		{"rate events", guarded("", "arrivals: {rate: 1e9}"), nil, []string{"sim", "FILE", "--max-memory", "inf"},
			"stormguard: sim: FILE: the run would simulate about 2.4e11 events (clients.app.arrivals.rate 1e9/s × duration 1m); the limit is 2e9; raise it with --max-events"},
		{"users", guarded("", "arrivals: {kind: closed, users: 1000000000, think: {mean: 1s}}"), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the run would need about 1.28 TB of memory (clients.app.arrivals.users 1e9, each with a request in flight); the limit is 4 GB; raise it with --max-memory"},
		{"burst", guarded("", "arrivals: {kind: burst, count: 1000000000000}"), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the run would need about 1.28 PB of memory (clients.app.arrivals.count 1e12 requests at once); the limit is 4 GB; raise it with --max-memory"},
		{"processes", guarded("", "processes: 1000000000, arrivals: {rate: 10}"), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the run would need about 640 GB of memory (clients.app.processes 1e9, one retrier each); the limit is 4 GB; raise it with --max-memory"},
		{"38 MB schedule", schedule(1_100_000), nil, []string{"sim", "FILE"},
			"stormguard: sim: FILE: the file is larger than 1 MiB, the most a scenario file may hold"},
		{"/dev/zero", nil, nil, []string{"sim", "/dev/zero"},
			"stormguard: sim: /dev/zero: the file is larger than 1 MiB, the most a scenario file may hold"},
		{"stdin", nil, guarded("", "arrivals: {rate: 1e9}"), []string{"sim", "-", "--max-memory", "1e100"},
			"stormguard: sim: stdin: the run would simulate about 2.4e11 events (clients.app.arrivals.rate 1e9/s × duration 1m); the limit is 2e9; raise it with --max-events"},
		{"two runs", append(guarded("", "arrivals: {rate: 1e7}"), "runs: [{name: a}, {name: b}]\n"...), nil, []string{"sim", "FILE", "--max-memory", "inf"},
			"stormguard: sim: FILE: the runs would simulate about 4.8e9 events (2 runs; run a: clients.app.arrivals.rate 1e7/s × duration 1m); the limit is 2e9; raise it with --max-events"},
		{"sweep --loads", nil, nil, []string{"sweep", sweepFile, "--no-ramp", "--loads", "1e9", "--workers", "1"},
			"stormguard: sweep: " + sweepFile + ": the sweep would simulate about 2.2e13 events (run naive's phase search at 1e9/s (--loads), up to 21 simulations: clients.app.arrivals.rate 1e9/s × duration 2m11s); the limit is 2e9; raise it with --max-events"},
		{"sweep --ramp", nil, nil, []string{"sweep", sweepFile, "--no-phase", "--ramp", "100:1e9"},
			"stormguard: sweep: " + sweepFile + ": the sweep would simulate about 8.7e12 events (run naive's ramp, 101 steps of 20s up to 1e9/s (--ramp, --hold): clients.app.arrivals.schedule, up to 1e9/s, over duration 33m40s); the limit is 2e9; raise it with --max-events"},
		{"sweep --hold", nil, nil, []string{"sweep", sweepFile, "--hold", "1000000h"},
			"stormguard: sweep: --hold 1000000h: 81 steps of it last longer than the simulator's clock holds (about 292 years)"},
		{"sweep --after", nil, nil, []string{"sweep", sweepFile, "--after", "2562047h47m", "--max", "40s"},
			"stormguard: sweep: --after 2562047h47m: a run of the trigger's start (3s), its largest size and this lasts longer than the simulator's clock holds (about 292 years)"},
		{"sweep --max", nil, nil, []string{"sweep", sweepFile, "--max", "1000000h"},
			"stormguard: sweep: --max 1000000h: longer than the simulator's clock allows a trigger (at most 640511h)"},
		{"sweep --loads steps", nil, nil, []string{"sweep", sweepFile, "--loads", "1:1e9:1"},
			`stormguard: sweep: --loads "1:1e9:1": 1e+09 loads, more than 10000`},
		{"sweep /dev/zero", nil, nil, []string{"sweep", "/dev/zero"},
			"stormguard: sweep: /dev/zero: the file is larger than 1 MiB, the most a scenario file may hold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != nil {
				path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
				if err := os.WriteFile(path, c.file, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append([]string(nil), args...)
				for i, a := range args {
					if a == "FILE" {
						args[i] = path
					}
				}
				c.want = strings.ReplaceAll(c.want, "FILE", path)
			}
			o := runBinary(t, dir, c.stdin, hostspeed.Scale(20*time.Second), args...)
			if o.code != exitUsage || memFigure(o.stderr) != memFigure(c.want+"\n") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and\n%s", o.code, o.stderr, exitUsage, c.want)
			}
			if o.stdout != "" {
				t.Errorf("stdout: %q", o.stdout)
			}
			if o.took > hostspeed.Scale(time.Second) {
				t.Errorf("the refusal took %v", o.took)
			}
			if o.maxRSS > 64<<20 {
				t.Errorf("the refusal took %d MB of memory", o.maxRSS>>20)
			}
			if o.maxRSS >= 0 {
				t.Logf("%v, %.1f MB at the peak", o.took.Round(time.Millisecond), float64(o.maxRSS)/(1<<20))
			}
		})
	}
}

// TestSignalsStopRuns: SIGINT or SIGTERM stops a long run (within the
// limits) of sim or sweep within half a second: one line on stderr, exit
// status 130, no goroutine dump. Before, sim looked at the signal once
// per 1 % of virtual time, here tens of seconds.
func TestSignalsStopRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	long := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(long, guarded("duration: 1h\n", "arrivals: {rate: 100000}"), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepFile := filepath.Join(dir, "sweep.yaml")
	if err := os.WriteFile(sweepFile, []byte(sweepYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		args []string
	}{
		{"sim SIGINT", syscall.SIGINT, []string{"sim", long}},
		{"sim SIGTERM", syscall.SIGTERM, []string{"sim", long}},
		{"sweep SIGINT", syscall.SIGINT, []string{"sweep", sweepFile, "--no-phase", "--ramp", "20000:50000:1000", "--hold", "300s", "--max-events", "1e11"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(stormguardBinary(t), c.args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Let it get well into the run (past its start-up and
			// estimate) before the signal.
			select {
			case err := <-exited:
				t.Fatalf("the run ended before the signal: %v\n%s", err, errb.String())
			case <-time.After(time.Second):
			}
			// The bound follows the host's load now, not at the start of
			// the test binary (the run itself is part of that load).
			bound := time.Duration(float64(500*time.Millisecond) * hostspeed.Measure())
			sent := time.Now()
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(hostspeed.Scale(20 * time.Second)):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("still running 20 s after %v", c.sig)
			}
			took := time.Since(sent)
			if took > bound {
				t.Errorf("stopped %v after %v, want within %v (0.5 s × the host's slowness)", took, c.sig, bound)
			}
			if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Errorf("exit %d, want %d", code, exitInterrupted)
			}
			if got := errb.String(); got != "stormguard: interrupted: context canceled\n" {
				t.Errorf("stderr = %q, want one line saying interrupted", got)
			}
			t.Logf("stopped %v after the signal", took.Round(time.Millisecond))
		})
	}
}

// TestSimStandardInput: sim - reads the scenario from standard input.
func TestSimStandardInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = r
	t.Cleanup(func() { os.Stdin = old; r.Close() })
	go func() {
		w.Write(guarded("duration: 10s\n", "arrivals: {rate: 10}"))
		w.Close()
	}()
	code, out, errs := runCmd(t, t.Context(), "sim", "-", "--json")
	if code != exitOK || !strings.Contains(out, `"scenario":"g"`) {
		t.Errorf("exit %d, stdout %.80q, stderr %q", code, out, errs)
	}
}

// TestLimitFlags: --max-events and --max-memory lift or lower the limits.
func TestLimitFlags(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, guarded("duration: 10s\n", "arrivals: {rate: 100}"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(long, guarded("duration: 3000h\n", "arrivals: {rate: 1}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"sim", small, "--json"}, exitOK, ""},
		{[]string{"sim", small, "--max-events", "1000"}, exitUsage, "the run would simulate about 4020 events (clients.app.arrivals.rate 100/s × duration 10s); the limit is 1000; raise it with --max-events"},
		{[]string{"sim", small, "--max-memory", "1MB"}, exitUsage, "the limit is 1 MB; raise it with --max-memory"},
		{[]string{"sim", small, "--max-memory", "1MB", "--max-events", "inf", "--max-memory", "16GiB", "--json"}, exitOK, ""},
		{[]string{"sim", small, "--max-events", "-5"}, exitUsage, `invalid value "-5" for flag -max-events: want a number of events of at least 1`},
		{[]string{"sim", small, "--max-memory", "lots"}, exitUsage, `invalid value "lots" for flag -max-memory: want a size such as 512MB`},
		{[]string{"sweep", small, "--max-events", "10", "--no-phase"}, exitUsage, "the sweep would simulate about"},
		// A report of ten million bins: the series stream to it, but
		// writing them takes time.
		{[]string{"sim", long, "--out", filepath.Join(dir, "report")}, exitUsage,
			"the run would simulate about 2.2e9 events (--out: the report's tables and charts of 1.08e7 bins × 2 series); the limit is 2e9; raise it with --max-events"},
	} {
		code, _, errs := runCmd(t, t.Context(), c.args...)
		if code != c.code || !strings.Contains(memFigure(errs), memFigure(c.want)) || c.want == "" && errs != "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// TestLimitFlagsHelp: the help of sim and sweep tells of both flags and
// their defaults, which are the simulator's.
func TestLimitFlagsHelp(t *testing.T) {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	new(limitFlags).set(fs)
	for _, h := range []string{simHelp, sweepHelp} {
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(h, "--"+f.Name+" ") || !strings.Contains(h, "default "+f.DefValue) {
				t.Errorf("a help does not give --%s and its default %s", f.Name, f.DefValue)
			}
		})
	}
	if got := fs.Lookup("max-events").DefValue; got != "2e9" || sim.DefaultMaxEvents != 2e9 {
		t.Errorf("--max-events defaults to %s", got)
	}
	if got := fs.Lookup("max-memory").DefValue; got != "4GB" || sim.DefaultMaxMemory != 4e9 {
		t.Errorf("--max-memory defaults to %s", got)
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64 // 0: an error
	}{
		{"4GB", 4e9}, {"4gb", 4e9}, {"4 GB", 4e9}, {"512MB", 512e6}, {"2GiB", 2 << 30}, {"1.5G", 1.5e9},
		{"100", 100}, {"100B", 100}, {"3kB", 3000}, {"1TiB", 1 << 40}, {"inf", math.Inf(1)}, {"INF", math.Inf(1)},
		{"", 0}, {"GB", 0}, {"0", 0}, {"-4GB", 0}, {"0.1B", 0}, {"4XB", 0}, {"NaN", 0}, {"1e400", 0}, {"1e300TB", 0},
	} {
		got, err := parseSize(c.in)
		if c.want == 0 && err == nil || c.want != 0 && (err != nil || got != c.want) {
			t.Errorf("parseSize(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseEventsAndSeed(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
	}{{"2e9", 2e9}, {"1000", 1000}, {"inf", math.Inf(1)}, {"0", 0}, {"-1", 0}, {"NaN", 0}, {"x", 0}, {"0.5", 0}} {
		got, err := parseEvents(c.in)
		if c.want == 0 && err == nil || c.want != 0 && (err != nil || got != c.want) {
			t.Errorf("parseEvents(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{{"0", 0, true}, {"7", 7, true}, {"18446744073709551615", math.MaxUint64, true}, {"18446744073709551616", 0, false}, {"-1", 0, false}, {"1e3", 0, false}, {"", 0, false}} {
		got, err := parseSeed(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSeed(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"4GB", "512MiB", "1e9", "inf", "3 kb", "", "-1", "1e400", "NaN", "0.5B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSize(s)
		if err != nil {
			if v != 0 || !strings.HasPrefix(err.Error(), "want a size") {
				t.Fatalf("parseSize(%q) = %v, %v", s, v, err)
			}
			return
		}
		if !(v >= 1) {
			t.Fatalf("parseSize(%q) = %v: a limit must be at least a byte", s, v)
		}
		// What String writes, Set reads back.
		sv := sizeFlag(v)
		var back sizeFlag
		if err := back.Set(sv.String()); err != nil || math.Abs(float64(back)-v) > 1e-9*v {
			t.Fatalf("%q → %v → %q → %v, %v", s, v, sv.String(), float64(back), err)
		}
	})
}

func FuzzParseEvents(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"2e9", "1000", "inf", "0", "-1", "NaN", "1e400", " 5 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseEvents(s)
		if err != nil {
			if v != 0 {
				t.Fatalf("parseEvents(%q) = %v with %v", s, v, err)
			}
			return
		}
		if !(v >= 1) {
			t.Fatalf("parseEvents(%q) = %v", s, v)
		}
		ev := eventsFlag(v)
		var back eventsFlag
		if err := back.Set(ev.String()); err != nil || float64(back) != v {
			t.Fatalf("%q → %v → %q → %v, %v", s, v, ev.String(), float64(back), err)
		}
	})
}

func FuzzParseSeed(f *testing.F) {
	quickMinimize()
	for _, s := range []string{"0", "7", "18446744073709551615", "18446744073709551616", "-1", "0x10", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSeed(s)
		if err != nil {
			if v != 0 || !strings.Contains(err.Error(), "want a whole number") {
				t.Fatalf("parseSeed(%q) = %v, %v", s, v, err)
			}
			return
		}
		if back, err := parseSeed(fmt.Sprint(v)); err != nil || back != v {
			t.Fatalf("parseSeed(%q) = %v, but %v reads back as %v, %v", s, v, v, back, err)
		}
	})
}

// quickMinimize bounds, unless -fuzzminimizetime is given, how long the
// fuzzer spends minimizing each input that finds new coverage: 60 s by
// default, during which it fuzzes nothing else (0 execs/s); a shard's part
// of a few kilobytes ran it out. Call it at the top of a Fuzz function.
func quickMinimize() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		flag.Set("test.fuzzminimizetime", "3s")
	}
}

// memFigure hides the figure of a memory estimate ("about 7.47 GB of
// memory"): it follows the size of the result's bins, which grows with the
// simulator's series; sim's TestEstimateMatchesTheSimulator checks it.
func memFigure(s string) string {
	return memRE.ReplaceAllString(s, "about N of memory")
}

var memRE = regexp.MustCompile(`about [0-9.]+ [KMGT]?B of memory`)
