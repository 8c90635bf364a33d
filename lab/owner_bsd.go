//go:build unix && !linux

package lab

import (
	"errors"
	"syscall"
	"time"
)

// processStart is not read outside Linux: the owner file records 0.
func processStart(int) (uint64, bool) { return 0, false }

// ownerAlive reports whether a process pid exists (signal 0 reaches it,
// or it belongs to another user). Without start times a reused pid keeps
// a stale directory until that process ends too.
func ownerAlive(pid int, _ uint64) (alive, known bool) {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM), true
}

// runQueueWait is not read outside Linux.
func runQueueWait() (time.Duration, bool) { return 0, false }
