//go:build linux

package lab

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// procStat returns the fields of /proc/PID/stat after the command name
// (the first is the state, field 3), or false if there is no such
// process.
func procStat(pid int) ([]string, bool) {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(st[i+1:])), true
}

// processStart returns the start time of process pid, in clock ticks
// since boot (field 22 of /proc/PID/stat).
func processStart(pid int) (uint64, bool) {
	f, ok := procStat(pid)
	if !ok || len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// ownerAlive reports whether the process pid that started at start (0:
// not known) still runs; a zombie has ended. known is always true on
// Linux.
func ownerAlive(pid int, start uint64) (alive, known bool) {
	f, ok := procStat(pid)
	if !ok || len(f) < 20 {
		return false, true
	}
	if f[0] == "Z" || f[0] == "X" {
		return false, true
	}
	if start != 0 && f[19] != strconv.FormatUint(start, 10) {
		return false, true // the pid belongs to another process now
	}
	return true, true
}

// runQueueWait returns the time the threads of this process have spent
// runnable but waiting for a CPU, as the kernel counts it (the second
// field of /proc/self/task/*/schedstat), and false where it cannot be read.
func runQueueWait() (time.Duration, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	n := 0
	for _, t := range tasks {
		data, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread has ended
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		sum += time.Duration(v)
		n++
	}
	return sum, n > 0
}
