// Package cputime reads the CPU time a process has used, for benchmarks
// that report it beside the wall clock: on a shared machine another
// process's work stretches the wall clock of whatever it interrupts, but
// not this process's CPU time, so the CPU figure is the steadier one.
package cputime

import "time"

// Process returns the CPU time this process has used, user and system,
// all threads (the garbage collector's included); false where the system
// does not say.
func Process() (time.Duration, bool) { return process() }
