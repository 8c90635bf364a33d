package policyfile_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/internal/leakcheck"
	"github.com/stormguard/stormguard/internal/livetest"
	"github.com/stormguard/stormguard/policyfile"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/wire"
)

// Two versions of one file that differ in every field a call's decisions
// read: A makes 2 attempts of at most 300 ms each, B 4 of at most 2 s; the
// server's deadline bound differs too.
const (
	versionA = "clients:\n  db:\n    max_attempts: 2\n    attempt_timeout: 300ms\nserver:\n  max_timeout: 3s\n"
	versionB = "clients:\n  db:\n    max_attempts: 4\n    attempt_timeout: 2s\nserver:\n  max_timeout: 4s\n"
)

func quiet() policyfile.LiveOption {
	return policyfile.LiveLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Reloaded under load, with -race: 8 goroutines send requests through
// Live.Transport to a server behind Live.Handler that always answers 503,
// while the file flips between versions A and B and is reloaded every
// millisecond or so. Every call is decided by one whole version — 2
// attempts each bounded by 300 ms (A), or 4 bounded by 2 s (B), as the
// Stormguard-Timeout of each attempt shows — never a mix, and every call
// ends as its version says (attempts exhausted): none is dropped.
func TestLiveReloadUnderLoad(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	livetest.WriteFile(t, path, versionA)
	l, err := policyfile.NewLive(path, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	type attempt struct {
		n       int
		timeout time.Duration
	}
	var (
		mu    sync.Mutex
		calls = map[string][]attempt{}
	)
	backend := httptest.NewServer(l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("Stormguard-Attempt"))
		d, _ := wire.ParseTimeout(r.Header.Get("Stormguard-Timeout"))
		mu.Lock()
		calls[r.Header.Get("X-Call")] = append(calls[r.Header.Get("X-Call")], attempt{n, d})
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	})))
	defer backend.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 16}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: l.Transport("db", base)}

	const workers, perWorker = 8, 150
	var failed atomic.Int64
	reloads := livetest.UnderLoad(t, l, path, []string{versionA, versionB}, workers, perWorker, func(w, i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, backend.URL, nil)
		req.Header.Set("X-Call", fmt.Sprintf("%d-%d", w, i))
		_, err := client.Do(req)
		var ge *retry.GiveUpError
		if !errors.As(err, &ge) || !errors.Is(ge.Reason, retry.ErrAttemptsExhausted) {
			failed.Add(1)
			t.Errorf("call %d-%d: %v; want a give-up with attempts exhausted", w, i, err)
		}
	})

	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	for id, as := range calls {
		version := "mixed"
		switch {
		case len(as) == 2 && livetest.All(as, func(a attempt) bool { return a.timeout > 0 && a.timeout <= 300*time.Millisecond }):
			version = "A"
		case len(as) == 4 && livetest.All(as, func(a attempt) bool { return a.timeout > 300*time.Millisecond && a.timeout <= 2*time.Second }):
			version = "B"
		}
		count[version]++
		if version == "mixed" {
			t.Errorf("call %s: attempts %+v are neither A's (2, ≤ 300ms) nor B's (4, ≤ 2s)", id, as)
		}
	}
	t.Logf("%d reloads applied under load; calls decided by A: %d, by B: %d, mixed: %d; state %+v",
		reloads, count["A"], count["B"], count["mixed"], l.State())
	if len(calls) != workers*perWorker || failed.Load() != 0 {
		t.Errorf("%d calls reached the server, %d failed otherwise; want %d and 0", len(calls), failed.Load(), workers*perWorker)
	}
	if reloads < 10 || count["A"] < 50 || count["B"] < 50 {
		t.Errorf("%d reloads, %d calls by A, %d by B: the test did not reload under load", reloads, count["A"], count["B"])
	}
	// The servers' books: every request that arrived at one of the
	// versions' servers ended there, as a failure (503).
	st := l.ServerStats()
	attempts := 0
	for _, as := range calls {
		attempts += len(as)
	}
	if st.Arrived != uint64(attempts) || st.Failed != st.Arrived || st.InFlight != 0 {
		t.Errorf("server stats %+v; want %d arrived, all failed, none in flight", st, attempts)
	}
}

