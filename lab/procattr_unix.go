//go:build unix && !linux

package lab

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts a role process in a process group of its own. Without
// Pdeathsig, a role notices the orchestrator's death by the end of its
// standard input.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the process group of a role process.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

// alive reports whether a process with pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
