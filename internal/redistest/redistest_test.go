package redistest

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// fakeTB records what requireBinary says instead of stopping the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                       {}
func (f *fakeTB) Skipf(format string, a ...any) { f.skipped = format }
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.failed = format
}

func TestMissingBinary(t *testing.T) {
	missing := func(string) (string, error) { return "", errors.New("not found") }
	var skip fakeTB
	if _, ok := requireBinary(&skip, false, missing); ok || skip.skipped == "" || skip.failed != "" {
		t.Errorf("without CI: ok %t, skipped %q, failed %q", ok, skip.skipped, skip.failed)
	}
	var fail fakeTB
	if _, ok := requireBinary(&fail, true, missing); ok || fail.failed == "" || fail.skipped != "" {
		t.Errorf("with CI=true: ok %t, skipped %q, failed %q", ok, fail.skipped, fail.failed)
	}
	if !strings.Contains(fail.failed, "CI=true") {
		t.Errorf("the failure does not say why: %q", fail.failed)
	}
}

func TestStartKillRestartPause(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("address %s", s.Addr())
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr()); err == nil {
		t.Error("a paused server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	s.Kill()
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("a killed server accepts connections")
	}
	if err := s.Pause(); err == nil {
		t.Error("Pause of a killed server succeeded")
	}
	s.Kill() // twice is fine
	s.Restart()
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
}

func TestStartWithPassword(t *testing.T) {
	s := Start(t, "--requirepass", "secret")
	if err := ping(s.Addr()); err != nil {
		t.Fatal(err)
	}
}
