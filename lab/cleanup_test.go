package lab

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMkdirTempOwner: MkdirTemp records this process as the owner, so
// RemoveStale leaves the directory alone while it lives.
func TestMkdirTempOwner(t *testing.T) {
	dir, err := MkdirTemp("owner-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if !strings.HasPrefix(filepath.Base(dir), DirPrefix+"owner-") || filepath.Dir(dir) != filepath.Clean(os.TempDir()) {
		t.Errorf("dir = %s, want %s%s… in %s", dir, DirPrefix, "owner-", os.TempDir())
	}
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		t.Fatal(err)
	}
	pid, _, ok := parseOwner(string(data))
	if !ok || pid != os.Getpid() {
		t.Errorf("owner file %q, want pid %d", data, os.Getpid())
	}
	if removed, _ := RemoveStale(""); slices.Contains(removed, dir) {
		t.Error("RemoveStale removed the directory of a live process")
	}
	if !fileExists(dir) {
		t.Error("the directory is gone")
	}
}

func TestParseOwner(t *testing.T) {
	tests := []struct {
		in    string
		pid   int
		start uint64
		ok    bool
	}{
		{"12 34\n", 12, 34, true},
		{"12 0\n", 12, 0, true},
		{"12 34", 0, 0, false}, // half written
		{"0 34\n", 0, 0, false},
		{"-3 34\n", 0, 0, false},
		{"12\n", 0, 0, false},
		{"12 34 56\n", 0, 0, false},
		{"x 34\n", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		pid, start, ok := parseOwner(tt.in)
		if pid != tt.pid || start != tt.start || ok != tt.ok {
			t.Errorf("parseOwner(%q) = %d, %d, %v; want %d, %d, %v", tt.in, pid, start, ok, tt.pid, tt.start, tt.ok)
		}
	}
}
