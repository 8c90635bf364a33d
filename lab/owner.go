package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DirPrefix starts the name of every directory the lab makes in the
// system's temporary directory (see [MkdirTemp]).
const DirPrefix = "stormguard-lab-"

// ownerFile, in a directory made by MkdirTemp, names the process that
// owns it: "PID START\n", START being the process's start time as the
// system counts it (Linux: clock ticks since boot, field 22 of
// /proc/PID/stat), so that a pid used again by another process does not
// keep a dead owner's directory alive.
const ownerFile = ".stormguard-owner"

// MkdirTemp makes a new directory in the system's temporary directory
// (os.TempDir), named DirPrefix, then name, then a random string, and
// records this process as its owner. The caller removes it when done; if
// this process dies first (SIGKILL, a test killed by its timeout), the
// next [RemoveStale] (which every [RunScenario] without Options.Dir
// calls) removes it.
func MkdirTemp(name string) (string, error) {
	dir, err := os.MkdirTemp("", DirPrefix+name)
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	pid := os.Getpid()
	start, _ := processStart(pid)
	tmp := filepath.Join(dir, ownerFile+".tmp")
	err = os.WriteFile(tmp, []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644)
	if err == nil {
		// Renamed into place, so that nobody reads half an owner.
		err = os.Rename(tmp, filepath.Join(dir, ownerFile))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("lab: %w", err)
	}
	return dir, nil
}

// RemoveStale removes the directories of dead lab processes from dir (the
// system's temporary directory if ""): those whose name starts with
// DirPrefix, that belong to this user and whose owner file names a
// process that has ended (or a pid now used by another process). A
// directory without an owner file, or whose owner cannot be checked on
// this system, is left alone. It returns the directories it removed.
func RemoveStale(dir string) ([]string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), DirPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !ownedByMe(path) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(path, ownerFile))
		if err != nil {
			continue
		}
		pid, start, ok := parseOwner(string(data))
		if !ok || pid == os.Getpid() {
			continue
		}
		if alive, known := ownerAlive(pid, start); alive || !known {
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, path)
	}
	return removed, errors.Join(errs...)
}

// parseOwner parses an owner file: "PID START\n".
func parseOwner(s string) (pid int, start uint64, ok bool) {
	f := strings.Fields(s)
	if len(f) != 2 || !strings.HasSuffix(s, "\n") {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, start, true
}
