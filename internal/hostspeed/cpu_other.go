//go:build !linux

package hostspeed

import "time"

// threadCPU is not measured outside Linux: the CPU probe reports an idle
// host and the timer probe alone decides.
func threadCPU() (time.Duration, bool) { return 0, false }
