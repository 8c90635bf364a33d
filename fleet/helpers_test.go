package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/hostspeed"
	"github.com/stormguard/stormguard/killswitch"
)

// helperEnv selects a helper mode when the test binary is run again as a
// child process (see startHelper).
const helperEnv = "STORMGUARD_FLEET_HELPER"

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{})
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// quietRedis drops go-redis's own log lines (connection refused while a
// test has Redis down on purpose).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testLogger returns a logger whose lines the test can read.
func testLogger() (*slog.Logger, *syncBuffer) {
	var buf syncBuffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), &buf
}

// newClient returns a go-redis client for addr, closed when the test ends.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(ClientOptions(addr, "", redisTimeout()))
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// redisTimeout bounds the round trips of tests in which Redis answers: a
// slow answer there is the host's slowness, not an outage, and must not
// make a process fall back. Tests of outages set shorter timeouts.
func redisTimeout() time.Duration { return hostspeed.Scale(time.Second) }

// envTimeout is the timeout a helper process uses for Redis: the parent's
// STORMGUARD_TIMEOUT (scaled to the host's speed), 200ms if unset.
func envTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("STORMGUARD_TIMEOUT")); err == nil {
		return d
	}
	return 200 * time.Millisecond
}

// aws2026 is the spec most tests share: capacity 500, a transient retry
// costs 14, a first-try success earns 1, refunds on.
func aws2026(t testing.TB) budget.Spec {
	t.Helper()
	s, err := budget.Preset("aws-2026")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// endProbationScript ends a probation that still runs, as if its lease TTL
// had passed, and does nothing when it ended already: a probation end
// written after a round trip cleared the field would stay in the state as
// one that ended without being seen (a copy of it promoted elsewhere is the
// case TestMovedStateStartsItsOwnProbation checks on purpose).
const endProbationScript = `if redis.call('HEXISTS', KEYS[1], 'prob') == 1 then return redis.call('HSET', KEYS[1], 'prob', 1) end return 0`

// endProbation ends the probation of a new token bucket at once, as if its
// lease TTL had passed (the pool fills to the capacity at the next round
// trip), and waits until every budget of bs has a full lease.
func endProbation(t testing.TB, addr, key string, bs ...*Budget) {
	t.Helper()
	rdb := newClient(t, addr)
	look := func() Level {
		lv, _ := Peek(context.Background(), rdb, key)
		return lv
	}
	// The state must exist: a field set on a missing key makes a hash
	// without a spec, a corrupt state.
	waitFor(t, hostspeed.Scale(5*time.Second), "the state to exist", func() bool { return look().Exists })
	st := "stormguard:budget:{" + key + "}"
	if err := rdb.Eval(context.Background(), endProbationScript, []string{st}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, hostspeed.Scale(5*time.Second), "the pool to fill", func() bool { lv := look(); return lv.Probation.IsZero() && lv.Tokens > 0 })
	for _, b := range bs {
		waitFor(t, hostspeed.Scale(5*time.Second), "a lease after the probation", func() bool { return b.Mode() == ModeFleet && b.hold.Load() >= b.want })
	}
}

// prefill leaves a token bucket of spec under key in Redis at addr, full,
// with no process: as a fleet that has been running a while and stopped.
func prefill(t testing.TB, addr, key string, spec budget.Spec) {
	t.Helper()
	logger, _ := testLogger()
	b, err := New(context.Background(), newClient(t, addr), Config{Key: key, Spec: spec, ID: "prefill", Logger: logger, Timeout: redisTimeout()})
	if err != nil {
		t.Fatal(err)
	}
	endProbation(t, addr, key, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	lv, err := Peek(context.Background(), newClient(t, addr), key)
	if err != nil || lv.Tokens != lv.Capacity || lv.Held != 0 || lv.Processes != 0 {
		t.Fatalf("prefilled: %+v, %v", lv, err)
	}
}

// waitFor polls cond every millisecond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tally counts what a worker did to a token bucket, in tokens.
type tally struct {
	Requests int64   `json:"requests"`
	Rewards  float64 `json:"rewards"`  // earned by first-try successes
	Granted  int64   `json:"granted"`  // retries granted
	Charged  float64 `json:"charged"`  // paid for them
	Refunded float64 `json:"refunded"` // given back (success with refund, or ignore)
	Refused  int64   `json:"refused"`
	// MaxRetryWait is the longest a RetryAt took.
	MaxRetryWait time.Duration `json:"max_retry_wait"`
	Mode         string        `json:"mode"` // at the end
	Stats        Stats         `json:"stats"`
	Slack        float64       `json:"slack"` // LeaseSlack at the end
	Log          []string      `json:"log"`   // the budget's log messages
}

// net is what the retries cost in the end.
func (t tally) net() float64 { return t.Charged - t.Refunded }

func (t *tally) add(o tally) {
	t.Requests += o.Requests
	t.Rewards += o.Rewards
	t.Granted += o.Granted
	t.Charged += o.Charged
	t.Refunded += o.Refunded
	t.Refused += o.Refused
	t.MaxRetryWait = max(t.MaxRetryWait, o.MaxRetryWait)
}

// workload drives a token-bucket budget with requests against a dependency
// that mostly fails: a first try succeeds with probability pFirst, a retry
// with probability pRetry. cost and reward are the spec's transient cost
// and reward.
type workload struct {
	pFirst, pRetry float64
	cost, reward   float64
	pause          time.Duration // between requests
}

// run works until stop is closed (or until is reached) and returns its
// tally.
func (w workload) run(b budget.Budget, seed uint64, until time.Time, stop <-chan struct{}) tally {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var t tally
	for time.Now().Before(until) {
		select {
		case <-stop:
			return t
		default:
		}
		now := time.Now()
		t.Requests++
		b.BeginAt(now)
		if rng.Float64() < w.pFirst {
			b.EndAt(now, budget.Success, budget.Ticket{})
			t.Rewards += w.reward
		} else {
			b.EndAt(now, budget.Failure, budget.Ticket{})
			start := time.Now()
			tk, ok := b.RetryAt(now, budget.Transient)
			t.MaxRetryWait = max(t.MaxRetryWait, time.Since(start))
			if ok {
				t.Granted++
				t.Charged += w.cost
				if rng.Float64() < w.pRetry {
					b.EndAt(now, budget.Success, tk)
					t.Refunded += w.cost
				} else {
					b.EndAt(now, budget.Failure, tk)
				}
			} else {
				t.Refused++
			}
		}
		if w.pause > 0 {
			time.Sleep(w.pause)
		}
	}
	return t
}

// child is a helper process started by startHelper.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncBuffer
}

// startHelper runs this test binary again in helper mode, with env added
// to the environment. Its stdout lines arrive on lines; closing stdin asks
// it to stop.
func startHelper(t *testing.T, mode string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 100), stderr: new(syncBuffer)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("helper %s stderr:\n%s", mode, c.stderr.String())
		}
	})
	return c
}

