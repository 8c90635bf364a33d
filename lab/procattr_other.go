//go:build !unix

package lab

import (
	"os"
	"os/exec"
)

// setProcAttr does nothing where there are no process groups; a role
// notices the orchestrator's death by the end of its standard input.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the role process.
func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// alive cannot tell without process groups; it reports false.
func alive(int) bool { return false }
