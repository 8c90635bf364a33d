// Package leakcheck finds goroutines a test started and left running.
//
// Call [Check] first thing in a test:
//
//	func TestX(t *testing.T) {
//		leakcheck.Check(t)
//		srv := httptest.NewServer(h)
//		t.Cleanup(srv.Close)
//		…
//	}
//
// Check records the goroutines alive when it is called and registers a
// cleanup. Cleanups run last-in first-out, so the check runs after every
// cleanup the test registered later (closing servers, closing idle
// connections). It then waits up to two seconds for every goroutine that was
// not there at the start to end, and fails the test with their stacks if some
// remain.
//
// Goroutines of the runtime and of the testing package are ignored. Nothing
// else is: a test that uses an http.Transport must close its idle connections
// (t.Cleanup(tr.CloseIdleConnections)) and close its servers, or their
// connection goroutines are reported.
//
// The check counts every goroutine of the process, so it is meant for tests
// that do not run in parallel with others (no t.Parallel).
package leakcheck

import (
	"bytes"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TB is the part of testing.TB that Check uses.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// Timeout is how long the check waits for new goroutines to end.
const Timeout = 2 * time.Second

// Check records the goroutines alive now and, when the test's cleanups run,
// reports those started since that are still alive after [Timeout].
func Check(t TB) {
	t.Helper()
	check(t, Timeout)
}

func check(t TB, timeout time.Duration) {
	base := make(map[uint64]bool)
	for _, g := range goroutines() {
		base[g.id] = true
	}
	t.Cleanup(func() {
		var leaked []goroutine
		deadline := time.Now().Add(timeout)
		for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
			leaked = leaked[:0]
			for _, g := range goroutines() {
				if !base[g.id] && !ignored(g.stack) {
					leaked = append(leaked, g)
				}
			}
			if len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(wait)
		}
		if len(leaked) == 0 {
			return
		}
		var b strings.Builder
		for _, g := range leaked {
			b.WriteString("\n\n")
			b.WriteString(g.stack)
		}
		t.Errorf("leakcheck: %d goroutine(s) still running %v after the test:%s", len(leaked), timeout, b.String())
	})
}

// goroutine is one entry of a runtime.Stack dump.
type goroutine struct {
	id    uint64
	stack string // the whole entry, header line included
}

// goroutines returns every goroutine of the process but the caller's.
func goroutines() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var gs []goroutine
	for i, entry := range bytes.Split(buf, []byte("\n\n")) {
		if i == 0 {
			continue // the calling goroutine comes first
		}
		if g, ok := parse(string(bytes.TrimSpace(entry))); ok {
			gs = append(gs, g)
		}
	}
	return gs
}

// parse reads an entry that starts "goroutine 42 [chan receive]:".
func parse(entry string) (goroutine, bool) {
	rest, ok := strings.CutPrefix(entry, "goroutine ")
	if !ok {
		return goroutine{}, false
	}
	num, _, ok := strings.Cut(rest, " ")
	if !ok {
		return goroutine{}, false
	}
	id, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return goroutine{}, false
	}
	return goroutine{id: id, stack: entry}, true
}

// ignoredFrames are functions whose presence in a stack marks a goroutine of
// the runtime or of the testing package.
var ignoredFrames = []string{
	"\ntesting.tRunner(",
	"\ntesting.(*T).Run(",
	"\ntesting.(*M).",
	"\ntesting.runTests(",
	"\ntesting.runFuzzing(",
	"\ntesting.runExamples(",
	"\nruntime.ensureSigM",
	"\nos/signal.signal_recv(",
	"\nos/signal.loop(",
	"\nruntime.ReadTrace(",
	"\nruntime/trace.",
	"\nruntime/pprof.",
}

func ignored(stack string) bool {
	return slices.ContainsFunc(ignoredFrames, func(f string) bool { return strings.Contains(stack, f) })
}
