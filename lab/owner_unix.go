//go:build unix

package lab

import (
	"os"
	"syscall"
)

// ownedByMe reports whether path belongs to this process's user.
func ownedByMe(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
