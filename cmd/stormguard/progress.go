package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progressDelay: runs that finish sooner show no bar at all.
const progressDelay = 2 * time.Second

// progress draws a bar of the runs' virtual time done, on a terminal only,
// from progressDelay after it starts. set is safe for concurrent use.
type progress struct {
	fracs []atomic.Uint64 // math.Float64bits of each run's fraction done
	w     io.Writer       // nil when inactive
	done  chan struct{}
	wg    sync.WaitGroup
}

// newProgress returns a progress for n runs that draws on w if w is a
// terminal; stop it with stop.
func newProgress(w io.Writer, n int) *progress {
	p := &progress{fracs: make([]atomic.Uint64, n)}
	if isTerminal(w) {
		p.w, p.done = w, make(chan struct{})
		p.wg.Go(p.loop)
	}
	return p
}

// set records that run i is frac done.
func (p *progress) set(i int, frac float64) { p.fracs[i].Store(math.Float64bits(frac)) }

// stop erases the bar, if one was drawn, and waits for the drawing to end.
func (p *progress) stop() {
	if p.done != nil {
		close(p.done)
		p.wg.Wait()
		p.done = nil
	}
}

func (p *progress) loop() {
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	drawn := false
	for {
		select {
		case <-p.done:
			if drawn {
				fmt.Fprint(p.w, "\r\033[K")
			}
			return
		case <-tick.C:
			if elapsed := time.Since(start); elapsed >= progressDelay {
				fmt.Fprint(p.w, p.line(elapsed))
				drawn = true
			}
		}
	}
}

// line is the bar: "\r[#######.......]  47%  1/4 runs  about 3s left".
func (p *progress) line(elapsed time.Duration) string {
	const width = 30
	var sum float64
	finished := 0
	for i := range p.fracs {
		f := math.Float64frombits(p.fracs[i].Load())
		sum += f
		if f >= 1 {
			finished++
		}
	}
	frac := min(1, sum/float64(len(p.fracs)))
	fill := int(frac * width)
	s := fmt.Sprintf("\r[%s%s] %3.0f%%  %d/%d runs", strings.Repeat("#", fill), strings.Repeat(".", width-fill), 100*frac, finished, len(p.fracs))
	if frac > 0.05 {
		left := time.Duration(float64(elapsed) * (1 - frac) / frac).Round(time.Second)
		s += fmt.Sprintf("  about %v left", left)
	}
	return s + "\033[K"
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
