//go:build !unix

package lab

import "time"

// processStart is not read on this system.
func processStart(int) (uint64, bool) { return 0, false }

// ownerAlive cannot tell on this system: stale directories stay.
func ownerAlive(int, uint64) (alive, known bool) { return false, false }

// ownedByMe is not checked on this system (ownerAlive decides nothing).
func ownedByMe(string) bool { return true }

// processCPU is not measured on this system.
func processCPU() time.Duration { return 0 }

// runQueueWait is not read on this system.
func runQueueWait() (time.Duration, bool) { return 0, false }
