package lab

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
)

// The end-to-end tests run the roles as the real stormguard binary, built
// once for the package's tests (without -race: the race detector would
// slow the roles down and change what the lab measures; the roles' code
// runs under the race detector in process, in role_test.go).
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

// testMain runs the tests with the system's temporary directory pointed at
// a directory of their own, made by MkdirTemp: what they make there
// (t.TempDir, the lab's run directories, the stormguard binary) is
// removed when they end, and if the binary is killed first (by
// -test.timeout, or SIGKILL), by the next RemoveStale: the next test
// binary's start or the next lab run.
func testMain(m *testing.M) int {
	if removed, err := RemoveStale(""); len(removed) > 0 || err != nil {
		fmt.Fprintf(os.Stderr, "lab tests: removed %d directories of dead lab processes (%v)\n", len(removed), err)
	}
	root, err := MkdirTemp("test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(root)
	os.Setenv("TMPDIR", root)
	return m.Run()
}

// stormguardBinary builds the stormguard binary once and returns its path.
func stormguardBinary(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the lab's process tests need process groups and /bin/true")
	}
	buildOnce.Do(func() {
		binPath = filepath.Join(os.TempDir(), "stormguard")
		cmd := exec.Command(goTool(), "build", "-o", binPath, "github.com/stormguard/stormguard/cmd/stormguard")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building stormguard: %v", buildErr)
	}
	return binPath
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkGone fails unless every process of procs has ended and no port
// they listened on still accepts connections.
func checkGone(t *testing.T, procs []Proc) {
	t.Helper()
	if len(procs) == 0 {
		return
	}
	deadline := time.Now().Add(hostspeed.Scale(3 * time.Second))
	for _, p := range procs {
		for alive(p.PID) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(p.PID) {
			t.Errorf("%s (pid %d) is still running", p.Role, p.PID)
		}
		if p.Addr == "" {
			continue
		}
		if c, err := net.DialTimeout("tcp", p.Addr, hostspeed.Scale(500*time.Millisecond)); err == nil {
			c.Close()
			t.Errorf("%s's port %s still accepts connections", p.Role, p.Addr)
		}
	}
}
