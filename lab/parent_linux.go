//go:build linux

package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// parentIsGo reports whether process ppid is the go command (its
// executable, or else its command name, is "go").
func parentIsGo(ppid int) bool {
	if ppid <= 1 {
		return false
	}
	p := "/proc/" + strconv.Itoa(ppid)
	if exe, err := os.Readlink(p + "/exe"); err == nil {
		return filepath.Base(strings.TrimSuffix(exe, " (deleted)")) == "go"
	}
	comm, err := os.ReadFile(p + "/comm")
	return err == nil && strings.TrimSpace(string(comm)) == "go"
}
