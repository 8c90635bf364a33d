package hostspeed

import (
	"runtime"
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

// TestBusyHostIsSlower starts one busy loop per core and checks that the
// CPU probe sees its share fall: with 2 spinners per core beside each probe
// the probe gets about a third of a core, so the ratio must clearly exceed
// an idle reading.
func TestBusyHostIsSlower(t *testing.T) {
	if testing.Short() {
		t.Skip("spins every core")
	}
	idle := cpuFactor()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
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
	busy := cpuFactor()
	stop.Store(true)
	wg.Wait()
	if busy < 1.5 || busy < idle*1.3 {
		t.Fatalf("cpuFactor: idle %.2f, with 2 spinners per core %.2f; want the busy reading >= 1.5 and >= 1.3 × idle", idle, busy)
	}
}
