//go:build linux

package lab

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickYAML is quickScenario as a file, for the command line.
const quickYAML = `name: quick
duration: 20s
clients:
  - {name: users, target: db, arrivals: {kind: poisson, rate: 100}, timeout: 500ms}
services:
  - {name: db, workers: 4, service_time: {kind: constant, mean: 10ms}}
`

// startLab starts `stormguard lab FILE` as a process and waits until its
// three roles run; it returns the command and the roles' pids.
func startLab(t *testing.T) (*exec.Cmd, *bytes.Buffer, []int) {
	t.Helper()
	bin := stormguardBinary(t)
	file := filepath.Join(t.TempDir(), "quick.yaml")
	if err := os.WriteFile(file, []byte(quickYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "lab", file)
	// A killed orchestrator cannot remove its directory: keep it in ours.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if kids := childrenOf(cmd.Process.Pid); len(kids) == 3 {
			time.Sleep(500 * time.Millisecond) // let the run start
			return cmd, &stderr, kids
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the lab did not start its three roles; stderr: %s", stderr.String())
	return nil, nil, nil
}

// TestInterrupt sends SIGINT (Ctrl-C) to a running `stormguard lab`: it
// exits with status 130 and its roles end with it.
func TestInterrupt(t *testing.T) {
	cmd, stderr, kids := startLab(t)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("exit: %v, want status 130; stderr: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stormguard lab did not exit after SIGINT")
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr = %q, want it to say interrupted", stderr.String())
	}
	checkPIDsGone(t, kids)
}

// TestOrchestratorKilled kills a running `stormguard lab` with SIGKILL,
// so that it cannot clean up: its roles die with it (Pdeathsig, and the
// end of their stdin).
func TestOrchestratorKilled(t *testing.T) {
	cmd, _, kids := startLab(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	checkPIDsGone(t, kids)
}

// checkPIDsGone waits up to 3 s for the processes to end. They are not
// our children (their parent was killed), so init reaps them.
func checkPIDsGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if running(pid) {
			t.Errorf("role pid %d is still running", pid)
		}
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids
}
