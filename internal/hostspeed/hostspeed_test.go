package hostspeed

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFactorAtLeastOne(t *testing.T) {
	f := Factor()
	t.Logf("host slowness factor %.2f", f)
	if f < 1 || f > maxFactor {
		t.Fatalf("Factor() = %v, want within [1, %d]", f, maxFactor)
	}
	if got, want := Scale(time.Second), time.Duration(Factor()*float64(time.Second)); got != want {
		t.Fatalf("Scale(1s) = %v, want %v", got, want)
	}
}

func TestEnvironmentFloor(t *testing.T) {
	t.Setenv("STORMGUARD_SLOWNESS", "7.5")
	if f := Measure(); f < 7.5 {
		t.Fatalf("Measure() with STORMGUARD_SLOWNESS=7.5 = %v, want >= 7.5", f)
	}
	t.Setenv("STORMGUARD_SLOWNESS", "")
	Measure()
}

// TestBusyHostIsSlower starts two busy loops per core and checks that the
// CPU probe sees its share fall: with 2 spinners per core beside each probe
// the probe gets at most a third of a core, so the busy reading must clearly
// exceed the idle one. On a host that is already loaded by other processes
// the "idle" reading is itself high and both readings move with that load,
// so the test takes up to three idle/busy pairs, back to back, and passes on
// the first pair that shows the spinners; it fails only if none does.
func TestBusyHostIsSlower(t *testing.T) {
	if testing.Short() {
		t.Skip("spins every core")
	}
	var seen []string
	for range 3 {
		idle := cpuFactor()
		busy := withSpinners(2*runtime.GOMAXPROCS(0), cpuFactor)
		if busy >= 1.5 && busy >= idle*1.3 {
			return
		}
		seen = append(seen, fmt.Sprintf("idle %.2f busy %.2f", idle, busy))
	}
	t.Fatalf("cpuFactor with 2 spinners per core never read >= 1.5 and >= 1.3 × the idle reading taken just before: %s", strings.Join(seen, "; "))
}

// withSpinners runs f while n busy loops, each on its own OS thread, spin.
func withSpinners(n int, f func() float64) float64 {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			x := uint64(0)
			for !stop.Load() {
				x++
			}
			sink(x)
		})
	}
	v := f()
	stop.Store(true)
	wg.Wait()
	return v
}