// An invalid version is refused: Reload returns its FILE:LINE errors, an
// Error record carries them, State counts it, and the last good version
// keeps running; a valid one then applies, and the same bytes again change
// nothing.
func TestLiveRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	livetest.WriteFile(t, path, versionA)
	var logged bytes.Buffer
	l, err := policyfile.NewLive(path, policyfile.LiveLogger(slog.New(slog.NewJSONHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	good := l.Current()

	livetest.WriteFile(t, path, "clients:\n  db:\n    max_attempts: 0\n    attempt_timeout: 1000000h\n")
	err = l.Reload()
	if err == nil || !strings.Contains(err.Error(), path+":3: clients.db.max_attempts") || !strings.Contains(err.Error(), path+":4: clients.db.attempt_timeout") {
		t.Fatalf("Reload of an invalid file: %v; want its FILE:LINE errors", err)
	}
	if l.Current() != good {
		t.Error("the invalid version replaced the good one")
	}
	if s := l.State(); s.Refused != 1 || s.Applied != 0 || s.Version != good.Hash {
		t.Errorf("state %+v; want 1 refused, 0 applied, version %s", s, good.Hash)
	}
	rec := logged.String()
	if !strings.Contains(rec, `"level":"ERROR"`) || !strings.Contains(rec, "policy.yaml:3: clients.db.max_attempts") || !strings.Contains(rec, `"running":"`+good.Hash+`"`) {
		t.Errorf("log %s; want an Error record with the FILE:LINE errors and the running version", rec)
	}

	livetest.WriteFile(t, path, versionB)
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if l.Current() == good || l.State().Applied != 1 {
		t.Errorf("version B not applied: %+v", l.State())
	}
	r, _ := l.Current().Retrier("db")
	if r.Policy().MaxAttempts != 4 {
		t.Errorf("max_attempts %d; want B's 4", r.Policy().MaxAttempts)
	}
	b := l.Current()
	if err := l.Reload(); err != nil || l.Current() != b || l.State().Applied != 1 {
		t.Errorf("reloading the same bytes: %v, applied %d; want nothing to change", err, l.State().Applied)
	}
	if _, err := l.Current().Retrier("cache"); err == nil || !strings.Contains(err.Error(), "no client policy") {
		t.Errorf("Retrier(cache): %v", err)
	}
}

// What a reload does not change keeps its state; a changed budget starts
// at the old one's share.
func TestLiveCarriesState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	const base = "clients:\n  db: stormguard\n  search:\n    preset: stormguard\n    breaker: stormguard\n"
	livetest.WriteFile(t, path, base)
	l, err := policyfile.NewLive(path, quiet())
	if err != nil {
		t.Fatal(err)
	}
	db0, _ := l.Current().Retrier("db")
	search0, _ := l.Current().Retrier("search")
	srv0 := l.Current().Server()
	// Spend 60 of search's 100 tokens: 3 requests that fail 3 times, 2
	// retries of 10 tokens each.
	for range 3 {
		c := search0.StartAt(time.Time{}, time.Time{})
		for search0.EndAt(time.Time{}, &c, retry.Transient, retry.Signal{}, 0).Retry {
			search0.NextAt(time.Time{}, &c)
		}
	}
	// search: more attempts, the same budget and breaker; db: a budget
	// twice as large; the server: unchanged.
	livetest.WriteFile(t, path, "clients:\n  db:\n    preset: stormguard\n    budget: {capacity: 200}\n  search:\n    preset: stormguard\n    max_attempts: 2\n    breaker: stormguard\n")
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	db1, _ := l.Current().Retrier("db")
	search1, _ := l.Current().Retrier("search")
	if search1 == search0 || search1.Budget() != search0.Budget() || search1.Breaker() != search0.Breaker() {
		t.Error("search: want a new retrier with the old budget and breaker")
	}
	if got := search1.Budget().(*budget.TokenBucket).Level(); got != 40 {
		t.Errorf("search's budget: %v tokens; want the 40 left", got)
	}
	if db1 == db0 || db1.Budget() == db0.Budget() {
		t.Error("db: want a new retrier and a new budget")
	}
	if got := db1.Budget().(*budget.TokenBucket).Level(); got != 200 {
		t.Errorf("db's new budget: %v tokens; want 200 (the old one was full)", got)
	}
	if l.Current().Server() != srv0 {
		t.Error("an unchanged server block built a new server")
	}
}

// Watch follows the file through the two ways it is replaced in
// production: a file renamed over it, and Kubernetes' swap of a
// ConfigMap's ..data symlink; a version that does not parse is refused and
// the last good one keeps running.
func TestLiveWatch(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	// The layout of a mounted ConfigMap: policy.yaml → ..data/policy.yaml,
	// ..data → ..2026_12_07_v1.
	v1 := filepath.Join(dir, "..2026_12_07_v1")
	if err := os.Mkdir(v1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v1, "policy.yaml"), []byte(versionA), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Base(v1), filepath.Join(dir, "..data")))
	path := filepath.Join(dir, "policy.yaml")
	must(os.Symlink(filepath.Join("..data", "policy.yaml"), path))

	l, err := policyfile.NewLive(path, quiet(), policyfile.LiveDebounce(20*time.Millisecond))
	must(err)
	defer l.Close()
	must(l.Watch())
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 10 s (state %+v)", what, l.State())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	attempts := func() int {
		r, _ := l.Current().Retrier("db")
		return r.Policy().MaxAttempts
	}

	// The ConfigMap is updated: a new directory, ..data swapped to it.
	v2 := filepath.Join(dir, "..2026_12_07_v2")
	must(os.Mkdir(v2, 0o755))
	must(os.WriteFile(filepath.Join(v2, "policy.yaml"), []byte(versionB), 0o644))
	must(os.Symlink(filepath.Base(v2), filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	wait("the ConfigMap's swap", func() bool { return attempts() == 4 })

	// An invalid version: refused, B keeps running.
	v3 := filepath.Join(dir, "..2026_12_07_v3")
	must(os.Mkdir(v3, 0o755))
	must(os.WriteFile(filepath.Join(v3, "policy.yaml"), []byte("clients:\n  db:\n    max_attempts: many\n"), 0o644))
	must(os.Symlink(filepath.Base(v3), filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	wait("the refusal", func() bool { return l.State().Refused >= 1 })
	if attempts() != 4 {
		t.Errorf("after an invalid version: %d attempts; want B's 4", attempts())
	}

	// A plain file renamed over the path.
	must(os.Remove(path))
	livetest.WriteFile(t, path, versionA)
	wait("the rename", func() bool { return attempts() == 2 })
	must(l.Close())
}