// next returns the child's next stdout line, failing after d.
func (c *child) next(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatalf("helper ended early; stderr:\n%s", c.stderr.String())
		}
		return l
	case <-time.After(d):
		t.Fatalf("helper said nothing for %v; stderr:\n%s", d, c.stderr.String())
	}
	return ""
}

// runHelper is the child's main: it returns the exit status.
func runHelper(mode string) int {
	var err error
	switch mode {
	case "spend":
		err = helperSpend()
	case "dials":
		err = helperDials()
	case "hold":
		err = helperHold()
	case "storm":
		err = helperStorm()
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helperSpend joins the budget, prints "ready", waits for "go" on stdin,
// runs the workload for STORMGUARD_DURATION and prints its tally as JSON.
func helperSpend() error {
	spec, _ := budget.Preset("aws-2026")
	rdb := redis.NewClient(ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), "", envTimeout()))
	defer rdb.Close()
	timeout := envTimeout()
	b, err := New(context.Background(), rdb, Config{
		Key:       os.Getenv("STORMGUARD_KEY"),
		Spec:      spec,
		FleetSize: 3,
		Timeout:   timeout, // three processes under the race detector on a small machine
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return fmt.Errorf("no go")
	}
	d, err := time.ParseDuration(os.Getenv("STORMGUARD_DURATION"))
	if err != nil {
		return err
	}
	seed, _ := strconv.ParseUint(os.Getenv("STORMGUARD_SEED"), 10, 64)
	w := workload{pFirst: 0.02, pRetry: 0.3, cost: 14, reward: 1, pause: 200 * time.Microsecond}
	t := w.run(b, seed, time.Now().Add(d), nil)
	t.Mode = b.Mode().String()
	t.Stats = b.Stats()
	if err := b.Close(); err != nil {
		return err
	}
	out, err := json.Marshal(t)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// helperHold joins the budget with a lease TTL of 300ms, prints "ready"
// and waits on stdin: the test kills it, as a crash would.
func helperHold() error {
	spec, _ := budget.Preset("aws-2026")
	rdb := redis.NewClient(ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), "", envTimeout()))
	timeout := envTimeout()
	b, err := New(context.Background(), rdb, Config{Key: os.Getenv("STORMGUARD_KEY"), Spec: spec, LeaseTTL: 300 * time.Millisecond, Timeout: timeout})
	if err != nil {
		return err
	}
	if b.Mode() != ModeFleet {
		return fmt.Errorf("mode %v", b.Mode())
	}
	if _, ok := b.RetryAt(time.Now(), budget.Transient); !ok { // spent from the lease, never reported
		return fmt.Errorf("retry refused")
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// helperDials watches the dials STORMGUARD_DIALS, prints "ready" once it
// has read them, then "change VERSION UNIXNANO" for every fleet state it
// applies, until stdin closes.
func helperDials() error {
	rdb := redis.NewClient(ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), "", envTimeout()))
	defer rdb.Close()
	var mu sync.Mutex
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(s)
	}
	d := new(killswitch.Dials)
	w, err := Watch(rdb, os.Getenv("STORMGUARD_DIALS"), d, WatchConfig{
		Timeout: envTimeout(),
		OnChange: func(s DialsState) {
			// The local dials are already set: show what they say.
			say(fmt.Sprintf("change %d %d %t %g", s.Version, time.Now().UnixNano(), d.RetriesDisabled(), d.ShedFraction()))
		},
	})
	if err != nil {
		return err
	}
	for !w.Stats().Connected {
		time.Sleep(time.Millisecond)
	}
	say("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return w.Close()
}

