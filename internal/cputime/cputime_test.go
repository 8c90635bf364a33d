package cputime

import (
	"runtime"
	"testing"
)

// TestProcessGrows: the CPU time read after some work is at least the
// time read before it, and, on a system that says, it grew.
func TestProcessGrows(t *testing.T) {
	before, ok := Process()
	x := 0
	for i := range 50_000_000 {
		x += i * i
	}
	runtime.KeepAlive(x)
	after, ok2 := Process()
	if ok != ok2 {
		t.Fatalf("ok %v then %v", ok, ok2)
	}
	if !ok {
		t.Skip("the system does not report CPU time")
	}
	if after <= before {
		t.Errorf("CPU time %v after the work, %v before", after, before)
	}
}
