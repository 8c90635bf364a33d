// Command storm shows, in a few lines of output, what a retry budget does to
// a dependency during an outage: 10,000 requests arrive over 10 s of virtual
// time while the dependency fails every attempt for the middle 4 s; each
// preset's retrier (the real core, driven in virtual time) decides what to
// retry. It prints the attempts the dependency received per request.
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"stormguard/retry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}

func run() error {
	start := time.Unix(0, 0)
	down0, down1 := start.Add(3*time.Second), start.Add(7*time.Second)
	fmt.Printf("%-13s %10s %12s %10s\n", "preset", "attempts", "per request", "succeeded")
	for _, name := range []string{"naive", "aws-standard", "aws-2026", "sre", "stormguard"} {
		p, err := retry.Preset(name)
		if err != nil {
			return err
		}
		r, err := retry.New(p)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(1, 2))
		attempts, ok := 0, 0
		const n = 10_000
		for i := range n {
			now := start.Add(time.Duration(i) * time.Millisecond)
			c := r.StartAt(now, time.Time{})
			for {
				attempts++
				cls := retry.Success
				if !now.Before(down0) && now.Before(down1) {
					cls = retry.Transient
				}
				d := r.EndAt(now, &c, cls, retry.Signal{}, rng.Float64())
				if !d.Retry {
					if d.Reason == nil {
						ok++
					}
					break
				}
				now = now.Add(d.Delay)
				r.NextAt(now, &c)
			}
		}
		fmt.Printf("%-13s %10d %12.2f %9.1f%%\n", name, attempts, float64(attempts)/n, 100*float64(ok)/n)
	}
	return nil
}
