//go:build linux

package lab

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts a role process in a process group of its own (so the
// terminal's Ctrl-C reaches the orchestrator only, which stops the roles
// in order) and has the kernel kill it if the orchestrator dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the process group of a role process (the role and
// anything it started).
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

// alive reports whether a process with pid exists (a zombie counts until
// it is reaped).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
