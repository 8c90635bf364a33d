//go:build !unix

package bench

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
