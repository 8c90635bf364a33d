//go:build !linux

package redistest

import "os/exec"

// dieWithParent does nothing outside Linux: a server outlives a test
// process that is killed.
func dieWithParent(*exec.Cmd) {}
