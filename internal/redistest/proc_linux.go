package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server when the test process
// dies, even by SIGKILL or a timeout, so that no redis-server outlives its
// test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
