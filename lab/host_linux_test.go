//go:build linux

package lab

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestStarvedRunIsInconclusive starves a lab run on purpose: its roles
// run at the lowest priority (nice 19) beside one busy loop per core at
// the normal one, so they get a few percent of a core. The run must come
// back inconclusive, with the figures, instead of a verdict.
func TestStarvedRunIsInconclusive(t *testing.T) {
	if testing.Short() {
		t.Skip("spins every core for a few seconds")
	}
	bin := stormguardBinary(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	opts := Options{Executable: bin, OnStart: func(p Proc) {
		if err := setNice(p.PID, 19); err != nil {
			t.Errorf("renicing %s: %v", p.Role, err)
		}
		if p.Role != RoleLoadgen { // the last to start
			return
		}
		// For the run's duration only: the drain after it need not be slow.
		end := time.Now().Add(startDelay + 3*time.Second)
		for range runtime.NumCPU() {
			wg.Go(func() {
				x := uint64(1)
				for !stop.Load() && time.Now().Before(end) {
					for range 10000 {
						x = x*6364136223846793005 + 1
					}
				}
				_ = x
			})
		}
	}}
	rr, err := RunScenario(t.Context(), quickScenario(3*time.Second, "hold"), "starved", opts)
	stop.Store(true)
	checkGone(t, rr.Procs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", rr.Host.Reason)
	if !rr.Host.Starved || rr.Result.Verdict != VerdictInconclusive || rr.Host.MeasuredVerdict == "" {
		t.Fatalf("a starved run: starved %v, verdict %q (measured %q): %s", rr.Host.Starved, rr.Result.Verdict, rr.Host.MeasuredVerdict, rr.Host.Reason)
	}
	if !strings.HasPrefix(rr.Host.Reason, "host starved: timers ") || !strings.HasPrefix(rr.Result.Why, "inconclusive (host starved") {
		t.Errorf("reason %q, why %q", rr.Host.Reason, rr.Result.Why)
	}
	if len(rr.Host.Roles) != 3 {
		t.Errorf("figures of %d roles, want 3", len(rr.Host.Roles))
	}
	checkAccounting(t, rr)
}

// setNice sets the nice value of every thread of process pid (on Linux
// it is a per-thread attribute; threads made later inherit it).
func setNice(pid, nice int) error {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
			return err
		}
	}
	return nil
}