// parseChange reads "change VERSION UNIXNANO RETRIESOFF SHED".
func parseChange(t *testing.T, line string) (version int64, at time.Time, off bool, shed float64) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != "change" {
		t.Fatalf("unexpected helper line %q", line)
	}
	version, _ = strconv.ParseInt(f[1], 10, 64)
	ns, _ := strconv.ParseInt(f[2], 10, 64)
	off = f[3] == "true"
	shed, _ = strconv.ParseFloat(f[4], 64)
	return version, time.Unix(0, ns), off, shed
}

// helperStorm joins the budget STORMGUARD_KEY at STORMGUARD_REDIS_ADDR
// (FleetSize STORMGUARD_FLEET_SIZE, LeaseTTL STORMGUARD_LEASE_TTL, Timeout
// STORMGUARD_TIMEOUT, ID STORMGUARD_ID), prints "ready", waits for "go" on
// stdin, then retries against a dependency that always fails until stdin
// closes, and prints its tally as JSON, with its log messages.
func helperStorm() error {
	spec, _ := budget.Preset("aws-2026")
	rdb := redis.NewClient(ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), "", envTimeout()))
	defer rdb.Close()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, os.Stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))
	size, _ := strconv.Atoi(os.Getenv("STORMGUARD_FLEET_SIZE"))
	ttl, err := time.ParseDuration(os.Getenv("STORMGUARD_LEASE_TTL"))
	if err != nil {
		return err
	}
	timeout := envTimeout()
	b, err := New(context.Background(), rdb, Config{
		Key: os.Getenv("STORMGUARD_KEY"), Spec: spec, FleetSize: size, LeaseTTL: ttl,
		Timeout: timeout, ID: os.Getenv("STORMGUARD_ID"), Logger: logger,
	})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return fmt.Errorf("no go")
	}
	stop := make(chan struct{})
	go func() {
		for in.Scan() {
		}
		close(stop)
	}()
	w := workload{pFirst: 0, pRetry: 0, cost: 14, reward: 1, pause: 500 * time.Microsecond}
	t := w.run(b, uint64(os.Getpid()), time.Now().Add(time.Hour), stop)
	t.Mode = b.Mode().String()
	t.Stats = b.Stats()
	t.Slack = b.LeaseSlack()
	_ = b.Close()
	for _, l := range strings.Split(logs.String(), "\n") {
		if i := strings.Index(l, "msg="); i >= 0 {
			t.Log = append(t.Log, l[i:])
		}
	}
	out, err := json.Marshal(t)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}
