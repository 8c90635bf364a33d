//go:build linux

package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/internal/hostspeed"
)

// writeOwner makes dir/name with an owner file holding content.
func writeOwner(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if content != "" {
		if err := os.WriteFile(filepath.Join(p, ownerFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(p, "role.json"), []byte("{}"), 0o644)
}

// TestRemoveStale: the directories of dead owners go, those of live
// owners, of others and without an owner stay.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	// A process that has ended and been reaped.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	// A live process, and one that has ended but is not reaped yet.
	live := exec.Command("sleep", "60")
	zombie := exec.Command("true")
	for _, c := range []*exec.Cmd{live, zombie} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		live.Process.Kill()
		live.Wait()
		zombie.Wait()
	})
	deadline := time.Now().Add(hostspeed.Scale(5 * time.Second))
	for {
		if f, ok := procStat(zombie.Process.Pid); ok && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("true did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	liveStart, ok := processStart(live.Process.Pid)
	if !ok {
		t.Fatal("no start time for a live process")
	}
	selfStart, _ := processStart(os.Getpid())
	owner := func(pid int, start uint64) string { return fmt.Sprintf("%d %d\n", pid, start) }
	for name, content := range map[string]string{
		DirPrefix + "dead":      owner(dead.Process.Pid, 0),
		DirPrefix + "zombie":    owner(zombie.Process.Pid, 0),
		DirPrefix + "reused":    owner(live.Process.Pid, liveStart+1), // the pid is another process's now
		DirPrefix + "live":      owner(live.Process.Pid, liveStart),
		DirPrefix + "livenost":  owner(live.Process.Pid, 0),
		DirPrefix + "self":      owner(os.Getpid(), selfStart),
		DirPrefix + "noowner":   "",
		DirPrefix + "garbled":   "12 x\n",
		DirPrefix + "truncated": fmt.Sprintf("%d", dead.Process.Pid),
		"other-dead":            owner(dead.Process.Pid, 0),
	} {
		writeOwner(t, dir, name, content)
	}
	os.WriteFile(filepath.Join(dir, DirPrefix+"file"), []byte(owner(dead.Process.Pid, 0)), 0o644)

	removed, err := RemoveStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range removed {
		got = append(got, strings.TrimPrefix(filepath.Base(p), DirPrefix))
	}
	slices.Sort(got)
	if want := []string{"dead", "reused", "zombie"}; !slices.Equal(got, want) {
		t.Errorf("removed %q, want %q", got, want)
	}
	for _, name := range got {
		if fileExists(filepath.Join(dir, DirPrefix+name)) {
			t.Errorf("%s is still there", name)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 8 {
		t.Errorf("%d entries left, want the 8 others", len(ents))
	}
}

// TestHelperHang is not a test of its own: TestTimedOutTestLeavesNothing
// runs this test binary with it alone, under a short -test.timeout.
func TestHelperHang(t *testing.T) {
	if os.Getenv("STORMGUARD_LAB_HELPER") != "hang" {
		t.Skip("run by TestTimedOutTestLeavesNothing")
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Println("hanging")
	select {} // until -test.timeout ends the binary
}

// TestTimedOutTestLeavesNothing runs a test that hangs until the test
// binary's -test.timeout kills it (no cleanup runs, not even TestMain's):
// its temporary directories stay, all inside one directory of its own,
// and the next start of the test binary removes it.
func TestTimedOutTestLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHang$", "-test.timeout=1s")
	cmd.Env = append(env, "STORMGUARD_LAB_HELPER=hang")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "test timed out") {
		t.Fatalf("the hanging test: %v\n%s", err, out)
	}
	ents, _ := os.ReadDir(tmp)
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), DirPrefix+"test-") {
		t.Fatalf("the timed-out binary left %v in the temporary directory, want one %stest-… directory", names(ents), DirPrefix)
	}
	// The next start.
	next := exec.Command(os.Args[0], "-test.run=^$")
	next.Env = env
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next start: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("after the next start the temporary directory holds %v, want nothing", names(ents))
	}
}

func names(ents []os.DirEntry) []string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name())
	}
	return s
}
