//go:build linux

package lab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
)

// quickYAML is quickScenario as a file, for the command line, with a run
// of 5 minutes: long enough that a lab left running after its test ends
// outlives every bound of the test.
const quickYAML = `name: quick
duration: 5m
clients:
  - {name: users, target: db, arrivals: {kind: poisson, rate: 100}, timeout: 500ms}
services:
  - {name: db, workers: 4, service_time: {kind: constant, mean: 10ms}}
`

// startLab starts `stormguard lab FILE` as a process, with the system's
// temporary directory at tmp, and waits until its three roles run; it
// returns the command, its stderr and the roles' pids.
func startLab(t *testing.T, tmp string) (*exec.Cmd, *bytes.Buffer, []int) {
	t.Helper()
	cmd := exec.Command(stormguardBinary(t), "lab", quickFile(t))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	kids := waitForRoles(t, cmd.Process.Pid, &stderr)
	return cmd, &stderr, kids
}

// quickFile writes quickYAML into a file.
func quickFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "quick.yaml")
	if err := os.WriteFile(file, []byte(quickYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// waitForRoles waits until the lab orchestrator pid runs its three roles,
// and a little longer for the run to start; it returns their pids.
func waitForRoles(t *testing.T, pid int, stderr *bytes.Buffer) []int {
	t.Helper()
	deadline := time.Now().Add(hostspeed.Scale(10 * time.Second))
	for time.Now().Before(deadline) {
		if kids := childrenOf(pid); len(kids) == 3 {
			time.Sleep(500 * time.Millisecond) // let the run start
			return kids
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the lab did not start its three roles; stderr: %s", stderr.String())
	return nil
}

// TestInterrupt sends SIGINT (Ctrl-C) to a running `stormguard lab`: it
// exits with status 130 and its roles end with it.
func TestInterrupt(t *testing.T) {
	tmp := t.TempDir()
	cmd, stderr, kids := startLab(t, tmp)
	ports := listening(t, kids)
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
	case <-time.After(hostspeed.Scale(10 * time.Second)):
		t.Fatal("stormguard lab did not exit after SIGINT")
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr = %q, want it to say interrupted", stderr.String())
	}
	checkPIDsGone(t, kids)
	checkPortsClosed(t, ports)
	checkNoLabDir(t, tmp)
}

// TestOrchestratorKilled kills a running `stormguard lab` with SIGKILL,
// so that it cannot clean up: its roles die with it (Pdeathsig, and the
// end of their stdin), their ports close, and the directory it could not
// remove is removed by the next lab run.
func TestOrchestratorKilled(t *testing.T) {
	tmp := t.TempDir()
	cmd, _, kids := startLab(t, tmp)
	ports := listening(t, kids)
	dirs := labDirs(tmp)
	if len(dirs) != 1 {
		t.Fatalf("the running lab has directories %q in its temporary directory, want one", dirs)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	checkPIDsGone(t, kids)
	checkPortsClosed(t, ports)
	if !fileExists(dirs[0]) {
		t.Fatalf("%s is gone already: the test cannot see the next start remove it", dirs[0])
	}
	// The next start: a run that fails at once (its roles are not
	// stormguard), after removing the directories of dead labs.
	t.Setenv("TMPDIR", tmp)
	if _, err := RunScenario(t.Context(), quickScenario(time.Second, ""), "next", Options{Executable: "/bin/true"}); err == nil {
		t.Fatal("a run with /bin/true as its roles succeeded")
	}
	checkNoLabDir(t, tmp)
}

// startGoRun starts `go run …/cmd/stormguard lab FILE` in a process group
// of its own, with the system's temporary directory at tmp, and waits
// until the lab runs its roles. It returns the go command, the lab's
// orchestrator pid and the roles' pids.
func startGoRun(t *testing.T, tmp string) (*exec.Cmd, int, []int) {
	t.Helper()
	stormguardBinary(t) // the build cache then holds what go run needs
	cmd := exec.Command(goTool(), "run", "github.com/stormguard/stormguard/cmd/stormguard", "lab", quickFile(t))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: cmd.Wait would wait for every holder of a pipe
	// (the orphaned lab too) to close it.
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd.Stderr = errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	// go run builds (from its cache), then starts the binary as its child.
	deadline := time.Now().Add(hostspeed.Scale(60 * time.Second))
	for time.Now().Before(deadline) {
		for _, k := range childrenOf(cmd.Process.Pid) {
			if len(childrenOf(k)) == 3 {
				return cmd, k, waitForRoles(t, k, bytes.NewBuffer(nil))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := os.ReadFile(errFile.Name())
	t.Fatalf("go run did not start the lab and its roles; stderr: %s", out)
	return nil, 0, nil
}

// TestGoRunKilled kills the go command of `go run ./cmd/stormguard lab`
// with SIGKILL (SIGTERM is the same: go run passes no signal on): the lab
// notices that its parent is gone, stops its roles and removes its
// directory, as on Ctrl-C.
func TestGoRunKilled(t *testing.T) {
	tmp := t.TempDir()
	cmd, orch, kids := startGoRun(t, tmp)
	ports := listening(t, kids)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	checkPIDsGone(t, append([]int{orch}, kids...))
	checkPortsClosed(t, ports)
	checkNoLabDir(t, tmp)
}

// TestGoRunInterrupt is Ctrl-C under `go run`: SIGINT to the process
// group. go run ignores it and waits; the lab stops cleanly with status
// 130, and go run exits after it.
func TestGoRunInterrupt(t *testing.T) {
	tmp := t.TempDir()
	cmd, orch, kids := startGoRun(t, tmp)
	ports := listening(t, kids)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("go run exited with status 0 after Ctrl-C")
		}
	case <-time.After(hostspeed.Scale(10 * time.Second)):
		t.Fatal("go run did not exit after Ctrl-C")
	}
	checkPIDsGone(t, append([]int{orch}, kids...))
	checkPortsClosed(t, ports)
	checkNoLabDir(t, tmp)
}

// labDirs lists the lab's directories in tmp.
func labDirs(tmp string) []string {
	m, _ := filepath.Glob(filepath.Join(tmp, DirPrefix+"*"))
	return m
}

// checkNoLabDir fails if a lab directory is left in tmp.
func checkNoLabDir(t *testing.T, tmp string) {
	t.Helper()
	if d := labDirs(tmp); len(d) > 0 {
		t.Errorf("lab directories left: %q", d)
	}
}

// listening returns the addresses the processes pids listen on (TCP,
// IPv4), read from /proc: their sockets' inodes, matched in
// /proc/net/tcp.
func listening(t *testing.T, pids []int) []string {
	t.Helper()
	inodes := map[string]bool{}
	for _, pid := range pids {
		fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		for _, fd := range fds {
			l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
			if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		hostPort := strings.Split(f[1], ":")
		port, _ := strconv.ParseUint(hostPort[1], 16, 16)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
		if hostPort[0] != "0100007F" {
			t.Errorf("a role listens on %s (hex), not 127.0.0.1", f[1])
		}
	}
	// backend, proxy: the quick scenario has no app.
	if len(addrs) != 2 {
		t.Fatalf("the roles listen on %q, want two ports", addrs)
	}
	return addrs
}

// checkPortsClosed fails unless every address refuses connections, within
// a bound.
func checkPortsClosed(t *testing.T, addrs []string) {
	t.Helper()
	deadline := time.Now().Add(hostspeed.Scale(3 * time.Second))
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, hostspeed.Scale(500*time.Millisecond))
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Errorf("port %s still accepts connections", a)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// checkPIDsGone waits up to 3 s (scaled) for the processes to end. They
// are not our children (their parent was killed), so init reaps them.
func checkPIDsGone(t *testing.T, pids []int) {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(hostspeed.Scale(3 * time.Second))
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if running(pid) {
			t.Errorf("pid %d is still running after %v", pid, time.Since(begin).Round(time.Millisecond))
		}
	}
	t.Logf("%d processes ended within %v", len(pids), time.Since(begin).Round(time.Millisecond))
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
