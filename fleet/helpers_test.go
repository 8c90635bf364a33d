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

// newBudget joins the budget key at addr with cfg (Key, Spec, a test
// logger and a generous timeout filled in when zero) and closes it when the
// test ends.
func newBudget(t testing.TB, addr string, cfg Config) (*Budget, *syncBuffer) {
	t.Helper()
	logger, logs := testLogger()
	if cfg.Spec.Kind == "" {
		cfg.Spec = aws2026(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = logger
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = redisTimeout()
	}
	b, err := New(context.Background(), newClient(t, addr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, logs
}

// credit puts tokens into the pool of key at addr, as the rewards of a
// fleet's first-try successes would (a process "filler" sends them).
func credit(t testing.TB, addr, key string, tokens int64) {
	t.Helper()
	b, _ := newBudget(t, addr, Config{Key: key, ID: "filler-" + strconv.FormatInt(rand.Int64(), 36)})
	for range tokens {
		b.EndAt(time.Time{}, budget.Success, budget.Ticket{})
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
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
	Log          []string      `json:"log"` // the budget's log messages
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
		sc.Buffer(make([]byte, 1<<16), 1<<22)
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
		// Lines the test did not read: the reader ends once they are
		// taken (Wait closed its pipe), not blocked on a full channel.
		for range c.lines {
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
	case "dials":
		err = helperDials()
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

// helperDials runs STORMGUARD_WATCHERS watchers (one Redis client each) of
// the dials STORMGUARD_DIALS, prints "ready" once all have read them, then
// "change INDEX VERSION UNIXNANO RETRIESOFF SHED" for every fleet state a
// watcher applies, until stdin closes.
func helperDials() error {
	n, _ := strconv.Atoi(os.Getenv("STORMGUARD_WATCHERS"))
	n = max(n, 1)
	poll, _ := time.ParseDuration(os.Getenv("STORMGUARD_POLL"))
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		out.WriteString(s + "\n")
		out.Flush()
	}
	var ws []*Watcher
	var clients []*redis.Client
	for i := range n {
		rdb := redis.NewClient(ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), "", envTimeout()))
		clients = append(clients, rdb)
		d := new(killswitch.Dials)
		w, err := Watch(rdb, os.Getenv("STORMGUARD_DIALS"), d, WatchConfig{
			Timeout:      envTimeout(),
			PollInterval: poll,
			Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnChange: func(s DialsState) {
				// The local dials are already set: show what they say.
				say(fmt.Sprintf("change %d %d %d %t %g", i, s.Version, time.Now().UnixNano(), d.RetriesDisabled(), d.ShedFraction()))
			},
		})
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		for !w.Stats().Connected {
			time.Sleep(time.Millisecond)
		}
	}
	say("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for i, w := range ws {
		w.Close()
		clients[i].Close()
	}
	return nil
}

// dialsChange is one line of a dials helper.
type dialsChange struct {
	watcher int
	version int64
	at      time.Time
	off     bool
	shed    float64
}

// parseChange reads "change INDEX VERSION UNIXNANO RETRIESOFF SHED".
func parseChange(t *testing.T, line string) dialsChange {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "change" {
		t.Fatalf("unexpected helper line %q", line)
	}
	var c dialsChange
	c.watcher, _ = strconv.Atoi(f[1])
	c.version, _ = strconv.ParseInt(f[2], 10, 64)
	ns, _ := strconv.ParseInt(f[3], 10, 64)
	c.at = time.Unix(0, ns)
	c.off = f[4] == "true"
	c.shed, _ = strconv.ParseFloat(f[5], 64)
	return c
}

// helperStorm joins the budget STORMGUARD_KEY at STORMGUARD_REDIS_ADDR
// (FleetSize STORMGUARD_FLEET_SIZE, Timeout STORMGUARD_TIMEOUT, ID
// STORMGUARD_ID), prints "ready", waits for "go" on stdin, then makes
// requests of which STORMGUARD_FIRST_OK succeed at the first try (the rest,
// and every retry, fail) until stdin closes, and prints its tally as JSON,
// with its log messages.
func helperStorm() error {
	spec, _ := budget.Preset("aws-2026")
	rdb := redis.NewClient(ClientOptions(os.Getenv("STORMGUARD_REDIS_ADDR"), "", envTimeout()))
	defer rdb.Close()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, os.Stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))
	size, _ := strconv.Atoi(os.Getenv("STORMGUARD_FLEET_SIZE"))
	firstOK, _ := strconv.ParseFloat(os.Getenv("STORMGUARD_FIRST_OK"), 64)
	b, err := New(context.Background(), rdb, Config{
		Key: os.Getenv("STORMGUARD_KEY"), Spec: spec, FleetSize: size,
		Timeout: envTimeout(), ID: os.Getenv("STORMGUARD_ID"), Logger: logger,
		RejoinInterval: 50 * time.Millisecond,
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
	w := workload{pFirst: firstOK, pRetry: 0, cost: 14, reward: 1, pause: 500 * time.Microsecond}
	t := w.run(b, uint64(os.Getpid()), time.Now().Add(time.Hour), stop)
	t.Mode = b.Mode().String()
	t.Stats = b.Stats()
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
